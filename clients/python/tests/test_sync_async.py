"""The same operations through ``Cell`` and through ``AsyncCell``, on every
client family each takes (redis-py and valkey-py; coredis on the asyncio
side only): the same replies on a plain server, on both engines, and the
same effect on a cluster's nodes."""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from collections.abc import Callable
from typing import Any

import coredis
import pytest
import redis
import redis.asyncio
import redis.asyncio.cluster
import redis.cluster
import valkey
import valkey.asyncio
import valkey.asyncio.cluster
import valkey.cluster

from redis_cell import AsyncCell, Cell, Decision, Fixed, Gcra, Sliding

from .conftest import _env, twin_engine

Make = Callable[[int], Any]

SYNC: dict[str, Make] = {
    "redis-py": lambda port: redis.Redis("127.0.0.1", port),
    "valkey-py": lambda port: valkey.Valkey("127.0.0.1", port),
}
ASYNC: dict[str, Make] = {
    "redis-py": lambda port: redis.asyncio.Redis(host="127.0.0.1", port=port),
    "valkey-py": lambda port: valkey.asyncio.Valkey(host="127.0.0.1", port=port),
    "coredis": lambda port: coredis.Redis(host="127.0.0.1", port=port),
}
SYNC_CLUSTER: dict[str, Make] = {
    "redis-py": lambda port: redis.cluster.RedisCluster("127.0.0.1", port),
    "valkey-py": lambda port: valkey.cluster.ValkeyCluster(host="127.0.0.1", port=port),
}
ASYNC_CLUSTER: dict[str, Make] = {
    "redis-py": lambda port: redis.asyncio.cluster.RedisCluster(host="127.0.0.1", port=port),
    "valkey-py": lambda port: valkey.asyncio.cluster.ValkeyCluster(host="127.0.0.1", port=port),
    "coredis": lambda port: coredis.RedisCluster(host="127.0.0.1", port=port),
}

# (method, positional arguments, keyword arguments) on one key's names.
Operation = tuple[str, tuple[Any, ...], dict[str, Any]]


def _operations(key: str) -> list[Operation]:
    """Every helper that takes keys, in an order whose replies do not depend
    on the time between the calls: hour-long periods, answered in seconds
    (but for a fresh lease's, which is exact in milliseconds too)."""
    pair = [(f"{{{key}}}:a", Gcra(1, 1, 3600)), (f"{{{key}}}:b", Sliding(1, 3600))]
    return [
        ("throttle", (key + ":g", 3, 3, 3600), {}),
        ("throttle", (key + ":g", 3, 3, 3600), {"quantity": 2}),
        ("peek", (key + ":g", 3, 3, 3600), {}),
        ("refund", (key + ":g", 3, 3, 3600, 1), {}),
        ("reserve", (key + ":r", 0, 1, 3600), {"max_wait": 7200}),
        ("reserve", (key + ":r", 0, 1, 3600), {"max_wait": 60}),
        ("throttle_all", (pair,), {}),
        ("throttle_all", (pair,), {"quantity": 0}),
        ("throttle_all", ([(f"{{{key}}}:c", Fixed(2, 3600))],), {"quantity": 3}),
        ("sw_allow", (key + ":s", 3, 3600), {"quantity": 2}),
        ("sw_peek", (key + ":s", 3, 3600), {}),
        ("sw_refund", (key + ":s", 3, 3600, 1), {}),
        ("sw_allow", (key + ":sa", 3, 3600), {"approx": True}),
        ("sw_peek", (key + ":sa", 3, 3600), {"approx": True}),
        ("fw_incr", (key + ":f", 3, 3600), {"quantity": 2}),
        ("fw_peek", (key + ":f", 3, 3600), {}),
        ("fw_refund", (key + ":f", 3, 3600, 1), {}),
        ("fw_incr", (key + ":fa", 3, 3600), {"align": True}),
        ("acquire", (key + ":c", 2, 3600), {"id": "worker", "ms": True}),
        ("acquire", (key + ":c", 2, 3600), {}),
        ("cc_peek", (key + ":c", 2), {}),
        ("renew", (key + ":c", "worker", 3600), {}),
        ("release", (key + ":c", "worker"), {}),
        ("release", (key + ":c", "worker"), {}),
    ]


def _comparable(name: str, kwargs: dict[str, Any], reply: Any) -> Any:
    # A window aligned to the epoch (ALIGN, and APPROX's sliding counter)
    # ends at an instant, and a new lease's id is random: what depends on
    # when the call came is compared by its place in the reply only.
    if kwargs.get("align") or kwargs.get("approx"):
        reply = dataclasses.replace(reply, reset_after=0)
    if name == "acquire" and "id" not in kwargs:
        reply = dataclasses.replace(reply, id=reply.id is not None)
    return reply


def _sync_replies(cell: Cell, key: str) -> list[Any]:
    return [
        _comparable(name, kwargs, getattr(cell, name)(*args, **kwargs))
        for name, args, kwargs in _operations(key)
    ]


async def _async_replies(cell: AsyncCell, key: str) -> list[Any]:
    return [
        _comparable(name, kwargs, await getattr(cell, name)(*args, **kwargs))
        for name, args, kwargs in _operations(key)
    ]


