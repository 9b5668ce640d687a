"""Calls on cluster clients go to their key's node in one round trip: no
COMMAND GETKEYS first (which redis-py's and valkey-py's cluster clients send
before every FCALL, and before module commands whose keys move)."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
import redis
import redis.asyncio.cluster
import redis.cluster
import valkey.asyncio.cluster
import valkey.cluster

from redis_cell import AsyncCell, Cell, Decision, Gcra

from .conftest import _env, twin_engine

CALLS = 10


def _getkeys(ports: list[int]) -> int:
    total = 0
    for port in ports:
        with redis.Redis("127.0.0.1", port) as node:
            stats: Any = node.info("commandstats")
            total += int(stats.get("cmdstat_command|getkeys", {}).get("calls", 0))
    return total


def _calls(cell: Cell, tag: str) -> list[Any]:
    out: list[Any] = []
    for i in range(CALLS // 2):
        out.append(cell.throttle(f"{tag}:{i}", 1, 1, 60))
        out.append(cell.throttle_all([(f"{{{tag}}}:a{i}", Gcra(1, 1, 60))]))
    return out


async def _acalls(cell: AsyncCell, tag: str) -> list[Any]:
    out: list[Any] = []
    for i in range(CALLS // 2):
        out.append(await cell.throttle(f"{tag}:{i}", 1, 1, 60))
        out.append(await cell.throttle_all([(f"{{{tag}}}:a{i}", Gcra(1, 1, 60))]))
    return out


@pytest.mark.parametrize("engine", ["module", "functions"])
def test_cluster_calls_ask_no_node_for_their_keys(engine: str) -> None:
    if engine == "functions" and twin_engine() != "functions":
        pytest.skip("no functions on this server (Redis 6.2)")
    ports = [int(p) for p in _env("CELL_CLUSTER_PORTS").split(",")]
    admin = redis.cluster.RedisCluster("127.0.0.1", ports[0])
    if engine == "functions":
        Cell(admin).load_functions()
    try:
        sync_clients: list[Any] = [
            redis.cluster.RedisCluster("127.0.0.1", ports[0]),
            valkey.cluster.ValkeyCluster(host="127.0.0.1", port=ports[0]),
        ]
        for client in sync_clients:
            tag = f"t:{uuid.uuid4().hex}"
            before = _getkeys(ports)
            out = _calls(Cell(client, engine=engine), tag)
            assert _getkeys(ports) - before == 0, type(client)
            assert len(out) == CALLS and all(d is not None for d in out)
            assert isinstance(out[0], Decision) and out[0].remaining == 1
            client.close()

        async def run() -> None:
            clients: list[Any] = [
                redis.asyncio.cluster.RedisCluster(host="127.0.0.1", port=ports[0]),
                valkey.asyncio.cluster.ValkeyCluster(host="127.0.0.1", port=ports[0]),
            ]
            for client in clients:
                tag = f"t:{uuid.uuid4().hex}"
                cell = AsyncCell(client, engine=engine)
                await cell.throttle(f"{tag}:warm", 1, 1, 60)
                before = _getkeys(ports)
                out = await _acalls(cell, tag)
                assert _getkeys(ports) - before == 0, type(client)
                assert isinstance(out[0], Decision) and out[0].remaining == 1
                await client.aclose()

        asyncio.run(run())
    finally:
        if engine == "functions":
            # The cluster is the module's: leave it without the library, as found.
            admin.execute_command(
                "FUNCTION FLUSH", target_nodes=redis.cluster.RedisCluster.PRIMARIES
            )
        admin.close()
