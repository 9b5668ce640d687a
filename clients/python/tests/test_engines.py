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


def test_valkey_py_clients(key: str) -> None:
    """valkey-py's sync and asyncio clients: detection on both servers, typed
    decisions and typed errors carrying the server's text."""
    import asyncio

    import valkey
    import valkey.asyncio

    from redis_cell import ArgumentError, WrongTypeError

    from .conftest import _env

    module_port, twin_port = int(_env("CELL_MODULE_PORT")), int(_env("CELL_TWIN_PORT"))
    sync = valkey.Valkey("127.0.0.1", module_port)
    cell = Cell(sync)  # type: ignore[arg-type]
    assert cell.engine is Engine.MODULE
    assert cell.throttle(key, 0, 1, 60) == Decision(False, 1, 0, -1, 60)
    assert cell.throttle(key, 0, 1, 60).limited
    sync.set(key + "s", "x")
    with pytest.raises(WrongTypeError, match=r"^WRONGTYPE"):
        cell.sw_allow(key + "s", 1, 60)
    with pytest.raises(ArgumentError, match=r"^ERR invalid"):
        cell.throttle(key, -1, 1, 60)
    sync.close()
    twin = valkey.Valkey("127.0.0.1", twin_port)
    if twin_engine() == "functions":
        assert Cell(twin).engine is Engine.FUNCTIONS  # type: ignore[arg-type]
    else:
        with pytest.raises(EngineNotFoundError, match="load_functions"):
            Cell(twin).throttle(key, 1, 1, 1)  # type: ignore[arg-type]
    twin.close()

    async def run() -> None:
        client = valkey.asyncio.Valkey(host="127.0.0.1", port=module_port)
        acell = AsyncCell(client)  # type: ignore[arg-type]
        assert await acell.engine() is Engine.MODULE
        assert (await acell.sw_allow(key + "a", 1, 60)).remaining == 0
        with pytest.raises(WrongTypeError):
            await acell.sw_allow(key + "s", 1, 60)
        await client.aclose()
        other = valkey.asyncio.Valkey(host="127.0.0.1", port=twin_port)
        if twin_engine() == "functions":
            assert await AsyncCell(other).engine() is Engine.FUNCTIONS  # type: ignore[arg-type]
        else:
            with pytest.raises(EngineNotFoundError):
                await AsyncCell(other).throttle(key, 1, 1, 1)  # type: ignore[arg-type]
        await other.aclose()

    asyncio.run(run())
