"""The limits storages beyond what limits' own suite checks: schemes, state
carried over from limits' own Redis storage, the moving window's list keys."""

from __future__ import annotations

import os
import time
from typing import Any

import pytest
import redis
from limits import RateLimitItemPerMinute
from limits.storage import RedisStorage, storage_from_string
from limits.strategies import FixedWindowRateLimiter, MovingWindowRateLimiter

import redis_cell.limits as cell_limits
from redis_cell import WrongTypeError


def _uri(scheme: str = "rediscell") -> str:
    return f"{scheme}://127.0.0.1:{os.environ['CELL_MODULE_PORT']}"


def test_schemes_give_our_storages() -> None:
    assert isinstance(storage_from_string(_uri()), cell_limits.CellStorage)
    assert isinstance(
        storage_from_string(_uri("async+rediscell"), implementation="redispy"),
        cell_limits.AsyncCellStorage,
    )
    assert isinstance(storage_from_string(_uri("async+rediscell")), cell_limits.AsyncCellStorage)
    port = os.environ["CELL_CLUSTER_PORTS"].split(",")[0]
    cluster = storage_from_string(f"rediscell+cluster://127.0.0.1:{port}")
    assert isinstance(cluster, cell_limits.CellClusterStorage) and cluster.check()
    from limits.storage import SCHEMES

    for scheme in (
        "rediscells",
        "rediscell+unix",
        "rediscell+sentinel",
        "async+rediscell+cluster",
        "async+rediscell+sentinel",
        "async+rediscells",
        "async+rediscell+unix",
    ):
        assert SCHEMES[scheme].__module__ == "redis_cell.limits", scheme


def test_engine_from_the_uri() -> None:
    twin = f"rediscell://127.0.0.1:{os.environ['CELL_TWIN_PORT']}?engine=eval"
    storage = storage_from_string(twin)
    assert storage._cell.engine.value == "eval"
    assert FixedWindowRateLimiter(storage).hit(RateLimitItemPerMinute(1), "engine-uri")


def test_fixed_window_counters_carry_over(module_client: redis.Redis, key: str) -> None:
    theirs = RedisStorage(_uri("redis"))
    ours = storage_from_string(_uri())
    item = RateLimitItemPerMinute(3)
    assert FixedWindowRateLimiter(theirs).hit(item, key)
    assert FixedWindowRateLimiter(ours).hit(item, key)
    assert FixedWindowRateLimiter(theirs).hit(item, key)
    assert not FixedWindowRateLimiter(ours).hit(item, key)
    stats = FixedWindowRateLimiter(ours).get_window_stats(item, key)
    assert stats.remaining == 0 and 0 < stats.reset_time - time.time() <= 60


def test_moving_window_is_one_entry_per_request(module_client: redis.Redis, key: str) -> None:
    ours = storage_from_string(_uri())
    item = RateLimitItemPerMinute(10_000)
    before = time.time()
    assert MovingWindowRateLimiter(ours).hit(item, key, cost=1000)
    start, count = ours.get_moving_window(item.key_for(key), item.amount, item.get_expiry())
    assert count == 1000 and before - 0.01 <= start <= time.time() + 0.01
    stored = module_client.execute_command("TYPE", f"LIMITS:{item.key_for(key)}")
    assert stored in (b"cell-swin", b"string")


def test_list_keys_of_limits_moving_window_name_the_migration(key: str) -> None:
    theirs = RedisStorage(_uri("redis"))
    ours = storage_from_string(_uri())
    item = RateLimitItemPerMinute(5)
    assert MovingWindowRateLimiter(theirs).hit(item, key)
    with pytest.raises(WrongTypeError, match="Migrating"):
        MovingWindowRateLimiter(ours).hit(item, key)


def _other_transports() -> dict[str, str]:
    """The module's server by its unix socket, and through a sentinel."""
    sentinel = f"127.0.0.1:{os.environ['CELL_SENTINEL_PORT']}/cell"
    return {
        "rediscell+unix": f"rediscell+unix://{os.environ['CELL_MODULE_SOCKET']}",
        "rediscell+sentinel": f"rediscell+sentinel://{sentinel}",
    }


async def _close(storage: Any) -> None:
    """An asyncio storage's own client, closed as an application closes it
    at exit (redis-py and valkey-py: ``aclose``; coredis: its pool)."""
    connection = storage.bridge.get_connection()
    if hasattr(connection, "aclose"):
        await connection.aclose()
    else:
        connection.connection_pool.disconnect()


