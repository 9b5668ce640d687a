"""``AsyncCell``: redis-cell's commands on redis-py's asyncio clients
(``redis.asyncio.Redis``, ``redis.asyncio.cluster.RedisCluster``), or
valkey-py's or coredis' (as limits' asyncio storages give them)."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar, Union, cast

import redis.asyncio
from redis.asyncio.cluster import RedisCluster
from redis.commands.core import AsyncScript

from . import _commands as c
from ._commands import Call
from ._engine import (
    LIBRARY,
    Engine,
    check,
    choose,
    command_args,
    engine_of,
    eval_args,
    is_cluster_client,
    library_source,
    load_failed,
    lost_library,
    response_errors,
    still_missing,
    typed,
)
from .errors import ModuleMissingError

P = ParamSpec("P")
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


def _bind(
    build: Callable[P, Call[T]],
) -> Callable[Concatenate[AsyncCell, P], Coroutine[Any, Any, T]]:
    @functools.wraps(build)
    async def method(self: AsyncCell, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return await self.run(build(*args, **kwargs))

    return method


class AsyncCell:
    """redis-cell on a redis-py asyncio client; see ``Cell``."""

    def __init__(self, client: AsyncClient, engine: Engine | str | None = None) -> None:
        self.client = client
        self._engine = engine_of(engine)
        # A detected engine (not given) is detected again when the module it
        # found is gone (a restart without loadmodule): the twin may be there.
        self._detected = engine is None
        self._script: AsyncScript | None = None
        self._coredis = type(client).__module__.startswith("coredis")
        self._errors = response_errors(client)
        # Reloads of a lost library (see Cell): how many attempts have ended,
        # the last one's refusal, and the one under way, which every call
        # that found the library missing meanwhile awaits instead of sending
        # its own.
        self._loads = 0
        self._load_refused: Exception | None = None
        self._reloading: asyncio.Task[None] | None = None

    async def _send(
        self, *words: Any, key_range: tuple[int, int] | None = None, **routing: Any
    ) -> Any:
        if not self._coredis:
            return await cast(Any, self.client).execute_command(*words, **routing)
        # coredis takes any command as RedisCommand(name, arguments); in a
        # cluster it finds the node from the key arguments' range.
        from coredis.typing import RedisCommand

        name, *sub = str(words[0]).split(" ")
        command = RedisCommand(name.encode(), (*sub, *words[1:]))
        options: dict[str, Any] = {}
        if key_range is not None:
            options["slot_arguments_range"] = (key_range[0] + len(sub), key_range[1] + len(sub))
        return await cast(Any, self.client).execute_command(command, **options)

    @property
    def is_cluster(self) -> bool:
        return is_cluster_client(self.client, RedisCluster)

    async def engine(self) -> Engine:
        if self._engine is None:
            self._engine = await self.detect()
        return self._engine

    async def detect(self) -> Engine:
        """Asks the server which engine it has (COMMAND INFO, then FUNCTION LIST)
        and uses it from now on."""
        # Keyless: a cluster client is told which node (any) rather than
        # left to look for a key in the arguments.
        node: dict[str, Any] = {"target_nodes": RedisCluster.RANDOM} if self.is_cluster else {}
        has_command = await self._send("COMMAND INFO", "CL.THROTTLE", **node)
        try:
            has_library = await self._send("FUNCTION LIST", "LIBRARYNAME", LIBRARY, **node)
        except self._errors as error:
            has_library = error
        self._engine = choose(has_command, has_library)
        return self._engine

    async def load_functions(self, replace: bool = True) -> None:
        """Loads the twin's library shipped in this package (FUNCTION LOAD), on
        every primary of a cluster, and uses it from now on."""
        source = library_source()
        if self._coredis:
            # coredis sends FUNCTION LOAD to every primary of a cluster itself.
            await cast(Any, self.client).function_load(source, replace=replace)
        else:
            words = ["FUNCTION LOAD", *(["REPLACE"] if replace else []), source]
            if self.is_cluster:
                # Node by node: see Cell.load_functions.
                failed: Exception | None = None
                for node in cast(Any, self.client).get_primaries():
                    try:
                        await cast(Any, self.client).execute_command(*words, target_nodes=node)
                    except Exception as error:
                        failed = failed or error
                if failed is not None:
                    raise failed
            else:
                await cast(Any, self.client).execute_command(*words)
        self._engine = Engine.FUNCTIONS

    async def run(self, call: Call[T]) -> T:
        """Sends one call with the chosen engine and reads its typed reply;
        see ``Cell.run``."""
        engine = await self.engine()
        check(call, engine)
        loads = self._loads
        try:
            try:
                reply = await self._attempt(call, engine)
            except self._errors as error:
                if not lost_library(error, engine):
                    raise
                refused = await self._reload(loads)
                # Sent again even after a failed load: see Cell.run.
                try:
                    reply = await self._attempt(call, engine)
                except self._errors as again:
                    if not lost_library(again, engine):
                        raise
                    if refused is not None:
                        raise load_failed(error, refused) from refused
                    raise still_missing(error) from again
        except self._errors as error:
            converted = typed(error)
            if isinstance(converted, ModuleMissingError) and self._detected:
                self._engine = None
            if converted is error:
                raise
            raise converted from error
        return call.parse(reply)

    async def _reload(self, loads: int) -> Exception | None:
        """Loads the library again, or awaits the load under way, unless an
        attempt ended since this call was sent (``loads`` is the count it
        saw): that attempt's outcome is this call's too. Answers the load's
        error, or None when it loaded."""
        if self._loads == loads:
            pending = self._reloading
            if (
                pending is None
                or pending.done()
                or pending.get_loop() is not asyncio.get_running_loop()
            ):
                pending = asyncio.ensure_future(self._load_once())
                self._reloading = pending
            # Shielded: a caller cancelled while it waits leaves the load to
            # the others.
            await asyncio.shield(pending)
        return self._load_refused

    async def _load_once(self) -> None:
        # Never raises (but for cancellation): its outcome is kept for every
        # caller, and a load whose callers were all cancelled is not logged
        # by asyncio as a task exception never retrieved.
        try:
            await self.load_functions(replace=True)
            self._load_refused = None
        except Exception as error:
            self._load_refused = error
        self._loads += 1

    async def _attempt(self, call: Call[T], engine: Engine) -> Any:
        if engine is Engine.EVAL:
            if self._script is None:
                self._script = cast(Any, self.client).register_script(
                    library_source("redis_cell_eval.lua")
                )
            return await self._script(keys=list(call.keys), args=eval_args(call))
        if call.fanout and self.is_cluster:
            replies = await cast(Any, self.client).execute_command(
                *command_args(call, engine), target_nodes=RedisCluster.PRIMARIES
            )
            values = list(replies.values()) if isinstance(replies, dict) else [replies]
            return call.merge(values)
        words = command_args(call, engine)
        if call.keys and self.is_cluster and not self._coredis:
            # To the first key's node: see Cell._attempt. (coredis finds it
            # from the key range below, without asking.)
            client = cast(Any, self.client)
            await client.initialize()
            node = client.get_node_from_key(call.keys[0])
            return await client.execute_command(*words, target_nodes=node)
        first = len(words) - len(call.args) - len(call.keys) - 1
        key_range = (first, first + len(call.keys)) if call.keys else None
        return await self._send(*words, key_range=key_range)

    throttle = _bind(c.throttle)
    peek = _bind(c.peek)
    reserve = _bind(c.reserve)
    refund = _bind(c.refund)
    throttle_all = _bind(c.throttle_all)
    sw_allow = _bind(c.sw_allow)
    sw_peek = _bind(c.sw_peek)
    sw_refund = _bind(c.sw_refund)
    fw_incr = _bind(c.fw_incr)
    fw_peek = _bind(c.fw_peek)
    fw_refund = _bind(c.fw_refund)
    acquire = _bind(c.acquire)
    release = _bind(c.release)
    renew = _bind(c.renew)
    cc_peek = _bind(c.cc_peek)
    limit = _bind(c.limit)
    policy_set = _bind(c.policy_set)
    policy_get = _bind(c.policy_get)
    policy_del = _bind(c.policy_del)
    policy_list = _bind(c.policy_list)
    top = _bind(c.top)
