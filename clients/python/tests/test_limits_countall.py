"""The fixed window decided in the module: the storage sends the item's own
limit with COUNTALL, so that INFO and CL.TOP see every refusal, while the
keys, values and TTLs stay those of limits' own Redis storage, which runs
beside it on the same server (its prefix ``LIMITS``, ours ``CELL``)."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import redis
import redis.cluster
from limits import RateLimitItemPerMinute, RateLimitItemPerSecond
from limits.aio.strategies import FixedWindowRateLimiter as AsyncFixed
from limits.aio.strategies import MovingWindowRateLimiter as AsyncMoving
from limits.storage import storage_from_string
from limits.strategies import FixedWindowRateLimiter, MovingWindowRateLimiter

import redis_cell.limits as cell_limits
from redis_cell import Cell

from .conftest import twin_engine

HITS, LIMIT = 15, 10
REFUSED = HITS - LIMIT
# limits' own storage's EXPIRE and FW.INCR's window start a few ms apart
# (seconds on a loaded machine: the two sides run one after the other).
TTL_SLACK_MS = 5000


@dataclass
class Side:
    """Our storage and limits' own on one server (or cluster), a client to
    read their keys, and the module's nodes (none on the twin)."""

    ours: Any
    theirs: Any
    raw: Any
    nodes: list[redis.Redis]
    closers: list[Any]


def _twin_query() -> str:
    return "?engine=eval" if twin_engine() == "eval" else ""


def _sync_side(mode: str) -> Side:
    if mode == "cluster":
        ports = os.environ["CELL_CLUSTER_PORTS"].split(",")
        raw: Any = redis.cluster.RedisCluster("127.0.0.1", int(ports[0]))
        nodes = [redis.Redis("127.0.0.1", int(p)) for p in ports]
        ours = storage_from_string(f"rediscell+cluster://127.0.0.1:{ports[0]}", key_prefix="CELL")
        theirs = storage_from_string(f"redis+cluster://127.0.0.1:{ports[0]}")
        return Side(ours, theirs, raw, nodes, [raw, *nodes])
    port, query = (
        (os.environ["CELL_MODULE_PORT"], "")
        if mode == "module"
        else (os.environ["CELL_TWIN_PORT"], _twin_query())
    )
    raw = redis.Redis("127.0.0.1", int(port))
    ours = storage_from_string(f"rediscell://127.0.0.1:{port}{query}", key_prefix="CELL")
    theirs = storage_from_string(f"redis://127.0.0.1:{port}")
    return Side(ours, theirs, raw, [raw] if mode == "module" else [], [raw])


def _limited(nodes: list[redis.Redis]) -> int:
    """INFO redis-cell's fw_incr_limited, summed over the nodes."""
    total = 0
    for node in nodes:
        info = node.execute_command("INFO", "redis-cell")
        (field,) = [k for k in info if str(k).endswith("fw_incr_limited")]
        total += int(info[field])
    return total


def _top(nodes: list[redis.Redis], key: str) -> list[tuple[int, int]]:
    """(count, error) of ``key`` in CL.TOP, on each node that has it."""
    return [
        (entry.count, entry.error)
        for node in nodes
        for entry in Cell(node, engine="module").top(count=1024)
        if entry.key == key
    ]


def _keys(item: Any, ident: str) -> tuple[str, str]:
    return f"CELL:{item.key_for(ident)}", f"LIMITS:{item.key_for(ident)}"


def _same_state(raw: Any, ours: str, theirs: str) -> None:
    assert raw.get(ours) == raw.get(theirs) == str(HITS).encode()
    mine, other = raw.pttl(ours), raw.pttl(theirs)
    assert 0 < mine <= 60_000 and 0 < other <= 60_000
    assert abs(mine - other) <= TTL_SLACK_MS, (mine, other)


@pytest.fixture(params=["module", "twin", "cluster"])
def side(request: pytest.FixtureRequest) -> Iterator[Side]:
    s = _sync_side(request.param)
    yield s
    for c in s.closers:
        c.close()


def test_fixed_window_refusals_reach_info_and_top(side: Side) -> None:
    item = RateLimitItemPerMinute(LIMIT)
    ident = uuid.uuid4().hex
    mine, other = FixedWindowRateLimiter(side.ours), FixedWindowRateLimiter(side.theirs)
    before = _limited(side.nodes)
    got, expected = [], []
    for _ in range(HITS):
        expected.append((other.hit(item, ident), side.theirs.get(item.key_for(ident))))
        got.append((mine.hit(item, ident), side.ours.get(item.key_for(ident))))
    assert got == expected
    assert [hit for hit, _ in got] == [True] * LIMIT + [False] * REFUSED
    assert [count for _, count in got] == list(range(1, HITS + 1))
    stats = (mine.get_window_stats(item, ident), other.get_window_stats(item, ident))
    assert stats[0].remaining == stats[1].remaining == 0
    ours, theirs = _keys(item, ident)
    _same_state(side.raw, ours, theirs)
    if side.nodes:
        assert _limited(side.nodes) - before == REFUSED
        assert _top(side.nodes, ours) == [(REFUSED, 0)]
        # limits' own storage refuses in the client: the server saw nothing.
        assert _top(side.nodes, theirs) == []


