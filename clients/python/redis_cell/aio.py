"""``AsyncCell``: redis-cell's commands on redis-py's asyncio clients
(``redis.asyncio.Redis``, ``redis.asyncio.cluster.RedisCluster``), or
valkey-py's or coredis' (as limits' asyncio storages give them)."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, TypeVar, Union

import redis.asyncio
from redis.asyncio.cluster import RedisCluster

from ._base import CellBase, call_awaited
from ._commands import Call
from ._engine import Engine

T = TypeVar("T")

if TYPE_CHECKING:
    import coredis
    import valkey.asyncio
    import valkey.asyncio.cluster

AsyncClient = Union[
    "redis.asyncio.Redis",
    "RedisCluster",
    "valkey.asyncio.Valkey",
    "valkey.asyncio.cluster.ValkeyCluster",
    "coredis.Redis[Any]",
    "coredis.RedisCluster[Any]",
]


class AsyncCell(CellBase[AsyncClient]):
    """redis-cell on a redis-py asyncio client; see ``Cell``."""

    _asyncio = True
    _call = staticmethod(call_awaited)

    def __init__(self, client: AsyncClient, engine: Engine | str | None = None) -> None:
        super().__init__(client, engine)
        # The reload under way, which every call that found the library
        # missing meanwhile awaits instead of sending its own.
        self._reloading: asyncio.Task[None] | None = None

    async def engine(self) -> Engine:
        return await self._current_engine()

    async def detect(self) -> Engine:
        """See ``Cell.detect``."""
        return await self._detect()

    async def load_functions(self, replace: bool = True) -> None:
        """See ``Cell.load_functions``."""
        await self._load(replace)

    async def run(self, call: Call[T]) -> T:
        """Sends one call with the chosen engine and reads its typed reply;
        see ``Cell.run``."""
        return await self._run(call)

    async def _reload(self, loads: int) -> Exception | None:
        # One task loads; the calls that find the library missing meanwhile
        # await it and take its outcome.
        if self._loads == loads:
            pending = self._reloading
            if (
                pending is None
                or pending.done()
                or pending.get_loop() is not asyncio.get_running_loop()
            ):
                # A load whose callers were all cancelled is not logged by
                # asyncio as a task exception never retrieved: it raises none.
                pending = asyncio.ensure_future(self._load_again())
                self._reloading = pending
            # Shielded: a caller cancelled while it waits leaves the load to
            # the others.
            await asyncio.shield(pending)
        return self._load_refused
