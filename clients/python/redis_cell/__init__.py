"""redis-cell for Python: typed helpers for the rate-limiting module's
commands (or its Functions twin) on redis-py, and, in ``redis_cell.limits``,
a storage for the ``limits`` library (flask-limiter, slowapi)."""

from ._engine import Engine, library_source
from ._types import (
    Decision,
    Duration,
    Fixed,
    Gcra,
    Lease,
    Limiter,
    Policy,
    PolicyInfo,
    Sliding,
    ThrottleAllDecision,
    TopEntry,
)
from .aio import AsyncCell
from .client import Cell
from .errors import (
    ArgumentError,
    CellError,
    EngineNotFoundError,
    LibraryMissingError,
    LimiterMismatchError,
    ModuleMissingError,
    ModuleOnlyError,
    OutOfRangeError,
    WrongTypeError,
)

__all__ = [
    "ArgumentError",
    "AsyncCell",
    "Cell",
    "CellError",
    "Decision",
    "Duration",
    "Engine",
    "EngineNotFoundError",
    "Fixed",
    "Gcra",
    "Lease",
    "LibraryMissingError",
    "Limiter",
    "LimiterMismatchError",
    "ModuleMissingError",
    "ModuleOnlyError",
    "OutOfRangeError",
    "Policy",
    "PolicyInfo",
    "Sliding",
    "ThrottleAllDecision",
    "TopEntry",
    "WrongTypeError",
    "library_source",
]
