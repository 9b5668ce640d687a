"""Live limits for the limits storages: the ``policies`` option (or the
URI's ``policy=name:selector``) sends ``POLICY name`` with the hits of the
keys it selects, so that an operator's ``CL.POLICY SET`` changes a running
app's limit, a trial shows in ``CL.TOP ... TRIAL`` and ``PROMOTE`` enforces
it; the app's own numbers apply while the policy does not exist. These are
the recipes of docs/clients/python.md, run as they are written there."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from flask import Flask
from flask_limiter import Limiter
from flask_limiter.util import get_remote_address
from limits import RateLimitItemPerMinute
from limits.aio.strategies import FixedWindowRateLimiter as AsyncFixed
from limits.errors import ConfigurationError
from limits.storage import storage_from_string
from limits.strategies import (
    FixedWindowRateLimiter,
    MovingWindowRateLimiter,
    SlidingWindowCounterRateLimiter,
)

import redis_cell.limits
from redis_cell import ArgumentError, Cell, Fixed, Gcra, Sliding

from .conftest import twin_engine

LOGIN = "LIMITER/*/login/*"


def _uri(query: str = "") -> str:
    return f"rediscell://127.0.0.1:{os.environ['CELL_MODULE_PORT']}{query}"


@pytest.fixture
def policy(module_client: redis.Redis) -> Iterator[str]:
    """A policy name of this test's own, deleted after it."""
    name = f"login-{uuid.uuid4().hex[:12]}"
    yield name
    module_client.execute_command("CL.POLICY", "DEL", name)


@pytest.fixture
def ip() -> str:
    """The client address of this test's requests (its keys' identity)."""
    n = uuid.uuid4().int
    return f"10.{n % 250}.{(n >> 8) % 250}.{(n >> 16) % 250}"


def _login_app(uri: str, options: dict[str, Any] | None = None) -> Flask:
    """The docs' Flask app: a login limited to 10 per minute, fixed window."""
    app = Flask(f"login-{uuid.uuid4().hex}")
    app.config["RATELIMIT_STORAGE_URI"] = uri
    app.config["RATELIMIT_STRATEGY"] = "fixed-window"
    app.config["RATELIMIT_HEADERS_ENABLED"] = True
    if options is not None:
        app.config["RATELIMIT_STORAGE_OPTIONS"] = options
    limiter = Limiter(get_remote_address, app=app)

    @app.route("/login", methods=["POST"])
    @limiter.limit("10 per minute")
    def login() -> str:
        return "welcome"

    return app


def _posts(app: Flask, ip: str, n: int) -> list[tuple[int, str | None]]:
    """``n`` logins from ``ip``: status and X-RateLimit-Remaining of each."""
    client = app.test_client()
    out = []
    for _ in range(n):
        r = client.post("/login", environ_base={"REMOTE_ADDR": ip})
        out.append((r.status_code, r.headers.get("X-RateLimit-Remaining")))
    return out


def _statuses(app: Flask, ip: str, n: int) -> list[int]:
    return [status for status, _ in _posts(app, ip, n)]


def _key(ip: str) -> str:
    return f"LIMITS:LIMITER/{ip}/login/10/1/minute"


def _selector_in_uri(name: str) -> str:
    """The URI form of the option, as the docs write it."""
    return f"?policy={name}:{LOGIN}"


def test_change_the_flask_apps_login_limit_live(
    module_client: redis.Redis, policy: str, ip: str
) -> None:
    app = _login_app(_uri(_selector_in_uri(policy)))
    cell = Cell(module_client, engine="module")
    # No such policy yet: the app's own 10 per minute.
    assert _posts(app, ip, 2) == [(200, "9"), (200, "8")]
    # Stricter, live: the next request is refused (3 > 2).
    cell.policy_set(policy, Fixed(2, "1m"))
    assert _statuses(app, ip, 1) == [429]
    # Looser than the app's own: requests 4 to 12 pass (10 would stop at 10),
    # and the headers give the policy's remaining.
    cell.policy_set(policy, Fixed(20, "1m"))
    assert _posts(app, ip, 9)[-1] == (200, "8")
    assert module_client.get(_key(ip)) == b"12"
    # Deleted: the app's own limit again, on the same count.
    module_client.execute_command("CL.POLICY", "DEL", policy)
    assert _statuses(app, ip, 1) == [429]


