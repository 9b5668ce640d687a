"""Typed errors. Each carries the server's text in ``message`` (with what
this package adds to it after the server's words, where it adds anything).

They subclass redis-py's ``ResponseError`` so that code which already
catches redis-py's errors keeps catching these.

::

    CellError
    ├── ArgumentError            bad arguments (ERR invalid ..., ERR unknown option ...)
    ├── WrongTypeError           the key holds another kind of state (WRONGTYPE ...)
    ├── OutOfRangeError          parameters the engine cannot compute with
    ├── ModuleOnlyError          policies, SHADOW, CL.TOP on the Functions twin
    └── EngineNotFoundError      no engine on the server can answer
        ├── ModuleNotLoadedError     the module's commands are unknown (ERR unknown command)
        └── LibraryNotLoadedError    the twin's library is missing and could not be loaded
"""

from __future__ import annotations

import re

from redis.exceptions import ResponseError

__all__ = [
    "ArgumentError",
    "CellError",
    "EngineNotFoundError",
    "LibraryNotLoadedError",
    "ModuleNotLoadedError",
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
    """The key holds another kind of state (``WRONGTYPE ...``)."""


class OutOfRangeError(CellError):
    """Parameters the engine cannot compute with (``ERR ... out of ... range``)."""


class ModuleOnlyError(CellError):
    """A feature the Functions twin does not have (policies, shadow mode, CL.TOP)."""


class EngineNotFoundError(CellError):
    """No engine on the server can answer: neither the module's commands nor
    the twin's functions were found (or the one chosen is gone)."""


class ModuleNotLoadedError(EngineNotFoundError):
    """The module engine was chosen but the server does not know its commands
    (``ERR unknown command 'CL.THROTTLE'``): the module is not loaded there,
    or was unloaded."""


class LibraryNotLoadedError(EngineNotFoundError):
    """The functions engine was chosen, the server has lost the twin's library
    (``ERR Function not found``: ``FUNCTION FLUSH``, a restart without
    persistence), and loading the shipped library again failed (the text
    says why: ``NOPERM``, no functions on the server, ...)."""


# The module's command families; an unknown command of any other name (FCALL
# on a server without functions, say) is not the module's absence.
_MODULE_COMMAND = re.compile(r"unknown command ['`](?:CL|SW|FW|CC)\.", re.IGNORECASE)
# Redis 6.2 has no functions: FCALL itself is unknown there.
_NO_FCALL = re.compile(r"unknown command ['`]FCALL['`]", re.IGNORECASE)

FUNCTION_NOT_FOUND = "Function not found"


def from_response(message: str) -> CellError:
    """Maps a server error text to its typed exception."""
    if message.startswith("WRONGTYPE"):
        return WrongTypeError(message)
    if _MODULE_COMMAND.search(message):
        return ModuleNotLoadedError(message)
    if FUNCTION_NOT_FOUND in message or _NO_FCALL.search(message):
        return LibraryNotLoadedError(message)
    if "range" in message and ("out of" in message or "overflows" in message):
        return OutOfRangeError(message)
    if "module-only" in message:
        return ModuleOnlyError(message)
    return ArgumentError(message)