async def _aclose(client: Any) -> None:
    if hasattr(client, "aclose"):
        await client.aclose()
    else:
        client.connection_pool.disconnect()


@pytest.mark.parametrize("server", ["module", "twin"])
def test_every_helper_answers_the_same_sync_and_asyncio(server: str) -> None:
    port = int(_env("CELL_MODULE_PORT" if server == "module" else "CELL_TWIN_PORT"))
    engine = "eval" if server == "twin" and twin_engine() == "eval" else None
    answers: dict[str, list[Any]] = {}
    for family, make in SYNC.items():
        client = make(port)
        answers[f"sync {family}"] = _sync_replies(Cell(client, engine), f"t:{uuid.uuid4().hex}")
        client.close()

    async def run(make: Make) -> list[Any]:
        client = make(port)
        try:
            return await _async_replies(AsyncCell(client, engine), f"t:{uuid.uuid4().hex}")
        finally:
            await _aclose(client)

    for family, make in ASYNC.items():
        answers[f"asyncio {family}"] = asyncio.run(run(make))
    first = answers["sync redis-py"]
    assert len(first) == len(_operations("k")) and first[0] == Decision(False, 4, 3, -1, 1200)
    for family, replies in answers.items():
        assert replies == first, family


KEYED = ("cl.throttle", "sw.allow", "fw.incr", "cl.throttleall")


def _cluster_operations(key: str) -> list[Operation]:
    pair = [(key + ":a", Gcra(1, 1, 3600)), (key + ":b", Fixed(2, 3600))]
    return [
        ("throttle", (key + ":g", 3, 3, 3600), {}),
        ("sw_allow", (key + ":s", 3, 3600), {}),
        ("fw_incr", (key + ":f", 3, 3600), {}),
        ("throttle_all", (pair,), {}),
    ]


def _counts(nodes: list[redis.Redis]) -> list[tuple[dict[str, int], int]]:
    """Per node: the keyed commands it ran, and the MOVED it answered."""
    out = []
    for node in nodes:
        stats: Any = node.info("commandstats")
        errors: Any = node.info("errorstats")
        ran = {c: int(stats.get(f"cmdstat_{c}", {}).get("calls", 0)) for c in KEYED}
        out.append((ran, int(errors.get("errorstat_MOVED", {}).get("count", 0))))
    return out


CLUSTER_SIDES = [
    ("sync", "redis-py"),
    ("sync", "valkey-py"),
    ("asyncio", "redis-py"),
    ("asyncio", "valkey-py"),
    ("asyncio", "coredis"),
]


@pytest.mark.parametrize(("side", "family"), CLUSTER_SIDES)
def test_cluster_calls_have_the_same_effect_sync_and_asyncio(side: str, family: str) -> None:
    """On every cluster client: a policy set reaches every primary (policies
    are per node) and its deletion leaves none; the other keyless calls are
    answered by one node; each call with keys runs once, on its key's node,
    reached at once (no MOVED)."""
    port = int(_env("CELL_CLUSTER_PORTS").split(",")[0])
    nodes = [redis.Redis("127.0.0.1", int(p)) for p in _env("CELL_CLUSTER_PORTS").split(",")]
    key = f"{{t:{uuid.uuid4().hex}}}"
    name = "p-" + uuid.uuid4().hex[:16]

    def policies() -> list[bool]:
        return [name.encode() in n.execute_command("CL.POLICY", "LIST") for n in nodes]

    before = _counts(nodes)
    if side == "sync":
        client = SYNC_CLUSTER[family](port)
        cell = Cell(client)
        replies = [getattr(cell, m)(*a, **k) for m, a, k in _cluster_operations(key)]
        cell.policy_set(name, Gcra(0, 1, 60))
        while_set = policies()
        read = [cell.policy_list(), cell.policy_get(name), cell.top(policy=name)]
        deleted = cell.policy_del(name)
        client.close()
    else:

        async def run() -> tuple[list[Any], list[bool], list[Any], bool]:
            client = ASYNC_CLUSTER[family](port)
            try:
                cell = AsyncCell(client)
                out = [await getattr(cell, m)(*a, **k) for m, a, k in _cluster_operations(key)]
                await cell.policy_set(name, Gcra(0, 1, 60))
                everywhere = policies()
                read = [
                    await cell.policy_list(),
                    await cell.policy_get(name),
                    await cell.top(policy=name),
                ]
                return out, everywhere, read, await cell.policy_del(name)
            finally:
                await _aclose(client)

        replies, while_set, read, deleted = asyncio.run(run())
    after = _counts(nodes)
    for n in nodes:
        n.close()
    assert [r.limited for r in replies] == [False] * len(replies)
    assert while_set == [True] * len(nodes)
    listed, info, top = read
    assert name in listed and info.limiter == "GCRA 0 1 60" and top == []
    assert deleted is True and policies() == [False] * len(nodes)
    moved = [a[1] - b[1] for b, a in zip(before, after, strict=True)]
    assert moved == [0] * len(nodes), "a call was sent to another node first"
    ran = sorted([a[0][c] - b[0][c] for c in KEYED] for b, a in zip(before, after, strict=True))
    assert ran == [[0] * len(KEYED)] * (len(nodes) - 1) + [[1] * len(KEYED)]
