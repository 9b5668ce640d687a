"""Engine choice, the shipped Lua, cluster clients, an ACL user without COMMAND."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
import redis
import redis.asyncio
import redis.cluster
from limits import RateLimitItemPerMinute
from limits.storage import storage_from_string
from limits.strategies import FixedWindowRateLimiter, MovingWindowRateLimiter
from redis.exceptions import NoPermissionError

import redis_cell.limits  # noqa: F401
from redis_cell import (
    AsyncCell,
    Cell,
    Decision,
    Engine,
    EngineNotFoundError,
    Gcra,
    Sliding,
    library_source,
)
from redis_cell._engine import choose

from .conftest import twin_engine


def test_shipped_lua_is_the_repository_twin(repo: Path) -> None:
    for name in ("redis_cell.lua", "redis_cell_eval.lua"):
        assert library_source(name) == (repo / "functions" / name).read_text(), name


def test_detection(module_client: redis.Redis, twin_client: redis.Redis) -> None:
    assert Cell(module_client).engine is Engine.MODULE
    if twin_engine() == "functions":
        assert Cell(twin_client).engine is Engine.FUNCTIONS
    else:
        # No functions on this server: neither engine is found, and the
        # error names both; EVAL is used only when asked for.
        with pytest.raises(EngineNotFoundError, match="load_functions"):
            Cell(twin_client).throttle("k", 1, 1, 1)


def test_choose_names_both_engines() -> None:
    assert choose([["cl.throttle"]], []) is Engine.MODULE
    assert choose([None], [["library_name", "redis_cell"]]) is Engine.FUNCTIONS
    with pytest.raises(EngineNotFoundError) as error:
        choose([None], [])
    assert "module" in error.value.message and "load_functions()" in error.value.message


def test_load_functions_from_the_package(twin_client: redis.Redis, key: str) -> None:
    if twin_engine() != "functions":
        # Redis 6.2: no FUNCTION LOAD; the EVAL engine needs no loading.
        with pytest.raises(redis.ResponseError):
            Cell(twin_client).load_functions()
        return
    cell = Cell(twin_client, engine="module")
    cell.load_functions()
    assert cell.engine is Engine.FUNCTIONS
    assert cell.throttle(key, 1, 1, 60) == Decision(False, 2, 1, -1, 60)


def test_engines_share_gcra_state(module_client: redis.Redis, key: str) -> None:
    """Same server, module then EVAL twin: a CL key carries over."""
    module = Cell(module_client)
    twin = Cell(module_client, engine="eval")
    # 5 per hour: nothing drips back between the calls, however slow.
    assert module.throttle(key, 4, 5, 3600).remaining == 4
    assert twin.throttle(key, 4, 5, 3600).remaining == 3


def test_acl_user_without_command(module_client: redis.Redis, key: str) -> None:
    user = f"u{uuid.uuid4().hex[:12]}"
    module_client.execute_command("ACL SETUSER", user, "on", ">pw", "~*", "+@all", "-command")
    try:
        limited = redis.Redis(
            "127.0.0.1",
            module_client.connection_pool.connection_kwargs["port"],
            username=user,
            password="pw",
        )
        with pytest.raises(NoPermissionError):
            Cell(limited).throttle(key, 1, 1, 60)
        assert Cell(limited, engine="module").throttle(key, 1, 1, 60).remaining == 1
        limited.close()
        port = module_client.connection_pool.connection_kwargs["port"]
        storage = storage_from_string(f"rediscell://{user}:pw@127.0.0.1:{port}?engine=module")
        item = RateLimitItemPerMinute(1)
        assert MovingWindowRateLimiter(storage).hit(item, key + ":m")
        assert FixedWindowRateLimiter(storage).hit(item, key + ":f")
        assert not FixedWindowRateLimiter(storage).hit(item, key + ":f")
    finally:
        module_client.execute_command("ACL DELUSER", user)


def test_cluster_sync(cluster: redis.cluster.RedisCluster, key: str) -> None:
    cell = Cell(cluster)
    assert cell.engine is Engine.MODULE
    for i in range(20):
        assert cell.sw_allow(f"{key}:{i}", 1, 60).remaining == 0
    pairs = [(f"{{{key}}}:a", Gcra(1, 1, 60)), (f"{{{key}}}:b", Sliding(1, 60))]
    assert cell.throttle_all(pairs).index in (1, 2)
    name = "c-" + key[2:20]
    cell.policy_set(name, Gcra(0, 1, 60))
    for node in cluster.get_primaries():
        r = redis.Redis(node.host, node.port)
        assert name.encode() in r.execute_command("CL.POLICY", "LIST")
        r.close()
    assert cell.limit(key, name).remaining == 0
    assert cell.policy_del(name) is True


async def test_cluster_async(key: str) -> None:
    import os

    port = int(os.environ["CELL_CLUSTER_PORTS"].split(",")[0])
    client = redis.asyncio.cluster.RedisCluster(host="127.0.0.1", port=port)
    cell = AsyncCell(client)
    for i in range(20):
        assert (await cell.fw_incr(f"{key}:{i}", 2, 60)).remaining == 1
    lease = await cell.acquire(key, 1, 30)
    assert lease.id and await cell.release(key, lease.id)
    await client.aclose()
