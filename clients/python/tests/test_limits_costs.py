"""Negative costs, side by side with limits' own Redis storage, and a key
that one strategy wrote used by another."""

from __future__ import annotations

import os
import uuid
from typing import Any

import pytest
import redis
from limits import RateLimitItemPerMinute
from limits.aio import strategies as aio_strategies
from limits.storage import RedisStorage, storage_from_string
from limits.strategies import (
    FixedWindowRateLimiter,
    MovingWindowRateLimiter,
    SlidingWindowCounterRateLimiter,
)

import redis_cell.limits  # noqa: F401
from redis_cell import LimiterMismatchError, WrongTypeError

from .conftest import twin_engine

STRATEGIES = {
    "moving": MovingWindowRateLimiter,
    "fixed": FixedWindowRateLimiter,
    "sliding": SlidingWindowCounterRateLimiter,
}
ASYNC_STRATEGIES = {
    "moving": aio_strategies.MovingWindowRateLimiter,
    "fixed": aio_strategies.FixedWindowRateLimiter,
    "sliding": aio_strategies.SlidingWindowCounterRateLimiter,
}

# Refunds of one and of more than was counted, from an absent key too, then
# hits up to and past the limit: every way a negative cost meets the count.
COSTS = [-1, 1, 1, -1, -1, 2, 3, 1, 1, -3, 1, 1, 1, 1, -10, 5, 2, 0, 7]


def _server(engine: str) -> tuple[str, str]:
    """The port of the server and our URI's query for ``engine``: the module's
    server, or the twin's (its functions, or the EVAL script)."""
    if engine == "module":
        return os.environ["CELL_MODULE_PORT"], ""
    port = os.environ["CELL_TWIN_PORT"]
    return port, "?engine=eval" if twin_engine() == "eval" else ""


def _observe(limiter: Any, item: Any, key: str, cost: int) -> tuple[Any, ...]:
    hit = limiter.hit(item, key, cost=cost)
    stats = limiter.get_window_stats(item, key)
    return hit, limiter.test(item, key), limiter.test(item, key, cost=-1), stats.remaining


async def _observe_async(limiter: Any, item: Any, key: str, cost: int) -> tuple[Any, ...]:
    hit = await limiter.hit(item, key, cost=cost)
    stats = await limiter.get_window_stats(item, key)
    test = await limiter.test(item, key)
    return hit, test, await limiter.test(item, key, cost=-1), stats.remaining


@pytest.mark.parametrize("engine", ["module", "twin"])
@pytest.mark.parametrize("strategy", sorted(STRATEGIES))
def test_negative_costs_as_limits_own_storage(strategy: str, engine: str) -> None:
    port, query = _server(engine)
    theirs = RedisStorage(f"redis://127.0.0.1:{port}")
    ours = storage_from_string(f"rediscell://127.0.0.1:{port}{query}")
    item = RateLimitItemPerMinute(5)
    key = uuid.uuid4().hex
    expected = [_observe(STRATEGIES[strategy](theirs), item, key + ":theirs", c) for c in COSTS]
    got = [_observe(STRATEGIES[strategy](ours), item, key + ":ours", c) for c in COSTS]
    assert got == expected
    # The fixed window's counter is limits' own, negative values too, and
    # its window's end is set as limits sets it.
    if strategy == "fixed":
        conn = theirs.get_connection()
        mine, other = (f"LIMITS:{item.key_for(key + side)}" for side in (":ours", ":theirs"))
        assert conn.get(mine) == conn.get(other)
        # (seconds apart on a loaded machine: the two sides run one after the other)
        assert abs(conn.ttl(mine) - conn.ttl(other)) <= 5


# The same, then hits that leave the count below 0, and a look (0) there.
INCRS = [*COSTS, -20, 1, 0, 3, 30]


@pytest.mark.parametrize("engine", ["module", "twin"])
def test_incr_answers_as_limits_own_storage(engine: str) -> None:
    """The storage's own incr (what limits' strategies compare to the limit,
    and what its users call): the count, negative ones too."""
    port, query = _server(engine)
    theirs = RedisStorage(f"redis://127.0.0.1:{port}")
    ours = storage_from_string(f"rediscell://127.0.0.1:{port}{query}")
    key = uuid.uuid4().hex
    got, expected = [], []
    for amount in INCRS:
        expected.append(theirs.incr(key + ":theirs", 60, amount))
        got.append(ours.incr(key + ":ours", 60, amount))
    assert got == expected


