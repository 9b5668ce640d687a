"""pytest plugin that runs limits' own test suite (fetched at test time) on
redis-cell's storages, on servers the harness started.

Loaded with ``-p limits_plugin`` beside limits' ``tests/`` and configured by
the environment variable ``REDIS_CELL_HARNESS`` (JSON):

- ``mode``: ``module`` (one server with the module), ``twin`` (one server
  without it, the Functions twin loaded), ``cluster`` (three masters with
  the module) or ``transports`` (one server with the module, reached by its
  unix socket and through a sentinel, as limits' ``redis+unix://`` and
  ``redis+sentinel://`` storages reach theirs);
- ``port`` (module, twin), ``ports`` (cluster), ``socket`` and ``sentinel``
  (transports: the socket's path, the sentinel's port; the service is
  ``mymaster``, as in limits' tests): where the servers listen;
- ``theirs``: also run limits' own ``redis://`` storage on that server.

What it changes, without editing limits' files:

- every ``uri, ..., fixture`` parametrization (``tests/utils.py``'s
  ``ALL_STORAGES`` and the inline ones) keeps only the Redis storage of the
  mode, on our port, and gains our storage beside it (``rediscell://``,
  ``rediscell+cluster://``), with the same fixture and marks; tests with no
  storage parameter left are deselected, not skipped;
- the conftest's Docker fixtures (``docker_services``, ``redis_basic_client``,
  ``redis_cluster_client``) connect to our servers instead, and
  ``host_ip_env`` (which probes a private address) only sets loopback;
- a socket guard refuses any non-loopback address and fails the session.
"""

from __future__ import annotations

import json
import os
from typing import Any

import loopback_guard
import pytest
import redis
import redis.cluster
import redis.sentinel
from suite_hooks import guard_refused_any, swap_conftest_fixtures

loopback_guard.install()

CONFIG: dict[str, Any] = json.loads(os.environ.get("REDIS_CELL_HARNESS", "{}"))
MODE = CONFIG.get("mode", "module")

_SINGLE = ("redis://localhost:7379", "async+redis://localhost:7379")
_CLUSTER = ("redis+cluster://localhost:7001", "async+redis+cluster://localhost:7001")
_SOCKET = "/tmp/limits.redis.sock"
_SENTINEL = "localhost:26379"


def _ours(uri: str) -> str:
    uri = uri.replace("redis", "rediscell", 1)
    if CONFIG.get("engine"):
        uri = f"{uri.rstrip('/')}/?engine={CONFIG['engine']}"
    return uri


def _variants(uri: str) -> list[tuple[str, str]]:
    """(uri, id prefix) pairs that replace one of limits' storage URIs."""
    if MODE in ("module", "twin") and uri.rstrip("/") in _SINGLE:
        port = str(CONFIG["port"])
        base = uri.replace("7379", port)
        out = [(_ours(base), "rediscell-")]
        if CONFIG.get("theirs"):
            out.append((base, "limits-"))
        return out
    if MODE == "cluster" and uri.rstrip("/") in _CLUSTER:
        return [(_ours(uri.replace("7001", str(CONFIG["ports"][0]))), "rediscell-")]
    if MODE == "transports":
        scheme = uri.removeprefix("async+").split("://", 1)[0]
        if scheme == "redis+unix" and _SOCKET in uri:
            return [(_ours(uri.replace(_SOCKET, CONFIG["socket"])), "rediscell-")]
        if scheme == "redis+sentinel" and f"//{_SENTINEL}" in uri:
            port = str(CONFIG["sentinel"])
            return [(_ours(uri.replace(_SENTINEL, f"localhost:{port}")), "rediscell-")]
    return []


def _instance(expected: Any, uri: str) -> Any:
    import redis_cell.limits as cell

    if "rediscell" not in uri:
        return expected
    kind = "Cluster" if "+cluster" in uri else "Sentinel" if "+sentinel" in uri else ""
    return getattr(cell, f"{'Async' if uri.startswith('async+') else ''}Cell{kind}Storage")


