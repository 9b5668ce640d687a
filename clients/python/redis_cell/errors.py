"""Typed errors. Each carries the server's text unchanged in ``message``.

They subclass redis-py's ``ResponseError`` so that code which already
catches redis-py's errors keeps catching these.
"""

from __future__ import annotations

from redis.exceptions import ResponseError

__all__ = [
    "ArgumentError",
    "CellError",
    "EngineNotFoundError",
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
    """The server has neither the module's commands nor the twin's functions."""


def from_response(message: str) -> CellError:
    """Maps a server error text to its typed exception."""
    if message.startswith("WRONGTYPE"):
        return WrongTypeError(message)
    if "range" in message and ("out of" in message or "overflows" in message):
        return OutOfRangeError(message)
    if "module-only" in message:
        return ModuleOnlyError(message)
    return ArgumentError(message)