@pytest.mark.parametrize("implementation", ["coredis", "redispy", "valkey"])
async def test_async_incr_answers_as_limits_own_storage(implementation: str) -> None:
    port = os.environ["CELL_MODULE_PORT"]
    theirs = storage_from_string(f"async+redis://127.0.0.1:{port}", implementation=implementation)
    ours = storage_from_string(f"async+rediscell://127.0.0.1:{port}", implementation=implementation)
    key = uuid.uuid4().hex
    got, expected = [], []
    for amount in INCRS:
        expected.append(await theirs.incr(key + ":theirs", 60, amount))
        got.append(await ours.incr(key + ":ours", 60, amount))
    assert got == expected


@pytest.mark.parametrize("engine", ["module", "twin"])
def test_fixed_window_restarts_as_limits_own_storage(engine: str) -> None:
    """limits' INCRBY + EXPIRE sets the window's end again whenever the
    count it answers equals the cost: after refunds brought a counter back
    to 0, the next hit starts a new window. Before each call both keys'
    expiry is moved to 30 s, so that a call which sets it (to 60 s) is seen;
    the 5 s allowed is for a loaded machine's pauses between the calls."""
    port, query = _server(engine)
    theirs = RedisStorage(f"redis://127.0.0.1:{port}")
    ours = storage_from_string(f"rediscell://127.0.0.1:{port}{query}")
    conn = theirs.get_connection()
    item = RateLimitItemPerMinute(5)
    key = uuid.uuid4().hex
    keys = [f"LIMITS:{item.key_for(key + side)}" for side in (":theirs", ":ours")]
    for cost in [-1, 1, 1, -1, 2, -2, -2, 2, 1, 1, 0, -1, 3]:
        for k in keys:
            conn.pexpire(k, 30_000)
        hits = [
            FixedWindowRateLimiter(s).hit(item, key + side, cost=cost)
            for s, side in ((theirs, ":theirs"), (ours, ":ours"))
        ]
        assert hits[0] == hits[1], cost
        values, ttls = [conn.get(k) for k in keys], [conn.ttl(k) for k in keys]
        assert values[0] == values[1], (cost, values)
        assert abs(ttls[0] - ttls[1]) <= 5, (cost, values, ttls)


@pytest.mark.parametrize("implementation", ["coredis", "redispy", "valkey"])
async def test_async_fixed_window_restarts_as_limits_own_storage(implementation: str) -> None:
    port = os.environ["CELL_MODULE_PORT"]
    theirs = storage_from_string(f"async+redis://127.0.0.1:{port}", implementation=implementation)
    ours = storage_from_string(f"async+rediscell://127.0.0.1:{port}", implementation=implementation)
    conn = redis.Redis("127.0.0.1", int(port))
    item = RateLimitItemPerMinute(5)
    key = uuid.uuid4().hex
    keys = [f"LIMITS:{item.key_for(key + side)}" for side in (":theirs", ":ours")]
    for cost in [-1, 1, 1, -2, 2, 1]:
        for k in keys:
            conn.pexpire(k, 30_000)
        for storage, side in ((theirs, ":theirs"), (ours, ":ours")):
            await aio_strategies.FixedWindowRateLimiter(storage).hit(item, key + side, cost=cost)
        values, ttls = [conn.get(k) for k in keys], [conn.ttl(k) for k in keys]
        assert values[0] == values[1], (cost, values)
        assert abs(ttls[0] - ttls[1]) <= 5, (cost, values, ttls)
    conn.close()


@pytest.mark.parametrize("strategy", sorted(STRATEGIES))
@pytest.mark.parametrize("implementation", ["coredis", "redispy"])
async def test_async_negative_costs_as_limits_own_storage(
    strategy: str, implementation: str
) -> None:
    port = os.environ["CELL_MODULE_PORT"]
    theirs = storage_from_string(f"async+redis://127.0.0.1:{port}", implementation=implementation)
    ours = storage_from_string(f"async+rediscell://127.0.0.1:{port}", implementation=implementation)
    item = RateLimitItemPerMinute(5)
    key = uuid.uuid4().hex
    limiter = ASYNC_STRATEGIES[strategy]
    expected = [await _observe_async(limiter(theirs), item, key + ":t", c) for c in COSTS]
    got = [await _observe_async(limiter(ours), item, key + ":o", c) for c in COSTS]
    assert got == expected


