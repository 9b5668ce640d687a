"""``Cell``: redis-cell's commands on redis-py's sync clients (``redis.Redis``,
``redis.cluster.RedisCluster``), or valkey-py's (``valkey.Valkey``,
``valkey.cluster.ValkeyCluster``)."""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar, Union, cast

import redis
from redis.cluster import RedisCluster
from redis.commands.core import Script

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
    import valkey
    import valkey.cluster

SyncClient = Union["redis.Redis", "RedisCluster", "valkey.Valkey", "valkey.cluster.ValkeyCluster"]


def _bind(build: Callable[P, Call[T]]) -> Callable[Concatenate[Cell, P], T]:
    @functools.wraps(build)
    def method(self: Cell, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return self.run(build(*args, **kwargs))

    return method


class Cell:
    """redis-cell on a redis-py client. ``engine`` is ``"module"``,
    ``"functions"``, ``"eval"`` or None to detect it at the first call."""

    def __init__(self, client: SyncClient, engine: Engine | str | None = None) -> None:
        self.client = client
        self._engine = engine_of(engine)
        # A detected engine (not given) is detected again when the module it
        # found is gone (a restart without loadmodule): the twin may be there.
        self._detected = engine is None
        self._script: Script | None = None
        self._errors = response_errors(client)
        # Reloads of a lost library, one at a time: how many attempts have
        # ended, and the last one's refusal (None when it loaded). The calls
        # of many threads that all found the library missing cost the server
        # one FUNCTION LOAD, not one each, and share its refusal too.
        self._loads = 0
        self._load_refused: Exception | None = None
        self._reload_lock = threading.Lock()

    def _send(self, *words: Any, **options: Any) -> Any:
        # Looked up at each call (not kept bound), so that a client patched
        # or wrapped later is the one used.
        return cast(Any, self.client).execute_command(*words, **options)

    @property
    def is_cluster(self) -> bool:
        return is_cluster_client(self.client, RedisCluster)

    @property
    def engine(self) -> Engine:
        if self._engine is None:
            self._engine = self.detect()
        return self._engine

    def detect(self) -> Engine:
        """Asks the server which engine it has (COMMAND INFO, then FUNCTION LIST)
        and uses it from now on."""
        # Keyless: a cluster client is told which node (any) rather than
        # left to look for a key in the arguments.
        node: dict[str, Any] = {"target_nodes": RedisCluster.RANDOM} if self.is_cluster else {}
        has_command = self._send("COMMAND INFO", "CL.THROTTLE", **node)
        try:
            has_library = self._send("FUNCTION LIST", "LIBRARYNAME", LIBRARY, **node)
        except self._errors as error:
            has_library = error
        self._engine = choose(has_command, has_library)
        return self._engine

    def load_functions(self, replace: bool = True) -> None:
        """Loads the twin's library shipped in this package (FUNCTION LOAD), on
        every primary of a cluster, and uses it from now on."""
        words = ["FUNCTION LOAD", *(["REPLACE"] if replace else []), library_source()]
        if self.is_cluster:
            # Node by node, so that one primary down or refusing leaves the
            # others loaded; the first failure is raised after them all.
            failed: Exception | None = None
            for node in cast(Any, self.client).get_primaries():
                try:
                    self._send(*words, target_nodes=node)
                except Exception as error:
                    failed = failed or error
            if failed is not None:
                raise failed
        else:
            self._send(*words)
        self._engine = Engine.FUNCTIONS

    def run(self, call: Call[T]) -> T:
        """Sends one call with the chosen engine and reads its typed reply.
        On the functions engine, a lost library is loaded again (once) and
        the call sent once more (see ``_engine``)."""
        engine = self.engine
        check(call, engine)
        loads = self._loads
        try:
            try:
                reply = self._attempt(call, engine)
            except self._errors as error:
                if not lost_library(error, engine):
                    raise
                refused = self._reload(loads)
                # Sent again even after a failed load: another client may
                # have loaded it, or (a cluster) the load failed on another
                # node only. The retry tells.
                try:
                    reply = self._attempt(call, engine)
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

    def _reload(self, loads: int) -> Exception | None:
        """Loads the library again, unless another thread's attempt ended
        since this call was sent (``loads`` is the count it saw then): that
        attempt's outcome is this call's too. Answers the load's error, or
        None when it loaded."""
        with self._reload_lock:
            if self._loads == loads:
                try:
                    self.load_functions(replace=True)
                    self._load_refused = None
                except Exception as error:
                    self._load_refused = error
                self._loads += 1
            return self._load_refused

    def _attempt(self, call: Call[T], engine: Engine) -> Any:
        if engine is Engine.EVAL:
            if self._script is None:
                self._script = cast(Any, self.client).register_script(
                    library_source("redis_cell_eval.lua")
                )
            return self._script(keys=list(call.keys), args=eval_args(call))
        if call.fanout and self.is_cluster:
            replies = self._send(*command_args(call, engine), target_nodes=RedisCluster.PRIMARIES)
            values = list(replies.values()) if isinstance(replies, dict) else [replies]
            return call.merge(values)
        if call.keys and self.is_cluster:
            # To the first key's node (a call's keys share a slot). Left to
            # find the node itself, redis-py's cluster client asks one node
            # COMMAND GETKEYS before every FCALL (its keys "move"): a second
            # round trip per call, to a node that may be down.
            node = cast(Any, self.client).get_node_from_key(call.keys[0])
            return self._send(*command_args(call, engine), target_nodes=node)
        return self._send(*command_args(call, engine))

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
