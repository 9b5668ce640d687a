"""Our own tests run against the servers clients/python/test starts (ports
in CELL_* variables); without them every test errors, never skips."""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
import redis.asyncio
import redis.cluster

from redis_cell import AsyncCell, Cell


def _env(name: str) -> str:
    value = os.environ.get(name)
    if not value:
        raise RuntimeError(f"{name} is not set: run clients/python/test, which starts the servers")
    return value


@pytest.fixture
def key() -> str:
    return f"t:{uuid.uuid4().hex}"


@pytest.fixture
def repo() -> Path:
    return Path(_env("CELL_REPO"))


@pytest.fixture
def module_client() -> Iterator[redis.Redis]:
    r = redis.Redis("127.0.0.1", int(_env("CELL_MODULE_PORT")))
    yield r
    r.close()


@pytest.fixture
def twin_client() -> Iterator[redis.Redis]:
    r = redis.Redis("127.0.0.1", int(_env("CELL_TWIN_PORT")))
    yield r
    r.close()


def twin_engine() -> str:
    return _env("CELL_TWIN_ENGINE")


@pytest.fixture(params=["module", "twin"])
def cell(request: pytest.FixtureRequest) -> Iterator[Cell]:
    """A Cell on each engine: the module's commands, or the twin (the
    functions, found by detection, or the EVAL script where there are none)."""
    if request.param == "module":
        r = redis.Redis("127.0.0.1", int(_env("CELL_MODULE_PORT")))
        c = Cell(r)
    else:
        r = redis.Redis("127.0.0.1", int(_env("CELL_TWIN_PORT")))
        c = Cell(r, engine="eval") if twin_engine() == "eval" else Cell(r)
    yield c
    r.close()


@pytest.fixture(params=["module", "twin"])
async def acell(request: pytest.FixtureRequest) -> AsyncIterator[AsyncCell]:
    port = _env("CELL_MODULE_PORT" if request.param == "module" else "CELL_TWIN_PORT")
    r = redis.asyncio.Redis(host="127.0.0.1", port=int(port))
    eval_twin = request.param == "twin" and twin_engine() == "eval"
    yield AsyncCell(r, engine="eval") if eval_twin else AsyncCell(r)
    await r.aclose()


@pytest.fixture
def cluster() -> Iterator[redis.cluster.RedisCluster]:
    port = int(_env("CELL_CLUSTER_PORTS").split(",")[0])
    r = redis.cluster.RedisCluster("127.0.0.1", port)
    yield r
    r.close()


def servers() -> Any:
    """The harness's server helpers (``harness/servers.py``)."""
    harness = str(Path(__file__).resolve().parents[1] / "harness")
    if harness not in sys.path:
        sys.path.insert(0, harness)
    import servers

    return servers


def server_binary() -> str:
    return _env("CELL_SERVER_BINARY")


@pytest.fixture
def bare() -> Iterator[Any]:
    """A server of this run's binary without the module, started by the test
    kit, for tests that flush, restart or deny it; stopped after the test."""
    (server,) = servers().start(server_binary(), 1, None)
    yield server
    server.stop()