def _message(key: str, holds: str, wanted: str) -> str:
    return (
        f"WRONGTYPE key LIMITS:{key} holds {holds}; a {wanted} window cannot use it: "
        "use another key prefix (the storage's key_prefix) for one of the two limits, "
        "or delete the key"
    )


FIXED = "a fixed window counter (limits' fixed-window strategy)"
MOVING = "a moving window log (limits' moving-window strategy)"


def _each_call_refused(
    limiter: Any, item: Any, key: str, holds: str, wanted: str
) -> list[LimiterMismatchError]:
    """Each call of ``limiter`` on a key another strategy wrote fails naming
    the key, what it ``holds`` and the fix; the errors, in call order."""
    out: list[LimiterMismatchError] = []
    for call in (limiter.hit, limiter.test, limiter.get_window_stats):
        with pytest.raises(LimiterMismatchError) as error:
            call(item, key)
        assert error.value.message == _message(item.key_for(key), holds, wanted)
        out.append(error.value)
    return out


@pytest.mark.parametrize("engine", ["module", "twin"])
def test_a_strategy_switch_names_the_key_and_the_fix(engine: str) -> None:
    port, query = _server(engine)
    storage = storage_from_string(f"rediscell://127.0.0.1:{port}{query}")
    item = RateLimitItemPerMinute(5)
    fixed, moving = FixedWindowRateLimiter(storage), MovingWindowRateLimiter(storage)
    sliding = SlidingWindowCounterRateLimiter(storage)

    key = uuid.uuid4().hex
    assert fixed.hit(item, key)
    for refused in _each_call_refused(moving, item, key, FIXED, "moving"):
        assert (refused.key, refused.holds) == (f"LIMITS:{item.key_for(key)}", FIXED)

    key = uuid.uuid4().hex
    assert moving.hit(item, key)
    for refused in _each_call_refused(fixed, item, key, MOVING, "fixed"):
        assert isinstance(refused, WrongTypeError)

    # A refund is the fixed window's first call on the moving window's key.
    key = uuid.uuid4().hex
    assert moving.hit(item, key)
    with pytest.raises(LimiterMismatchError) as error:
        fixed.hit(item, key, cost=-1)
    assert error.value.message == _message(item.key_for(key), MOVING, "fixed")

    # The sliding window counter keeps its own two keys, beside either.
    assert sliding.hit(item, key) and moving.hit(item, key)
    assert sliding.get_window_stats(item, key).remaining == 4


@pytest.mark.parametrize("implementation", ["coredis", "redispy", "valkey"])
async def test_async_strategy_switch_names_the_key_and_the_fix(implementation: str) -> None:
    uri = f"async+rediscell://127.0.0.1:{os.environ['CELL_MODULE_PORT']}"
    storage = storage_from_string(uri, implementation=implementation)
    item = RateLimitItemPerMinute(5)
    fixed = aio_strategies.FixedWindowRateLimiter(storage)
    moving = aio_strategies.MovingWindowRateLimiter(storage)
    key = uuid.uuid4().hex
    assert await fixed.hit(item, key)
    with pytest.raises(WrongTypeError) as error:
        await moving.hit(item, key)
    assert error.value.message == _message(item.key_for(key), FIXED, "moving")
    key = uuid.uuid4().hex
    assert await moving.hit(item, key)
    with pytest.raises(WrongTypeError) as error:
        await fixed.hit(item, key)
    assert error.value.message == _message(item.key_for(key), MOVING, "fixed")
    with pytest.raises(WrongTypeError) as error:
        await fixed.get_window_stats(item, key)
    assert error.value.message == _message(item.key_for(key), MOVING, "fixed")


def test_limits_own_moving_window_list_names_the_migration() -> None:
    """A list of limits' own moving window met by our fixed window too."""
    port = os.environ["CELL_MODULE_PORT"]
    theirs = RedisStorage(f"redis://127.0.0.1:{port}")
    ours = storage_from_string(f"rediscell://127.0.0.1:{port}")
    item = RateLimitItemPerMinute(5)
    key = uuid.uuid4().hex
    assert MovingWindowRateLimiter(theirs).hit(item, key)
    with pytest.raises(LimiterMismatchError, match="Migrating"):
        FixedWindowRateLimiter(ours).hit(item, key)