ASYNC_MODES = [
    ("module", "redispy"),
    ("module", "coredis"),
    ("module", "valkey"),
    ("twin", "coredis"),
    ("twin", "redispy"),
]


@pytest.mark.parametrize(("mode", "implementation"), ASYNC_MODES)
async def test_async_fixed_window_refusals_reach_info_and_top(
    mode: str, implementation: str
) -> None:
    port, query = (
        (os.environ["CELL_MODULE_PORT"], "")
        if mode == "module"
        else (os.environ["CELL_TWIN_PORT"], _twin_query())
    )
    raw = redis.Redis("127.0.0.1", int(port))
    nodes = [raw] if mode == "module" else []
    ours = storage_from_string(
        f"async+rediscell://127.0.0.1:{port}{query}",
        implementation=implementation,
        key_prefix="CELL",
    )
    theirs = storage_from_string(f"async+redis://127.0.0.1:{port}", implementation=implementation)
    assert isinstance(ours, cell_limits.AsyncCellStorage)
    item = RateLimitItemPerMinute(LIMIT)
    ident = uuid.uuid4().hex
    mine, other = AsyncFixed(ours), AsyncFixed(theirs)
    before = _limited(nodes)
    got, expected = [], []
    for _ in range(HITS):
        expected.append((await other.hit(item, ident), await theirs.get(item.key_for(ident))))
        got.append((await mine.hit(item, ident), await ours.get(item.key_for(ident))))
    assert got == expected
    assert [hit for hit, _ in got] == [True] * LIMIT + [False] * REFUSED
    ours_key, theirs_key = _keys(item, ident)
    _same_state(raw, ours_key, theirs_key)
    if nodes:
        assert _limited(nodes) - before == REFUSED
        assert _top(nodes, ours_key) == [(REFUSED, 0)]
    raw.close()


def test_costs_count_as_incrby_and_over_the_limit(side: Side) -> None:
    """Costs, one above the limit (never fits, still counted), a look (0)
    and a refund: answers, values and expiries as limits' own."""
    item = RateLimitItemPerSecond(4, 30)
    ident = uuid.uuid4().hex
    mine, other = FixedWindowRateLimiter(side.ours), FixedWindowRateLimiter(side.theirs)
    got, expected = [], []
    for cost in [2, 5, 1, 0, -3, 1, 1, 2]:
        expected.append((other.hit(item, ident, cost=cost), side.theirs.get(item.key_for(ident))))
        got.append((mine.hit(item, ident, cost=cost), side.ours.get(item.key_for(ident))))
    assert got == expected
    ours, theirs = _keys(item, ident)
    assert side.raw.get(ours) == side.raw.get(theirs)
    assert abs(side.raw.pttl(ours) - side.raw.pttl(theirs)) <= TTL_SLACK_MS


def test_keys_without_a_limit_keep_counting_in_the_client(module_client: redis.Redis) -> None:
    """A key the storage cannot read a limit from (incr called directly, or
    a window that is not the key's) is counted with no limit: nothing is
    refused in the server."""
    ours = storage_from_string(f"rediscell://127.0.0.1:{os.environ['CELL_MODULE_PORT']}")
    before = _limited([module_client])
    ident = uuid.uuid4().hex
    lying = RateLimitItemPerMinute(1).key_for(ident)
    assert [ours.incr(f"custom:{ident}", 60) for _ in range(3)] == [1, 2, 3]
    assert [ours.incr(lying, 30) for _ in range(3)] == [1, 2, 3]
    assert _limited([module_client]) == before
    assert _top([module_client], f"LIMITS:{lying}") == []


