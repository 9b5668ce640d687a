"""The error classes as user code meets them: pickled to another process,
caught by the classes it already catches. No server needed."""

from __future__ import annotations

import pickle

import pytest
import redis

import redis_cell
from redis_cell import CellError, errors

# Built from the module that defines them: that the package's root exports
# each one is what the second test checks.
EXAMPLES: list[CellError] = [
    errors.ArgumentError("ERR invalid limit: must be 0 or greater"),
    errors.WrongTypeError("WRONGTYPE Operation against a key holding the wrong kind of value"),
    errors.LimiterMismatchError(
        "WRONGTYPE key LIMITS:k holds ...", "LIMITS:k", "a fixed window counter"
    ),
    errors.OutOfRangeError("ERR period out of range"),
    errors.ModuleOnlyError("CL.TOP: module-only"),
    errors.EngineNotFoundError("redis-cell: the server has neither ..."),
    errors.ModuleMissingError("ERR unknown command 'CL.THROTTLE', with args beginning with: "),
    errors.LibraryMissingError("ERR Function not found: the server has lost ..."),
]


@pytest.mark.parametrize("error", EXAMPLES, ids=lambda e: type(e).__name__)
def test_each_class_pickles_with_its_fields(error: CellError) -> None:
    back = pickle.loads(pickle.dumps(error))
    assert type(back) is type(error)
    assert vars(back) == vars(error) and str(back) == str(error)


@pytest.mark.parametrize("error", EXAMPLES, ids=lambda e: type(e).__name__)
def test_each_class_is_exported_and_a_redis_error(error: CellError) -> None:
    assert getattr(redis_cell, type(error).__name__) is type(error)
    assert type(error).__name__ in redis_cell.__all__
    assert isinstance(error, redis.ResponseError) and isinstance(error, CellError)
