"""The one place that chooses the engine and turns a call into what is sent.

- ``module``: the module's commands (``CL.THROTTLE key ...``).
- ``functions``: the Functions twin (``FCALL cl_throttle 1 key ...``), Redis 7.0+
  and Valkey; the library is loaded only by an explicit ``load_functions()``.
- ``eval``: the twin's single EVAL script (``EVALSHA <sha> 1 key cl.throttle ...``),
  for servers with neither (Redis 6.2, some managed services); chosen only
  explicitly.

Detection (when no engine is given): ``COMMAND INFO CL.THROTTLE``, then
``FUNCTION LIST LIBRARYNAME redis_cell``; neither is an error naming both.
An ACL user that may not call ``COMMAND`` or ``FUNCTION`` passes the engine.

Once the functions engine is in use, a server that has lost the library
(``FUNCTION FLUSH``, a restart without persistence) answers "Function not
found": the clients load the shipped library again (``FUNCTION LOAD
REPLACE``, so that clients doing it at once all succeed) and send the call
once more, as redis-py's scripts do after ``SCRIPT FLUSH``. One reload per
call, never a loop: a load that fails, or a function still missing after it,
is ``LibraryMissingError``.
"""

from __future__ import annotations

import enum
from importlib import resources
from typing import Any

from ._commands import Call
from .errors import (
    FUNCTION_NOT_FOUND,
    CellError,
    EngineNotFoundError,
    LibraryMissingError,
    ModuleOnlyError,
    from_response,
)

LIBRARY = "redis_cell"


class Engine(str, enum.Enum):
    MODULE = "module"
    FUNCTIONS = "functions"
    EVAL = "eval"


def library_source(name: str = "redis_cell.lua") -> str:
    """The twin's Lua shipped in this package (the repository's ``functions/``)."""
    return resources.files("redis_cell").joinpath("lua", name).read_text(encoding="utf-8")


def response_errors(client: object) -> tuple[type[Exception], ...]:
    """The classes of the server's error replies for this client: redis-py's,
    and coredis' or valkey-py's when the client is theirs."""
    from redis.exceptions import ResponseError

    module = type(client).__module__
    if module.startswith("coredis"):
        from coredis.exceptions import ResponseError as CoredisError

        return (ResponseError, CoredisError)
    if module.startswith("valkey"):
        from valkey.exceptions import ResponseError as ValkeyError

        return (ResponseError, ValkeyError)
    return (ResponseError,)


def is_cluster_client(client: object, redis_cluster: type) -> bool:
    """A cluster client: redis-py's ``redis_cluster`` (sync or asyncio), or
    valkey-py's ``ValkeyCluster``, which takes the same routing options."""
    kind = type(client)
    return isinstance(client, redis_cluster) or (
        kind.__module__.startswith("valkey") and kind.__name__ == "ValkeyCluster"
    )


def engine_of(value: Engine | str | None) -> Engine | None:
    return None if value is None else Engine(value)


def choose(has_command: Any, has_library: Any) -> Engine:
    """Decides from the replies of ``COMMAND INFO`` and ``FUNCTION LIST`` (or the
    error ``FUNCTION LIST`` raised, where there are no functions)."""
    if isinstance(has_command, list) and has_command and has_command[0] is not None:
        return Engine.MODULE
    if isinstance(has_library, list) and has_library:
        return Engine.FUNCTIONS
    raise EngineNotFoundError(
        "redis-cell: the server has neither the module's commands (COMMAND INFO "
        "CL.THROTTLE found none: load libredis_cell.so) nor the Functions twin's library "
        f"'{LIBRARY}' (FUNCTION LIST found none: call load_functions() once); or pass "
        "engine='module', 'functions' or 'eval' explicitly"
    )


def check(call: Call[Any], engine: Engine) -> None:
    if call.module_only and engine is not Engine.MODULE:
        raise ModuleOnlyError(
            f"{call.name} {' '.join(str(a) for a in call.args)}: policies, SHADOW and CL.TOP "
            "are module-only; the Functions twin has none of them"
        )


def command_args(call: Call[Any], engine: Engine) -> list[Any]:
    """What ``execute_command`` sends for the module or the functions engine."""
    if engine is Engine.MODULE:
        numkeys = [len(call.keys)] if call.numkeys else []
        return [call.name, *numkeys, *call.keys, *call.args]
    function = call.name.lower().replace(".", "_")
    return ["FCALL", function, len(call.keys), *call.keys, *call.args]


def eval_args(call: Call[Any]) -> list[Any]:
    """The EVAL script's ARGV: the command's name, then its arguments."""
    return [call.name.lower(), *call.args]


# Error codes redis-py leaves in front of the text; from any other error
# redis-py has cut the leading "ERR ", which is put back here so that the
# exception carries the server's text.
_CODES = {"WRONGTYPE", "OOM", "BUSY", "NOSCRIPT", "NOREPLICAS", "MISCONF", "CROSSSLOT"}


def typed(error: Exception) -> Exception:
    """A redis-cell error as its typed exception; other errors (connection,
    NOPERM, READONLY, ...) unchanged."""
    if isinstance(error, CellError):
        return error
    text, kind = str(error), type(error).__name__
    if kind == "WrongTypeError":  # coredis: the code is the class, cut from the text
        return from_response(text if text.startswith("WRONGTYPE") else "WRONGTYPE " + text)
    # coredis names "unknown command" replies by a class of their own.
    if kind not in ("ResponseError", "UnknownCommandError"):
        return error
    if text.split(" ", 1)[0] not in _CODES and not text.startswith("ERR "):
        text = "ERR " + text
    return from_response(text)


def lost_library(error: Exception, engine: Engine) -> bool:
    """The functions engine's "Function not found": the library is gone from
    the server that answered, and loading it again may cure it."""
    converted = typed(error)
    return (
        engine is Engine.FUNCTIONS
        and isinstance(converted, LibraryMissingError)
        and converted.message.startswith(FUNCTION_NOT_FOUND)
    )


def _lost(error: Exception) -> str:
    text = typed(error)
    message = text.message if isinstance(text, CellError) else str(text)
    return (
        f"{message}: the server has lost redis-cell's Functions library '{LIBRARY}' "
        "(FUNCTION FLUSH, or a restart without persistence)"
    )


def load_failed(lost: Exception, load_error: Exception) -> LibraryMissingError:
    """The library is missing and loading the shipped one was refused."""
    return LibraryMissingError(
        f"{_lost(lost)} and loading the shipped one again failed: "
        f"{type(load_error).__name__}: {load_error}"
    )


def still_missing(lost: Exception) -> LibraryMissingError:
    """The library was loaded again, yet the function is still not found."""
    return LibraryMissingError(
        f"{_lost(lost)}; the shipped library was loaded again (FUNCTION LOAD REPLACE) "
        "and the function is still not found there"
    )
