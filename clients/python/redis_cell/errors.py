"""Typed errors. Each carries the server's text in ``message``; where the
package explains a reply (``LibraryMissingError``, ``LimiterMismatchError``)
the text starts with the server's code and words, and the explanation follows.

They subclass redis-py's ``ResponseError`` so that code which already
catches redis-py's errors keeps catching these.

::

    CellError
    ├── ArgumentError            bad arguments (ERR invalid ..., ERR unknown option ...)
    ├── WrongTypeError           the key holds another kind of state (WRONGTYPE ...)
    │   └── LimiterMismatchError     a limits strategy met another strategy's key
    ├── OutOfRangeError          parameters the engine cannot compute with
    ├── ModuleOnlyError          policies, SHADOW, CL.TOP on the Functions twin
    └── EngineNotFoundError      no engine on the server can answer
        ├── ModuleMissingError       the module's commands are unknown (ERR unknown command)
        └── LibraryMissingError      the twin's library is missing and could not be loaded
"""

from __future__ import annotations

import re

from redis.exceptions import ResponseError

__all__ = [
    "ArgumentError",
    "CellError",
    "EngineNotFoundError",
    "LibraryMissingError",
    "LimiterMismatchError",
    "ModuleMissingError",
    "ModuleOnlyError",
    "OutOfRangeError",
    "WrongTypeError",
]


class CellError(ResponseError):
    """An error answered by redis-cell (module or twin), or raised by this package."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class ArgumentError(CellError):
    """The server refused the arguments (``ERR invalid ...``, ``ERR unknown option ...``)."""


class WrongTypeError(CellError):
    """The key holds another kind of state (``WRONGTYPE ...``, or ``ERR key
    holds ...`` for a string that is no state of this limiter)."""


class LimiterMismatchError(WrongTypeError):
    """A key written by one ``limits`` strategy and used by another (a fixed
    window limit and a moving window limit of the same item and
    identifiers). ``message`` names the key, what it holds and the way out;
    ``key`` is the key, ``holds`` what it holds, in words."""

    def __init__(self, message: str, key: str, holds: str) -> None:
        super().__init__(message)
        self.key = key
        self.holds = holds

    def __reduce__(self) -> tuple[type[LimiterMismatchError], tuple[str, str, str]]:
        # Exceptions unpickle as cls(*args), and args holds the message only:
        # without this, one sent to another process (multiprocessing, a task
        # queue's result) fails to unpickle.
        return (type(self), (self.message, self.key, self.holds))


class OutOfRangeError(CellError):
    """Parameters the engine cannot compute with (``ERR ... out of ... range``)."""


class ModuleOnlyError(CellError):
    """A feature the Functions twin does not have (policies, shadow mode, CL.TOP)."""


class EngineNotFoundError(CellError):
    """No engine on the server can answer: neither the module's commands nor
    the twin's functions were found (or the one chosen is gone)."""


class ModuleMissingError(EngineNotFoundError):
    """The module engine was chosen but the server does not know its commands
    (``ERR unknown command 'CL.THROTTLE'``): the module is not loaded there,
    or was unloaded."""


class LibraryMissingError(EngineNotFoundError):
    """The functions engine was chosen, the server has lost the twin's library
    (``ERR Function not found``: ``FUNCTION FLUSH``, a restart without
    persistence), and loading the shipped library again failed (the text
    says why: ``NOPERM``, no functions on the server, ...)."""


# The module's command families; an unknown command of any other name (FCALL
# on a server without functions, say) is not the module's absence.
_MODULE_COMMAND = re.compile(r"unknown command ['`](?:(?:CL|SW|FW|CC)\.|GCRA['`])", re.IGNORECASE)
# Redis 6.2 has no functions: FCALL itself is unknown there.
_NO_FCALL = re.compile(r"unknown command ['`]FCALL['`]", re.IGNORECASE)

# FCALL's own reply for a function the server does not have; only its start
# is matched, so that a text that merely quotes those words (an argument
# echoed in an error) is not taken for a lost library.
FUNCTION_NOT_FOUND = "ERR Function not found"

# The module's and the twin's texts for a string that is no state of the
# command's limiter: a wrong type too, not bad arguments.
_STATE_OF_ANOTHER_KIND = re.compile(
    r"^ERR key holds (?:a string that is not a valid|an exact sliding window;"
    r"|an APPROX sliding window;)"
)


def from_response(message: str) -> CellError:
    """Maps a server error text to its typed exception."""
    if message.startswith("WRONGTYPE") or _STATE_OF_ANOTHER_KIND.match(message):
        return WrongTypeError(message)
    if _MODULE_COMMAND.search(message):
        return ModuleMissingError(message)
    if message.startswith(FUNCTION_NOT_FOUND) or _NO_FCALL.search(message):
        return LibraryMissingError(message)
    if "range" in message and ("out of" in message or "overflows" in message):
        return OutOfRangeError(message)
    if "module-only" in message:
        return ModuleOnlyError(message)
    return ArgumentError(message)