@pytest.mark.parametrize("scheme", ["rediscell+unix", "rediscell+sentinel"])
def test_unix_and_sentinel_storages_decide_on_the_module(
    scheme: str, module_client: redis.Redis, key: str
) -> None:
    storage = storage_from_string(_other_transports()[scheme])
    assert type(storage).__module__ == "redis_cell.limits" and storage.check()
    item = RateLimitItemPerMinute(2)
    moving, fixed = MovingWindowRateLimiter(storage), FixedWindowRateLimiter(storage)
    assert [moving.hit(item, key) for _ in range(3)] == [True, True, False]
    assert [fixed.hit(item, key + "f") for _ in range(3)] == [True, True, False]
    # The state is the module's, on the server the other clients see; the
    # fixed window counts every hit, refused ones too, as limits' own does.
    assert module_client.execute_command("TYPE", f"LIMITS:{item.key_for(key)}") == b"cell-swin"
    assert module_client.get(f"LIMITS:{item.key_for(key + 'f')}") == b"3"
    storage.reset()
    assert moving.hit(item, key)


@pytest.mark.parametrize("scheme", ["rediscell+unix", "rediscell+sentinel"])
@pytest.mark.parametrize("implementation", ["redispy", "coredis", "valkey"])
async def test_async_unix_and_sentinel_storages_decide_on_the_module(
    scheme: str, implementation: str, module_client: redis.Redis, key: str
) -> None:
    from limits.aio.strategies import FixedWindowRateLimiter as AsyncFixed
    from limits.aio.strategies import MovingWindowRateLimiter as AsyncMoving

    uri = "async+" + _other_transports()[scheme]
    storage = storage_from_string(uri, implementation=implementation)
    assert type(storage).__module__ == "redis_cell.limits" and await storage.check()
    item = RateLimitItemPerMinute(2)
    moving, fixed = AsyncMoving(storage), AsyncFixed(storage)
    assert [await moving.hit(item, key) for _ in range(3)] == [True, True, False]
    assert [await fixed.hit(item, key + "f") for _ in range(3)] == [True, True, False]
    assert module_client.execute_command("TYPE", f"LIMITS:{item.key_for(key)}") == b"cell-swin"
    assert module_client.get(f"LIMITS:{item.key_for(key + 'f')}") == b"3"
    await _close(storage)


# Where the server was built with TLS (the harness says which, and fails the
# run if none was): rediscells:// end to end, the certificate verified.
if os.environ.get("CELL_TLS_PORT"):

    def _tls_uri(scheme: str) -> str:
        port, ca = os.environ["CELL_TLS_PORT"], os.environ["CELL_TLS_CA"]
        return f"{scheme}://127.0.0.1:{port}/?ssl_cert_reqs=required&ssl_ca_certs={ca}"

    def _plain() -> redis.Redis:
        return redis.Redis("127.0.0.1", int(os.environ["CELL_TLS_PLAIN_PORT"]))

    def test_tls_storage_decides_on_the_module(key: str) -> None:
        storage = storage_from_string(_tls_uri("rediscells"))
        assert isinstance(storage, cell_limits.CellStorage) and storage.check()
        item = RateLimitItemPerMinute(2)
        moving, fixed = MovingWindowRateLimiter(storage), FixedWindowRateLimiter(storage)
        assert [moving.hit(item, key) for _ in range(3)] == [True, True, False]
        assert [fixed.hit(item, key + "f") for _ in range(3)] == [True, True, False]
        plain = _plain()
        assert plain.execute_command("TYPE", f"LIMITS:{item.key_for(key)}") == b"cell-swin"
        assert plain.get(f"LIMITS:{item.key_for(key + 'f')}") == b"3"
        plain.close()

    @pytest.mark.parametrize("implementation", ["redispy", "coredis", "valkey"])
    async def test_async_tls_storage_decides_on_the_module(implementation: str, key: str) -> None:
        from limits.aio.strategies import MovingWindowRateLimiter as AsyncMoving

        uri = _tls_uri("async+rediscells")
        storage = storage_from_string(uri, implementation=implementation)
        assert isinstance(storage, cell_limits.AsyncCellStorage) and await storage.check()
        item = RateLimitItemPerMinute(2)
        moving = AsyncMoving(storage)
        assert [await moving.hit(item, key) for _ in range(3)] == [True, True, False]
        plain = _plain()
        assert plain.execute_command("TYPE", f"LIMITS:{item.key_for(key)}") == b"cell-swin"
        plain.close()
        await _close(storage)