def _transform(mark: pytest.Mark) -> pytest.Mark:
    if mark.name != "parametrize" or len(mark.args) < 2:
        return mark
    names = mark.args[0]
    names = [n.strip() for n in names.split(",")] if isinstance(names, str) else list(names)
    if "uri" not in names or "fixture" not in names:
        return mark
    at = names.index("uri")
    params = []
    for param in mark.args[1]:
        values = list(param.values)
        for uri, prefix in _variants(values[at]):
            new = list(values)
            new[at] = uri
            if "expected_instance" in names:
                i = names.index("expected_instance")
                new[i] = _instance(values[i], uri)
            ident = prefix + (param.id or values[at])
            params.append(pytest.param(*new, marks=param.marks, id=ident))
    return pytest.mark.parametrize(mark.args[0], params, **mark.kwargs).mark


def _retarget(obj: Any) -> None:
    marks = getattr(obj, "pytestmark", None)
    if not isinstance(marks, list) or getattr(obj, "_redis_cell_done", False):
        return
    obj.pytestmark = [_transform(m) for m in marks]
    try:
        obj._redis_cell_done = True
    except (AttributeError, TypeError):
        pass


@pytest.hookimpl(tryfirst=True)
def pytest_pycollect_makeitem(collector: Any, name: str, obj: Any) -> None:
    _retarget(obj)
    if isinstance(obj, type):
        for member in vars(obj).values():
            _retarget(member)


@pytest.fixture(scope="session", name="host_ip_env")
def _host_ip_env() -> None:
    os.environ["HOST_IP"] = "127.0.0.1"


class _NoDocker:
    def start(self, name: str) -> None:
        raise RuntimeError(f"service {name!r} is not provided by the redis-cell harness")

    def wait_for_service(self, name: str, *args: Any, **kwargs: Any) -> None:
        self.start(name)


@pytest.fixture(scope="session", name="docker_services")
def _docker_services() -> _NoDocker:
    return _NoDocker()


@pytest.fixture(scope="session", name="redis_basic_client")
def _redis_basic_client() -> Any:
    if "port" not in CONFIG:
        raise RuntimeError("this harness run has no single server")
    return redis.StrictRedis("localhost", CONFIG["port"])


@pytest.fixture(scope="session", name="redis_cluster_client")
def _redis_cluster_client() -> Any:
    if "ports" not in CONFIG:
        raise RuntimeError("this harness run has no cluster")
    return redis.cluster.RedisCluster("localhost", CONFIG["ports"][0])


@pytest.fixture(scope="session", name="redis_uds_client")
def _redis_uds_client() -> Any:
    if "socket" not in CONFIG:
        raise RuntimeError("this harness run has no unix socket")
    return redis.Redis.from_url(f"unix://{CONFIG['socket']}")


@pytest.fixture(scope="session", name="redis_sentinel_client")
def _redis_sentinel_client() -> Any:
    if "sentinel" not in CONFIG:
        raise RuntimeError("this harness run has no sentinel")
    return redis.sentinel.Sentinel([("localhost", CONFIG["sentinel"])])  # type: ignore[no-untyped-call]


pytest_plugin_registered = swap_conftest_fixtures(
    {
        "host_ip_env": _host_ip_env,
        "docker_services": _docker_services,
        "redis_basic_client": _redis_basic_client,
        "redis_cluster_client": _redis_cluster_client,
        "redis_uds_client": _redis_uds_client,
        "redis_sentinel_client": _redis_sentinel_client,
    }
)


def pytest_configure(config: pytest.Config) -> None:
    # limits marks some tests flaky for the `flaky` rerun plugin, which is
    # not installed: those tests run once, as every other.
    config.addinivalue_line("markers", "flaky: limits' rerun marker (no reruns here)")
    import redis_cell.limits  # noqa: F401  (registers the rediscell schemes)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    keep: list[pytest.Item] = []
    drop: list[pytest.Item] = []
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        (keep if "fixture" in params and "uri" in params else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
    items[:] = keep


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if guard_refused_any():
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
