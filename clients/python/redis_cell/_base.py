"""What ``Cell`` and ``AsyncCell`` share, written once.

Every operation (detect the engine, load the library, send a call, load a
lost library again and send the call once more) is one coroutine here, and
every client call in it goes through ``_call``. ``AsyncCell``'s ``_call``
awaits the client; ``Cell``'s calls it and answers at once, so that the
coroutine never suspends and ``now`` runs it to its end without an event
loop. The two classes differ in that await only, and in how calls that
found the library missing at once share one load (a lock, a shared task).
The limits storages (``limits.py``) share their strategies the same way.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, ClassVar, Generic, ParamSpec, TypeVar, cast, overload

from redis.asyncio.cluster import RedisCluster as AsyncRedisCluster
from redis.cluster import RedisCluster

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

if TYPE_CHECKING:
    from .aio import AsyncCell
    from .client import Cell

P = ParamSpec("P")
T = TypeVar("T")
C = TypeVar("C")


async def call_now(function: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
    """A sync client's call, made at once."""
    return function(*args, **kwargs)


async def call_awaited(function: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
    """An asyncio client's call, awaited."""
    return await function(*args, **kwargs)


def now(coroutine: Coroutine[Any, Any, T]) -> T:
    """Runs a coroutine of the shared code whose calls are all ``call_now``:
    it never suspends, so one step runs it to its end."""
    try:
        coroutine.send(None)
    except StopIteration as done:
        return cast(T, done.value)
    coroutine.close()
    raise RuntimeError("redis-cell: a sync client's call did not answer at once")


def _is_cluster(client: object) -> bool:
    """redis-py's cluster clients (sync or asyncio), valkey-py's
    ``ValkeyCluster``, or coredis' ``RedisCluster``."""
    kind = type(client)
    return (
        is_cluster_client(client, RedisCluster)
        or is_cluster_client(client, AsyncRedisCluster)
        or (kind.__module__.startswith("coredis") and kind.__name__ == "RedisCluster")
    )


def _coredis_command(words: list[Any]) -> Any:
    """coredis takes any command as ``RedisCommand(name, arguments)``."""
    from coredis.typing import RedisCommand

    name, *sub = str(words[0]).split(" ")
    return RedisCommand(name.encode(), (*sub, *words[1:]))


class _Command(Generic[P, T]):
    """A command's method, from its description in ``_commands``: on a
    ``Cell`` it answers the typed reply, on an ``AsyncCell`` a coroutine of it."""

    def __init__(self, build: Callable[P, Call[T]]) -> None:
        @functools.wraps(build)
        def method(cell: Any, /, *args: P.args, **kwargs: P.kwargs) -> T:
            return cast(T, cell.run(build(*args, **kwargs)))

        @functools.wraps(build)
        async def async_method(cell: Any, /, *args: P.args, **kwargs: P.kwargs) -> T:
            return cast(T, await cell.run(build(*args, **kwargs)))

        self._method: Callable[..., Any] = method
        self._async_method: Callable[..., Any] = async_method

    @overload
    def __get__(self, cell: None, owner: type[Any]) -> Callable[..., Any]: ...
    @overload
    def __get__(self, cell: Cell, owner: type[Any]) -> Callable[P, T]: ...
    @overload
    def __get__(self, cell: AsyncCell, owner: type[Any]) -> Callable[P, Coroutine[Any, Any, T]]: ...
    def __get__(self, cell: Any, owner: type[Any]) -> Any:
        method = self._async_method if owner._asyncio else self._method
        return method if cell is None else method.__get__(cell, owner)


class CellBase(Generic[C]):
    """redis-cell on one client; ``Cell`` and ``AsyncCell`` say how a call is made."""

    # Which of the two methods of each command (``_Command``) the class has.
    _asyncio: ClassVar[bool] = False
    _call: Callable[..., Coroutine[Any, Any, Any]]

    def __init__(self, client: C, engine: Engine | str | None = None) -> None:
        self.client = client
        self._engine = engine_of(engine)
        # A detected engine (not given) is detected again when the module it
        # found is gone (a restart without loadmodule): the twin may be there.
        self._detected = engine is None
        self._script: Any = None
        self._coredis = type(client).__module__.startswith("coredis")
        self._errors = response_errors(client)
        # Reloads of a lost library: how many attempts have ended, and the
        # last one's refusal (None when it loaded). Calls that all found the
        # library missing cost the server one FUNCTION LOAD, not one each,
        # and share its refusal too.
        self._loads = 0
        self._load_refused: Exception | None = None

    @property
    def is_cluster(self) -> bool:
        return _is_cluster(self.client)

    async def _reload(self, loads: int) -> Exception | None:
        """Loads the library again, unless an attempt ended since this call
        was sent (``loads`` is the count it saw then): that attempt's outcome
        is this call's too. Answers the load's error, or None when it loaded."""
        raise NotImplementedError

    async def _load_again(self) -> None:
        # Never raises (but for cancellation): its outcome is kept for every
        # call that waited for it.
        try:
            await self._load(replace=True)
            self._load_refused = None
        except Exception as error:
            self._load_refused = error
        self._loads += 1

    async def _send(self, words: list[Any], key: str | None = None, anywhere: bool = False) -> Any:
        """Sends one command: on a cluster, to ``key``'s node, or to any one
        node (``anywhere``). Looked up at each call (not kept bound), so
        that a client patched or wrapped later is the one used."""
        client = cast(Any, self.client)
        cluster = self.is_cluster
        if self._coredis:
            # A cluster client finds the node from the keys it is given.
            options = {"keys": (key,)} if cluster and key is not None else {}
            return await self._call(client.execute_command, _coredis_command(words), **options)
        routing: dict[str, Any] = {}
        if cluster and key is not None:
            # Left to find the node itself, redis-py's cluster client asks
            # one node COMMAND GETKEYS before every FCALL (its keys "move"):
            # a second round trip per call, to a node that may be down.
            if hasattr(client, "initialize"):
                # An asyncio cluster client reads the slots at first use.
                await self._call(client.initialize)
            routing["target_nodes"] = client.get_node_from_key(key)
        elif cluster and anywhere:
            routing["target_nodes"] = RedisCluster.RANDOM
        return await self._call(client.execute_command, *words, **routing)

    async def _send_to_primaries(self, words: list[Any]) -> list[Any]:
        """Sends one command to every primary of a cluster; their replies."""
        client = cast(Any, self.client)
        if not self._coredis:
            replies = await self._call(
                client.execute_command, *words, target_nodes=RedisCluster.PRIMARIES
            )
            return list(replies.values()) if isinstance(replies, dict) else [replies]
        await self._call(client.initialize)
        replies = []
        # coredis routes no command of its own to every primary: a client
        # of each primary's, closed after its reply.
        for primary in client.primaries:
            try:
                replies.append(await self._call(primary.execute_command, _coredis_command(words)))
            finally:
                primary.connection_pool.disconnect()
        return replies

    async def _current_engine(self) -> Engine:
        if self._engine is None:
            self._engine = await self._detect()
        return self._engine

    async def _detect(self) -> Engine:
        # Keyless: a cluster client is told which node (any) rather than
        # left to look for a key in the arguments.
        has_command = await self._send(["COMMAND INFO", "CL.THROTTLE"], anywhere=True)
        try:
            words = ["FUNCTION LIST", "LIBRARYNAME", LIBRARY]
            has_library = await self._send(words, anywhere=True)
        except self._errors as error:
            has_library = error
        self._engine = choose(has_command, has_library)
        return self._engine

    async def _load(self, replace: bool) -> None:
        source = library_source()
        client = cast(Any, self.client)
        words = ["FUNCTION LOAD", *(["REPLACE"] if replace else []), source]
        if self._coredis:
            # coredis sends FUNCTION LOAD to every primary of a cluster itself.
            await self._call(client.function_load, source, replace=replace)
        elif self.is_cluster:
            # Node by node, so that one primary down or refusing leaves the
            # others loaded; the first failure is raised after them all.
            failed: Exception | None = None
            for node in client.get_primaries():
                try:
                    await self._call(client.execute_command, *words, target_nodes=node)
                except Exception as error:
                    failed = failed or error
            if failed is not None:
                raise failed
        else:
            await self._call(client.execute_command, *words)
        self._engine = Engine.FUNCTIONS

    async def _run(self, call: Call[T]) -> T:
        engine = await self._current_engine()
        check(call, engine)
        loads = self._loads
        try:
            try:
                reply = await self._attempt(call, engine)
            except self._errors as error:
                if not lost_library(error, engine):
                    raise
                refused = await self._reload(loads)
                # Sent again even after a failed load: another client may
                # have loaded it, or (a cluster) the load failed on another
                # node only. The retry tells.
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

    async def _attempt(self, call: Call[T], engine: Engine) -> Any:
        if engine is Engine.EVAL:
            if self._script is None:
                self._script = cast(Any, self.client).register_script(
                    library_source("redis_cell_eval.lua")
                )
            return await self._call(self._script, keys=list(call.keys), args=eval_args(call))
        words = command_args(call, engine)
        if call.fanout and self.is_cluster:
            return call.merge(await self._send_to_primaries(words))
        if not call.keys:
            # Keyless reads (policies are on every primary, CL.TOP counts
            # what its node refused): any one node answers.
            return await self._send(words, anywhere=True)
        # A call's keys share a slot: to the first key's node.
        return await self._send(words, key=call.keys[0])

    throttle = _Command(c.throttle)
    peek = _Command(c.peek)
    reserve = _Command(c.reserve)
    refund = _Command(c.refund)
    throttle_all = _Command(c.throttle_all)
    sw_allow = _Command(c.sw_allow)
    sw_peek = _Command(c.sw_peek)
    sw_refund = _Command(c.sw_refund)
    fw_incr = _Command(c.fw_incr)
    fw_peek = _Command(c.fw_peek)
    fw_refund = _Command(c.fw_refund)
    acquire = _Command(c.acquire)
    release = _Command(c.release)
    renew = _Command(c.renew)
    cc_peek = _Command(c.cc_peek)
    limit = _Command(c.limit)
    policy_set = _Command(c.policy_set)
    policy_get = _Command(c.policy_get)
    policy_del = _Command(c.policy_del)
    policy_list = _Command(c.policy_list)
    policy_promote = _Command(c.policy_promote)
    top = _Command(c.top)
