"""``Cell``: redis-cell's commands on redis-py's sync clients (``redis.Redis``,
``redis.cluster.RedisCluster``), or valkey-py's (``valkey.Valkey``,
``valkey.cluster.ValkeyCluster``)."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, TypeVar, Union

import redis
from redis.cluster import RedisCluster

from ._base import CellBase, call_now, now
from ._commands import Call
from ._engine import Engine

T = TypeVar("T")

if TYPE_CHECKING:
    import valkey
    import valkey.cluster

SyncClient = Union["redis.Redis", "RedisCluster", "valkey.Valkey", "valkey.cluster.ValkeyCluster"]


class Cell(CellBase[SyncClient]):
    """redis-cell on a redis-py client. ``engine`` is ``"module"``,
    ``"functions"``, ``"eval"`` or None to detect it at the first call."""

    _asyncio = False
    _call = staticmethod(call_now)

    def __init__(self, client: SyncClient, engine: Engine | str | None = None) -> None:
        super().__init__(client, engine)
        # Reloads of a lost library, one thread at a time.
        self._reload_lock = threading.Lock()

    @property
    def engine(self) -> Engine:
        return now(self._current_engine())

    def detect(self) -> Engine:
        """Asks the server which engine it has (COMMAND INFO, then FUNCTION LIST)
        and uses it from now on."""
        return now(self._detect())

    def load_functions(self, replace: bool = True) -> None:
        """Loads the twin's library shipped in this package (FUNCTION LOAD), on
        every primary of a cluster, and uses it from now on."""
        now(self._load(replace))

    def run(self, call: Call[T]) -> T:
        """Sends one call with the chosen engine and reads its typed reply.
        On the functions engine, a lost library is loaded again (once) and
        the call sent once more (see ``_engine``)."""
        return now(self._run(call))

    async def _reload(self, loads: int) -> Exception | None:
        # One thread loads; the others wait for it and take its outcome.
        with self._reload_lock:
            if self._loads == loads:
                await self._load_again()
            return self._load_refused