def test_trial_a_stricter_limit_then_promote_it(
    module_client: redis.Redis, policy: str, ip: str
) -> None:
    app = _login_app(_uri(), options={"policies": {LOGIN: policy}})
    cell = Cell(module_client, engine="module")
    # The policy as the app has it, with a stricter trial beside it.
    cell.policy_set(policy, Fixed(10, "1m"), trial=Fixed(3, "1m"))
    assert _statuses(app, ip, 5) == [200] * 5
    # Nobody was refused; the trial would have refused requests 4 and 5.
    trial = cell.top(policy=policy, trial=True)
    assert [(e.key, e.count, e.shadow) for e in trial] == [(_key(ip), 2, 2)]
    assert cell.top(policy=policy) == []
    info = module_client.execute_command("CL.POLICY", "GET", policy)
    fields = {info[i].decode(): info[i + 1] for i in range(0, len(info), 2)}
    assert fields["trial_refused"] == 2 and fields["refused"] == 0
    # Promoted: the trial's limit is enforced from the next request.
    cell.policy_promote(policy)
    assert _statuses(app, ip, 2) == [429, 429]
    assert [(e.key, e.count) for e in cell.top(policy=policy)] == [(_key(ip), 2)]
    assert module_client.get(_key(ip)) == b"7"


def test_the_moving_window_follows_its_policy(module_client: redis.Redis, policy: str) -> None:
    storage = storage_from_string(_uri(), policies={"5/minute": policy})
    moving = MovingWindowRateLimiter(storage)
    item, other = RateLimitItemPerMinute(5), RateLimitItemPerMinute(6)
    ident = uuid.uuid4().hex
    cell = Cell(module_client, engine="module")
    cell.policy_set(policy, Sliding(2, "1m"))
    assert [moving.hit(item, ident) for _ in range(3)] == [True, True, False]
    assert moving.get_window_stats(item, ident).remaining == 0
    assert not moving.test(item, ident)
    # Raised above the app's 5: the storage lets the policy decide.
    cell.policy_set(policy, Sliding(8, "1m"))
    assert moving.test(item, ident)
    assert moving.get_window_stats(item, ident).remaining == 6
    assert moving.hit(item, ident, cost=6)
    assert moving.get_window_stats(item, ident).remaining == 0
    # A limit the selector does not name keeps its own numbers.
    assert [moving.hit(other, ident) for _ in range(7)] == [True] * 6 + [False]


def test_the_fixed_windows_test_and_stats_follow_the_policy(
    module_client: redis.Redis, policy: str
) -> None:
    storage = storage_from_string(_uri(), policies={"10 per 1 minute": policy})
    fixed = FixedWindowRateLimiter(storage)
    item = RateLimitItemPerMinute(10)
    ident = uuid.uuid4().hex
    assert all(fixed.hit(item, ident) for _ in range(4))
    cell = Cell(module_client, engine="module")
    cell.policy_set(policy, Fixed(4, "1m"))
    assert not fixed.test(item, ident)
    assert fixed.get_window_stats(item, ident).remaining == 0
    cell.policy_set(policy, Fixed(5, "1m"))
    assert fixed.test(item, ident) and not fixed.test(item, ident, cost=2)
    assert fixed.get_window_stats(item, ident).remaining == 1
    # The key holds the count, as limits' own storage would.
    assert module_client.get(f"LIMITS:{item.key_for(ident)}") == b"4"


