"""pytest plugin that runs flask-limiter's own tests that use Redis
(fetched at test time) with their storage URIs turned into ``rediscell://``.

flask-limiter's tests write ``redis://localhost:46379`` into their bodies
and parameters; every storage flask-limiter builds goes through
``limits.storage.storage_from_string``, which this plugin wraps so that
that URI becomes ``rediscell://localhost:<port>`` (``REDIS_CELL_HARNESS``:
``{"port": N}``) and any other Redis URI is refused. The conftest's Docker
fixtures connect to our server; the memcached and MongoDB ones, needed only
by an autouse fixture of tests that also run on other storages, are inert
(those storages' tests are deselected). Only tests that use Redis run: those
that request ``redis_connection`` or name the Redis URI, but for those of
``NOT_OURS``, which do either and still build no storage on it.
"""

from __future__ import annotations

import inspect
import json
import os
from typing import Any

import loopback_guard
import pytest
import redis
from suite_hooks import guard_refused_any, swap_conftest_fixtures

loopback_guard.install()

CONFIG: dict[str, Any] = json.loads(os.environ.get("REDIS_CELL_HARNESS", "{}"))
THEIRS = "redis://localhost:46379"
seen: list[str] = []


def _ours() -> str:
    return f"rediscell://localhost:{CONFIG['port']}"


def _wrap(original: Any) -> Any:
    def storage_from_string(uri: str, **options: Any) -> Any:
        if uri.startswith(("redis://", "rediss://", "redis+")):
            if uri != THEIRS:
                raise RuntimeError(f"unexpected Redis URI in flask-limiter's tests: {uri}")
            uri = _ours()
            seen.append(uri)
        return original(uri, **options)

    return storage_from_string


class _Inert:
    def flush_all(self) -> None:
        pass


@pytest.fixture(name="redis_connection")
def _redis_connection() -> Any:
    r = redis.Redis("localhost", CONFIG["port"])
    r.flushall()
    return r


@pytest.fixture(name="memcached_connection")
def _memcached_connection() -> _Inert:
    return _Inert()


@pytest.fixture(name="mongo_connection")
def _mongo_connection() -> _Inert:
    return _Inert()


@pytest.fixture(scope="session", name="docker_services")
def _docker_services() -> None:
    raise RuntimeError("Docker services are not provided by the redis-cell harness")


pytest_plugin_registered = swap_conftest_fixtures(
    {
        "redis_connection": _redis_connection,
        "memcached_connection": _memcached_connection,
        "mongo_connection": _mongo_connection,
        "docker_services": _docker_services,
    }
)


def pytest_configure(config: pytest.Config) -> None:
    import flask_limiter._extension as extension

    import redis_cell.limits  # noqa: F401  (registers the rediscell schemes)

    extension.storage_from_string = _wrap(extension.storage_from_string)  # type: ignore[attr-defined]


# Tests that request ``redis_connection`` or name the Redis URI and still
# build every storage on ``memory://``; deselected by name, and the run
# fails if one of them is no longer in the suite.
NOT_OURS = frozenset(
    {
        # Its limiters are built before the Redis URI is set and from
        # ``memory://``. Run in the last minute of an hour, its 1/hour meta
        # limit (a sliding-window counter) lets the request after its 60 s
        # step through: the hit recorded in the hour before counts with a
        # weight below 1 once the new hour has begun, floored to 0.
        "test_constructor_arguments_over_config",
    }
)
not_ours_found: set[str] = set()


def _uses_redis(item: pytest.Item) -> bool:
    name = getattr(item, "originalname", item.name)
    if name in NOT_OURS:
        not_ours_found.add(name)
        return False
    params = getattr(getattr(item, "callspec", None), "params", {})
    uri = params.get("storage_uri")
    if isinstance(uri, str):
        return uri == THEIRS
    if "redis_connection" in getattr(item, "fixturenames", ()):
        return True
    function = getattr(item, "function", None)
    try:
        return function is not None and THEIRS in inspect.getsource(function)
    except (OSError, TypeError):
        return False


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    keep = [item for item in items if _uses_redis(item)]
    drop = [item for item in items if not _uses_redis(item)]
    if drop:
        config.hook.pytest_deselected(items=drop)
    items[:] = keep


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    failed = guard_refused_any()
    # Checked on a run of the whole suite (a retry names its tests).
    whole = "tests" in session.config.args
    missing = sorted(NOT_OURS - not_ours_found)
    if whole and missing and not session.config.option.collectonly:
        print(f"NOT_OURS names tests the suite no longer has: {', '.join(missing)}")
        failed = True
    if session.testscollected and not seen and not session.config.option.collectonly:
        print("no storage was built on rediscell://: the URI rewrite did not apply")
        failed = True
    if failed:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