@pytest.mark.parametrize(
    ("key", "expiry", "read"),
    [
        ("LIMITER/a/10/1/minute", 60, (10, 60)),
        ("LIMITER/a/b/c/0/2/hour", 7200, (0, 7200)),
        ("LIMITER/10/1/second", 1, (10, 1)),
        ("LIMITER/a/10/1/minute", 61, None),
        ("LIMITER/a/10/1/minutes", 60, None),
        ("LIMITER/a/ten/1/minute", 60, None),
        ("LIMITER/a/-1/1/minute", 60, None),
        ("LIMITER/a/1\u0662/1/minute", 60, None),
        ("LIMITER/a/10/0/minute", 0, None),
        ("10/1/minute", 60, None),
        ("LIMITER/a/" + "9" * 17 + "/1/minute", 60, None),
        ("LIMITER/a/" + "9" * 5000 + "/1/minute", 60, None),
        ("LIMITER/a/9007199254740992/1/minute", 60, None),
        ("LIMITER/a/9007199254740991/1/minute", 60, (9007199254740991, 60)),
        ("", 60, None),
    ],
)
def test_the_limit_read_from_limits_keys(key: str, expiry: int, read: Any) -> None:
    assert cell_limits._limit_of(key, expiry) == read


def test_the_moving_window_peeks_with_the_limit(module_client: redis.Redis, key: str) -> None:
    """get_moving_window answers as before, within the limit and over it
    (a limit lowered in the app: the count is still exact)."""
    ours = storage_from_string(f"rediscell://127.0.0.1:{os.environ['CELL_MODULE_PORT']}")
    moving = MovingWindowRateLimiter(ours)
    wide, narrow = RateLimitItemPerMinute(5), RateLimitItemPerMinute(2)
    assert [moving.hit(wide, key) for _ in range(6)] == [True] * 5 + [False]
    assert moving.get_window_stats(wide, key).remaining == 0
    start, count = ours.get_moving_window(wide.key_for(key), 5, 60)
    assert count == 5
    # The same log read against a lower limit (the key is the wide item's)
    # and a higher one: the same count and start (to the ms it is rounded to).
    for limit in (2, 100):
        again, count = ours.get_moving_window(wide.key_for(key), limit, 60)
        assert count == 5 and abs(again - start) < 0.05, (limit, again, start)
    assert moving.get_window_stats(narrow, key + "n").remaining == 2


async def test_async_moving_window_peeks_with_the_limit(key: str) -> None:
    port = os.environ["CELL_MODULE_PORT"]
    ours = storage_from_string(f"async+rediscell://127.0.0.1:{port}")
    item = RateLimitItemPerMinute(3)
    moving = AsyncMoving(ours)
    assert [await moving.hit(item, key) for _ in range(4)] == [True] * 3 + [False]
    assert (await ours.get_moving_window(item.key_for(key), 3, 60))[1] == 3
    assert (await ours.get_moving_window(item.key_for(key), 1, 60))[1] == 3
    assert (await moving.get_window_stats(item, key)).remaining == 0


def _flask_app(uri: str, options: dict[str, Any]) -> Any:
    from flask import Flask
    from flask_limiter import Limiter
    from flask_limiter.util import get_remote_address

    app = Flask(f"login-{uuid.uuid4().hex}")
    app.config["RATELIMIT_STORAGE_URI"] = uri
    app.config["RATELIMIT_STORAGE_OPTIONS"] = options
    app.config["RATELIMIT_STRATEGY"] = "fixed-window"
    app.config["RATELIMIT_HEADERS_ENABLED"] = True
    limiter = Limiter(get_remote_address, app=app)

    @app.route("/login", methods=["POST"])
    @limiter.limit(f"{LIMIT} per minute")
    def login() -> str:
        return "welcome"

    return app


def test_a_flask_apps_refusals_reach_info_and_top(module_client: redis.Redis) -> None:
    """15 logins at 10 per minute through flask-limiter: the same answers and
    headers as on limits' own storage, 5 refusals in INFO and CL.TOP."""
    port = os.environ["CELL_MODULE_PORT"]
    ours = _flask_app(f"rediscell://127.0.0.1:{port}", {"key_prefix": "CELL"}).test_client()
    theirs = _flask_app(f"redis://127.0.0.1:{port}", {}).test_client()
    ip = f"10.9.{uuid.uuid4().int % 250}.{uuid.uuid4().int % 250}"
    before = _limited([module_client])
    got, expected = [], []
    for _ in range(HITS):
        for client, out in ((theirs, expected), (ours, got)):
            r = client.post("/login", environ_base={"REMOTE_ADDR": ip})
            out.append((r.status_code, r.headers["X-RateLimit-Remaining"]))
    assert got == expected
    assert [status for status, _ in got] == [200] * LIMIT + [429] * REFUSED
    key = f"LIMITER/{ip}/login/{LIMIT}/1/minute"
    _same_state(module_client, f"CELL:{key}", f"LIMITS:{key}")
    assert _limited([module_client]) - before == REFUSED
    assert _top([module_client], f"CELL:{key}") == [(REFUSED, 0)]