async def test_async_fixed_window_follows_its_policy(
    module_client: redis.Redis, policy: str
) -> None:
    port = os.environ["CELL_MODULE_PORT"]
    for implementation in ("coredis", "redispy", "valkey"):
        storage = storage_from_string(
            f"async+rediscell://127.0.0.1:{port}?policy={policy}:10/minute",
            implementation=implementation,
        )
        fixed = AsyncFixed(storage)
        item = RateLimitItemPerMinute(10)
        ident = uuid.uuid4().hex
        Cell(module_client, engine="module").policy_set(policy, Fixed(2, "1m"))
        assert [await fixed.hit(item, ident) for _ in range(3)] == [True, True, False]
        assert (await fixed.get_window_stats(item, ident)).remaining == 0


def test_a_policy_of_another_kind_is_the_servers_error(
    module_client: redis.Redis, policy: str
) -> None:
    storage = storage_from_string(_uri(), policies={"10/minute": policy})
    Cell(module_client, engine="module").policy_set(policy, Gcra(9, 10, 60))
    with pytest.raises(ArgumentError, match=r"^ERR policy "):
        FixedWindowRateLimiter(storage).hit(RateLimitItemPerMinute(10), uuid.uuid4().hex)


def test_policies_on_the_twin_are_a_configuration_error() -> None:
    port = os.environ["CELL_TWIN_PORT"]
    engine = twin_engine()
    with pytest.raises(ConfigurationError, match="the Functions twin has no policies"):
        storage_from_string(f"rediscell://127.0.0.1:{port}?engine={engine}&policy=p:10/minute")
    with pytest.raises(ConfigurationError, match="the Functions twin has no policies"):
        storage_from_string(
            f"async+rediscell://127.0.0.1:{port}", engine=engine, policies={"10/minute": "p"}
        )
    if engine == "functions":
        # Detected, not given: the first call says so, whatever its key.
        storage = storage_from_string(f"rediscell://127.0.0.1:{port}", policies={"1/second": "p"})
        with pytest.raises(ConfigurationError, match="its engine is 'functions'"):
            FixedWindowRateLimiter(storage).hit(RateLimitItemPerMinute(10), "x")


def test_policy_configuration_errors() -> None:
    with pytest.raises(ConfigurationError, match=r"is no CL\.POLICY name"):
        storage_from_string(_uri(), policies={"10/minute": "a:b"})
    with pytest.raises(ConfigurationError, match="is not 'name:selector'"):
        storage_from_string(_uri("?policy=login"))
    with pytest.raises(ConfigurationError, match="must map selectors"):
        storage_from_string(_uri(), policies=["login"])
    storage = storage_from_string(_uri(), policies={"LIMITER/*": "p", "*": "q"})
    with pytest.raises(ConfigurationError, match="sliding window counter"):
        SlidingWindowCounterRateLimiter(storage).hit(RateLimitItemPerMinute(1), "x")
    with pytest.raises(ConfigurationError, match="carries no limit"):
        storage.incr("custom-key", 60)


def test_the_uris_policies_are_ours_alone() -> None:
    """``policy`` (repeated, URL-encoded or not) and ``engine`` are taken out
    of the URI limits' storage passes on to redis-py; the rest stays."""
    uri = "rediscell://h:1/0?policy=a:LIMITER%2F*%2Flogin%2F*&socket_timeout=3&policy=b:5/second"
    assert redis_cell.limits._uri(uri + "&engine=module") == (
        "redis://h:1/0?socket_timeout=3",
        "module",
        [("LIMITER/*/login/*", "a"), ("5/second", "b")],
    )
    storage = storage_from_string(_uri("?policy=a:LIMITER%2F*%2Flogin%2F*&policy=b:5/second"))
    assert storage._policies.of("LIMITER/10.0.0.1/login/10/1/minute") == "a"
    assert storage._policies.of("LIMITER/10.0.0.1/search/5/1/second") == "b"
    assert storage._policies.of("LIMITER/10.0.0.1/search/15/1/second") is None
