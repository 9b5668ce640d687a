"""Storages for the ``limits`` library (and so flask-limiter and slowapi) on
redis-cell. Importing this module registers them:

===========================  ==========================================
scheme                       storage
===========================  ==========================================
``rediscell://``             ``CellStorage`` (also ``rediscells://`` TLS,
                             ``rediscell+unix://``)
``rediscell+cluster://``     ``CellClusterStorage``
``rediscell+sentinel://``    ``CellSentinelStorage``
``async+rediscell...``       the asyncio twins (``AsyncCellStorage``, ...)
===========================  ==========================================

Each is ``limits``' own Redis storage (connections, options, key prefix,
``get``, ``get_expiry``, ``clear``, ``reset`` unchanged, but for the error
``get`` raises on another strategy's key) with the strategies moved onto
redis-cell, and a ``check`` that also asks the engine (False when the module
is gone or the twin's library cannot be loaded):

- moving window: ``SW.ALLOW``, with the item's limit (one log entry per
  request whatever its cost, the server's clock); ``get_moving_window`` from
  two ``SW.PEEK``\\ s with the item's limit;
- fixed window: ``FW.INCR ... COUNTALL`` with the item's limit, read from
  limits' key (``RateLimitItem.key_for`` ends in ``/amount/multiples/
  granularity``): every hit counts as limits' ``INCRBY`` counts it, so the
  key stays the same INCR counter with a TTL (counters written by limits'
  own storage carry over, and back), and the server sees which hits went
  over (``INFO``'s ``fw_incr_limited``, ``CL.TOP``); a key that carries no
  limit is counted with none, and limits decides alone;
- sliding window counter: ``limits``' own algorithm and keys, in a script of
  ours (redis-cell's ``APPROX`` aligns windows to the epoch and rounds up,
  which ``limits`` does not).

Live limits (module only): ``policies={selector: name}`` (or
``?policy=name:selector`` in the URI, repeated) sends ``POLICY name`` with
the fixed and moving windows' calls for the keys a selector picks (a rate
limit such as ``"10/minute"``, or a glob over limits' key such as
``"LIMITER/*/login/*"``): while the ``CL.POLICY`` exists it decides, and
the count answered to limits is moved so that limits refuses what it
refused; while it does not, the app's own limit applies. On the twin,
which has no policies, the option is a ``ConfigurationError``.

The engine is the module's commands where the server has them, otherwise the
Functions twin if its library is loaded; pass ``engine=...`` (an option, or
``?engine=functions`` in the URI) to choose it, e.g. for an ACL user that may
not call ``COMMAND``.

A negative cost is what limits' own Redis storage makes of it: the moving
window answers True and records nothing, the fixed window and the sliding
window counter lower the count (below 0 too, as ``INCRBY`` does). A key
that one strategy wrote and another is asked to use is a ``WrongTypeError``
naming the key, what it holds and the way out.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Coroutine, Iterable, Mapping
from fnmatch import fnmatchcase
from typing import Any, cast
from urllib.parse import parse_qsl, urlencode

from limits.aio.storage import RedisClusterStorage as _AsyncRedisClusterStorage
from limits.aio.storage import RedisSentinelStorage as _AsyncRedisSentinelStorage
from limits.aio.storage import RedisStorage as _AsyncRedisStorage
from limits.errors import ConfigurationError
from limits.limits import TIME_TYPES
from limits.storage import RedisClusterStorage as _RedisClusterStorage
from limits.storage import RedisSentinelStorage as _RedisSentinelStorage
from limits.storage import RedisStorage as _RedisStorage
from limits.util import parse_many

from . import _commands as c
from ._base import CellBase, call_awaited, call_now, now
from ._engine import Engine, library_source, typed
from ._types import Decision
from .aio import AsyncCell
from .client import Cell
from .errors import CellError, LimiterMismatchError, WrongTypeError

__all__ = [
    "AsyncCellClusterStorage",
    "AsyncCellSentinelStorage",
    "AsyncCellStorage",
    "CellClusterStorage",
    "CellSentinelStorage",
    "CellStorage",
]

# A limit no count reaches, for the calls that must count past any limit:
# a fixed window hit whose key carries no limit (see _limit_of), a moving
# window over its limit (SW.PEEK answers no negative remaining): below 2^53,
# where the Functions twin's integers are exact.
UNBOUNDED = 2**53 - 1

# The longest amount or multiples _limit_of reads (UNBOUNDED has 16 digits).
_DIGITS = 16

_SLIDING = library_source("limits_sliding_window.lua")

MIGRATION = (
    "; it holds the list that limits' own Redis storage keeps for a moving window: "
    "see docs/clients/python.md (Migrating) to drop those keys or use another key_prefix"
)

# A fixed window hit of negative cost: FW.INCR takes no negative quantity and
# FW.REFUND stops at 0, while limits' own storage lowers the counter as
# INCRBY does, below 0 too, and starts the window when the counter it
# answers equals the amount (the key was absent, or at 0). INCRBY's error
# (another strategy's key) is answered as the server's own reply: Redis 6.2
# wraps an error raised in a script in "Error running script ...: ", which
# hides its WRONGTYPE.
_LOWER = """
local count = redis.pcall('incrby', KEYS[1], ARGV[1])
if type(count) == 'table' then return count end
if count == tonumber(ARGV[1]) then redis.call('expire', KEYS[1], ARGV[2]) end
return count
"""

# INCRBY's reply for a string that is no integer.
_NOT_AN_INTEGER = "ERR value is not an integer"

# The key check() peeks at (nothing is written): one call through the engine.
CHECK_KEY = "redis-cell:check"

# What each strategy keeps under a limit's key, as TYPE (and, for the
# twin's strings, their first bytes) tells them apart.
_HOLDS = {
    "moving": "a moving window log (limits' moving-window strategy)",
    "fixed": "a fixed window counter (limits' fixed-window strategy)",
}


def _holder(kind: Any, head: Any) -> str | None:
    kind = kind.decode() if isinstance(kind, bytes) else str(kind)
    head = head.encode() if isinstance(head, str) else (head or b"")
    if kind == "cell-swin" or (kind == "string" and head.startswith(b"\x00SW")):
        return "moving"
    if kind == "string":
        return "fixed"
    return "list" if kind == "list" else None


def _mismatch_error(
    error: CellError, key: str, wanted: str, kind: Any, head: Any
) -> WrongTypeError:
    """The error for a strategy used on a key another strategy wrote."""
    holder = _holder(kind, head)
    if holder == "list":
        holds = "the list that limits' own Redis storage keeps for a moving window"
        return LimiterMismatchError(f"{error.message} ({key}{MIGRATION})", key, holds)
    if holder is None or holder == wanted:
        return WrongTypeError(f"{error.message} ({key})")
    return LimiterMismatchError(
        f"WRONGTYPE key {key} holds {_HOLDS[holder]}; a {wanted} window cannot use it: "
        "use another key prefix (the storage's key_prefix) for one of the two limits, "
        "or delete the key",
        key,
        _HOLDS[holder],
    )


def _wrong_type(error: Exception) -> CellError | None:
    """The typed WRONGTYPE of a call, or None for any other error. A value
    that is no integer (the twin's window read as a fixed window's counter,
    by ``GET`` or by the refund script's ``INCRBY``) is one too."""
    if isinstance(error, ValueError):
        return WrongTypeError(f"WRONGTYPE the key holds no fixed window counter ({error})")
    converted = typed(error)
    if isinstance(converted, CellError) and converted.message.startswith(_NOT_AN_INTEGER):
        return WrongTypeError(f"WRONGTYPE the key holds no fixed window counter ({error})")
    return converted if isinstance(converted, WrongTypeError) else None


# The query options that are ours, taken out of the URI limits' storage sees.
_OURS = ("engine", "policy")


def _uri(uri: str) -> tuple[str, str | None, list[tuple[str, str]]]:
    """limits' URI for the same server, the ``engine`` query option and the
    ``policy`` ones (``policy=name:selector``, repeated), as (selector,
    name). Only the scheme and those options change: the rest is kept as
    written (``rediscell+unix:///path`` keeps its empty host)."""
    scheme, colon, rest = uri.partition(":")
    scheme = scheme.replace("rediscell", "redis", 1)
    base, _, tail = rest.partition("?")
    query, hash_, fragment = tail.partition("#")
    pairs = parse_qsl(query, keep_blank_values=True)
    engine = next((v for k, v in pairs if k == "engine"), None)
    policies = []
    for k, v in pairs:
        if k == "policy":
            name, colon_, selector = v.partition(":")
            if not colon_:
                raise ConfigurationError(
                    f"redis-cell: the URI's policy={v!r} is not 'name:selector' "
                    "(e.g. policy=login:LIMITER/*/login/*)"
                )
            policies.append((selector, name))
    if any(k in _OURS for k, _ in pairs):
        query = urlencode([(k, v) for k, v in pairs if k not in _OURS])
    return (
        scheme + colon + base + ("?" + query if query else "") + hash_ + fragment,
        engine,
        policies,
    )


def _limit_of(key: str, expiry: int | None = None) -> tuple[int, int] | None:
    """The limit and the window (s) of the item a key of limits' was made
    for: ``RateLimitItem.key_for`` writes ``namespace/identifiers.../amount/
    multiples/granularity``. None for any other key (a storage called with
    keys of its own), and for one whose window is not the ``expiry`` it
    comes with: such hits keep counting with UNBOUNDED."""
    parts = key.rsplit("/", 3)
    if len(parts) != 4:
        return None
    _, amount, multiples, granularity = parts
    unit = TIME_TYPES.get(granularity)
    if unit is None or not all(
        0 < len(n) <= _DIGITS and n.isascii() and n.isdigit() for n in (amount, multiples)
    ):
        return None
    limit, window = int(amount), int(multiples) * unit.seconds
    if limit > UNBOUNDED or window == 0 or (expiry is not None and window != expiry):
        return None
    return limit, window


# CL.POLICY names: what the module accepts.
_POLICY_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")


class _Policies:
    """Which CL.POLICY a key of limits' is decided by (the ``policies``
    option): the first selector that matches it, in the order given. A
    selector is one rate limit as limits writes them (``"10/minute"``,
    ``"10 per 1 minute"``), matching every key made for that amount and
    window, or else a glob (``*``, ``?``, ``[...]``) over the whole key
    without the storage's ``key_prefix`` (``"LIMITER/*/login/*"``:
    flask-limiter's keys are ``LIMITER/<key_func>/<scope>/<limit>``)."""

    def __init__(self, rules: Iterable[tuple[str, str]]) -> None:
        self._rules: list[tuple[Callable[[str], bool], str]] = []
        for selector, name in rules:
            if not isinstance(selector, str):
                raise ConfigurationError(
                    f"redis-cell: a policy's selector is a string, not {selector!r}"
                )
            if not isinstance(name, str) or not _POLICY_NAME.fullmatch(name):
                raise ConfigurationError(
                    f"redis-cell: policy name {name!r} (for {selector!r}) is no CL.POLICY "
                    "name: 1 to 64 letters, digits, '_', '.' or '-'"
                )
            self._rules.append((self._matcher(selector), name))

    @staticmethod
    def _matcher(selector: str) -> Callable[[str], bool]:
        try:
            items = list(parse_many(selector))
        except ValueError:
            items = []
        if len(items) == 1:
            item = items[0]
            tail = f"/{item.amount}/{item.multiples}/{item.GRANULARITY.name}"
            return lambda key: key.endswith(tail)
        return lambda key: fnmatchcase(key, selector)

    def __bool__(self) -> bool:
        return bool(self._rules)

    def of(self, key: str) -> str | None:
        return next((name for matches, name in self._rules if matches(key)), None)


def _policy_rules(option: Mapping[str, str] | None, uri: list[tuple[str, str]]) -> _Policies:
    if option is not None and not isinstance(option, Mapping):
        raise ConfigurationError(
            "redis-cell: policies must map selectors to CL.POLICY names, "
            "e.g. {'LIMITER/*/login/*': 'login'}"
        )
    return _Policies([*(option or {}).items(), *uri])


def _shown(limit: int, decision: Decision, count: int) -> int:
    """The count a hit answers limits, which compares it with the app's own
    ``limit``: the key's count, moved by the difference between the limit
    that decided (a policy's) and the app's, so that limits refuses exactly
    what the policy refused and reports its remaining. Without a policy
    (or when it does not exist) the two limits are one: the count itself."""
    return count + limit - decision.limit


def _window_start(now: float, expiry: int, used: int, last: Decision, oldest: Decision) -> float:
    """When the oldest request in the window was recorded: from the time
    until the window is empty (one request) or until the window would hold
    one fewer than now (several), both in milliseconds."""
    if used == 1 or oldest.retry_after < 0:
        return now + last.reset_after / 1000 - expiry
    return now + oldest.retry_after / 1000 - float(expiry)


def _restarts(count: int, amount: int, expiry: int, decision: Decision) -> bool:
    """Whether limits' own storage would set the window's end again here:
    its INCRBY + EXPIRE does whenever the count answered equals the amount,
    which for a counter that existed means refunds had brought it back to 0.
    FW.INCR keeps such a counter's expiry (a new counter gets the whole
    window: ``reset_after`` in ms is then at least ``expiry`` s)."""
    return count == amount and decision.reset_after < expiry * 1000


def _sliding(reply: Any) -> tuple[int, float, int, float]:
    previous, previous_ttl, current, current_ttl = (int(x) for x in reply)
    return previous, max(0, previous_ttl) / 1000, current, max(0, current_ttl) / 1000


class _Strategies:
    """The strategies on redis-cell, written once for limits' sync and asyncio
    Redis storages: coroutines whose every call goes through ``_call``, which
    ``_CellSync`` makes at once and ``_CellAsync`` awaits (see ``_base``)."""

    _cell: CellBase[Any]
    _engine_choice: str | None
    _policies: _Policies
    _call: Callable[..., Coroutine[Any, Any, Any]]
    # What comes before the scheme in this side's URIs.
    _SCHEME_PREFIX = ""

    def __init__(
        self,
        uri: str,
        engine: str | None = None,
        policies: Mapping[str, str] | None = None,
        **options: Any,
    ) -> None:
        uri, from_uri, uri_policies = _uri(uri.removeprefix(self._SCHEME_PREFIX))
        self._engine_choice = engine or from_uri
        self._policies = _policy_rules(policies, uri_policies)
        if self._policies and self._engine_choice not in (None, Engine.MODULE.value):
            raise self._twin_has_no_policies(self._engine_choice)
        super().__init__(self._SCHEME_PREFIX + uri, **options)  # type: ignore[call-arg]

    @staticmethod
    def _twin_has_no_policies(engine: str) -> ConfigurationError:
        return ConfigurationError(
            f"redis-cell: the storage's policies need the module's commands (POLICY name), "
            f"and its engine is {engine!r}: the Functions twin has no policies. Load "
            "libredis_cell.so on the server, or drop the policies option (the app's own "
            "limits then apply, as they do for a policy that does not exist)"
        )

    async def _policy(self, key: str) -> str | None:
        """The CL.POLICY deciding ``key`` (limits' key, unprefixed), if the
        storage has policies and one matches it. With policies, every call
        must be on the module: the twin would ignore them."""
        if not self._policies:
            return None
        engine = await self._cell._current_engine()
        if engine is not Engine.MODULE:
            raise self._twin_has_no_policies(engine.value)
        return self._policies.of(key)

    def _prefixed(self, key: str) -> str:
        raise NotImplementedError

    def _previous_window_key(self, key: str) -> str:
        return f"{{{key}}}/-1"

    def _current_window_key(self, key: str) -> str:
        return f"{{{key}}}"

    def _attach(self, cell: CellBase[Any]) -> None:
        """Decides on ``cell``, with the scripts registered on its client."""
        self._cell = cell
        connection = cast(Any, cell.client)
        self._sliding = connection.register_script(_SLIDING)
        self._lower = connection.register_script(_LOWER)

    async def _mismatch(self, error: CellError, key: str, wanted: str) -> WrongTypeError:
        connection = cast(Any, self._cell.client)
        try:
            kind = await self._call(connection.type, key)
            fixed = _holder(kind, b"") == "fixed"
            head = await self._call(connection.getrange, key, 0, 2) if fixed else b""
        except Exception:
            return WrongTypeError(f"{error.message} ({key})")
        return _mismatch_error(error, key, wanted, kind, head)

    async def _acquire_entry(self, key: str, limit: int, expiry: int, amount: int = 1) -> bool:
        policy = await self._policy(key)
        # A policy may admit more than the app's limit: the server decides.
        if amount > limit and policy is None:
            return False
        key = self._prefixed(key)
        try:
            # A negative cost: allowed, nothing recorded (a peek that keeps
            # the key's type checked), as limits' own moving window answers.
            call = c.sw_allow(key, limit, expiry, max(amount, 0), policy=policy)
            decision = await self._cell._run(call)
            return not decision.limited
        except WrongTypeError as error:
            raise await self._mismatch(error, key, "moving") from error

    async def _get_moving_window(self, key: str, limit: int, expiry: int) -> tuple[float, int]:
        policy = await self._policy(key)
        key = self._prefixed(key)
        now = time.time()
        # Where the twin's integers are exact, as every count here.
        limit = min(limit, UNBOUNDED)
        try:
            last = await self._cell._run(c.sw_peek(key, limit, expiry, ms=True, policy=policy))
            decided = last
            if last.limited:
                # Over the limit (lowered since): SW.PEEK's remaining stops
                # at 0, so the count is read against a limit no log reaches.
                last = await self._cell._run(c.sw_peek(key, UNBOUNDED, expiry, ms=True))
                used = UNBOUNDED - last.remaining
            else:
                used = last.limit - last.remaining
        except WrongTypeError as error:
            raise await self._mismatch(error, key, "moving") from error
        shown = _shown(limit, decided, used)
        if used <= 0:
            return now, shown
        oldest = last
        if used > 1:
            oldest = await self._cell._run(c.sw_peek(key, used - 1, expiry, ms=True))
        return _window_start(now, expiry, used, last, oldest), shown

    async def _incr(self, key: str, expiry: int, amount: int = 1) -> int:
        policy = await self._policy(key)
        item = _limit_of(key, expiry)
        if policy is not None and item is None:
            raise ConfigurationError(
                f"redis-cell: policy {policy!r} matches key {key!r}, which carries no "
                "limit (limits' keys end in /amount/multiples/granularity, the window "
                "equal to the hit's expiry): a policy needs the app's limit to fall back to"
            )
        key = self._prefixed(key)
        connection = cast(Any, self._cell.client)
        try:
            if amount < 0:
                return int(await self._call(self._lower, keys=[key], args=[amount, expiry]))
            if item is None:
                # A key that does not say its limit: FW.INCR only counts, and
                # limits decides from the count.
                decision = await self._cell._run(c.fw_incr(key, UNBOUNDED, expiry, amount, ms=True))
            else:
                # COUNTALL counts as INCRBY counts, refused or not, and the
                # server knows which hits went over: INFO and CL.TOP see them.
                call = c.fw_incr(
                    key, item[0], expiry, amount, ms=True, countall=True, policy=policy
                )
                decision = await self._cell._run(call)
            count = decision.limit - decision.remaining
            if item is None and count == 0:
                # Without COUNTALL, FW.INCR answers no count below 0 (its
                # remaining stops at the limit); refunds make such counters,
                # and limits' INCRBY answers their value. COUNTALL's
                # remaining is the limit minus the count, whatever its sign.
                count = int(await self._call(connection.get, key) or 0)
            if policy is None and _restarts(count, amount, expiry, decision):
                await self._call(connection.expire, key, expiry)
            return count if item is None else _shown(item[0], decision, count)
        except Exception as error:
            wrong = _wrong_type(error)
            if wrong is None:
                raise
            raise await self._mismatch(wrong, key, "fixed") from error

    async def _get(self, key: str) -> int:
        policy = await self._policy(key)
        item = _limit_of(key)
        try:
            if policy is None or item is None:
                return int(await self._call(super().get, key))  # type: ignore[misc]
            # The count as the policy sees it (see _shown), for limits' test()
            # and window stats: what the next hit would be compared with.
            limit, window = item
            call = c.fw_peek(self._prefixed(key), limit, window, countall=True, policy=policy)
            decision = await self._cell._run(call)
            return _shown(limit, decision, decision.limit - decision.remaining)
        except Exception as error:
            wrong = _wrong_type(error)
            if wrong is None:
                raise
            raise await self._mismatch(wrong, self._prefixed(key), "fixed") from error

    async def _check(self) -> bool:
        """limits' check (PING), then one read through the engine: False when
        the server cannot answer the strategies (the module gone, the twin's
        library missing and not loadable), as limits' storages answer False
        when their server cannot."""
        try:
            if not await self._call(super().check):  # type: ignore[misc]
                return False
            await self._cell._run(c.fw_peek(self._prefixed(CHECK_KEY), UNBOUNDED, 1))
            return True
        except WrongTypeError:
            # The engine answered; the key is only another's.
            return True
        except Exception:
            return False

    async def _no_policy(self, key: str) -> None:
        """The sliding window counter is limits' own algorithm in a script of
        ours: no POLICY. A policy selected for its key is a configuration
        error, not a policy silently left out."""
        policy = await self._policy(key)
        if policy is not None:
            raise ConfigurationError(
                f"redis-cell: policy {policy!r} matches key {key!r} of the sliding window "
                "counter, which runs limits' own algorithm and takes no policy: use the "
                "fixed or the moving window for that limit, or a selector that leaves it out"
            )

    async def _acquire_sliding_window_entry(
        self, key: str, limit: int, expiry: int, amount: int = 1
    ) -> bool:
        await self._no_policy(key)
        args = ["acquire", expiry, limit, amount]
        return bool(await self._call(self._sliding, keys=self._sliding_keys(key), args=args))

    async def _get_sliding_window(self, key: str, expiry: int) -> tuple[int, float, int, float]:
        await self._no_policy(key)
        keys = self._sliding_keys(key)
        return _sliding(await self._call(self._sliding, keys=keys, args=["get", expiry]))

    def _sliding_keys(self, key: str) -> list[str]:
        return [
            self._prefixed(self._previous_window_key(key)),
            self._prefixed(self._current_window_key(key)),
        ]


class _CellSync(_Strategies):
    """The strategies for limits' sync Redis storages."""

    _call = staticmethod(call_now)
    key_prefix: str

    def prefixed_key(self, key: str) -> str:
        return f"{self.key_prefix}:{key}"

    def _prefixed(self, key: str) -> str:
        return self.prefixed_key(key)

    def initialize_storage(self, _uri: str) -> None:
        self._attach(Cell(self.get_connection(), self._engine_choice))  # type: ignore[attr-defined]
        # limits' reset script, which clears keys by prefix.
        super().initialize_storage(_uri)  # type: ignore[misc]

    def acquire_entry(self, key: str, limit: int, expiry: int, amount: int = 1) -> bool:
        return now(self._acquire_entry(key, limit, expiry, amount))

    def get_moving_window(self, key: str, limit: int, expiry: int) -> tuple[float, int]:
        return now(self._get_moving_window(key, limit, expiry))

    def incr(self, key: str, expiry: int, amount: int = 1) -> int:
        return now(self._incr(key, expiry, amount))

    def get(self, key: str) -> int:
        return now(self._get(key))

    def check(self) -> bool:
        """See ``_Strategies._check``."""
        return now(self._check())

    def acquire_sliding_window_entry(
        self, key: str, limit: int, expiry: int, amount: int = 1
    ) -> bool:
        return now(self._acquire_sliding_window_entry(key, limit, expiry, amount))

    def get_sliding_window(self, key: str, expiry: int) -> tuple[int, float, int, float]:
        return now(self._get_sliding_window(key, expiry))


class CellStorage(_CellSync, _RedisStorage):
    """``rediscell://``, ``rediscells://``, ``rediscell+unix://``: limits'
    ``RedisStorage`` options, plus ``engine``."""

    STORAGE_SCHEME = ["rediscell", "rediscells", "rediscell+unix"]


class CellClusterStorage(_CellSync, _RedisClusterStorage):
    """``rediscell+cluster://host:port[,host:port]``: limits' ``RedisClusterStorage``."""

    STORAGE_SCHEME = ["rediscell+cluster"]


class CellSentinelStorage(_CellSync, _RedisSentinelStorage):
    """``rediscell+sentinel://host:port[,...]/service``: limits' ``RedisSentinelStorage``."""

    STORAGE_SCHEME = ["rediscell+sentinel"]


class _CellAsync(_Strategies):
    """The strategies for limits' asyncio Redis storages (coredis, redis-py or
    valkey-py clients, as ``implementation`` says)."""

    _call = staticmethod(call_awaited)
    _SCHEME_PREFIX = "async+"
    bridge: Any

    def _prefixed(self, key: str) -> str:
        return cast(str, self.bridge.prefixed_key(key))

    def configure_bridge(self) -> None:
        super().configure_bridge()  # type: ignore[misc]
        self._attach(AsyncCell(self.bridge.get_connection(), self._engine_choice))

    # The shared coroutines are these storages' methods as they are.
    acquire_entry = _Strategies._acquire_entry
    get_moving_window = _Strategies._get_moving_window
    incr = _Strategies._incr
    get = _Strategies._get
    check = _Strategies._check
    acquire_sliding_window_entry = _Strategies._acquire_sliding_window_entry
    get_sliding_window = _Strategies._get_sliding_window


class AsyncCellStorage(_CellAsync, _AsyncRedisStorage):
    """``async+rediscell://`` (also ``async+rediscells://``, ``async+rediscell+unix://``)."""

    STORAGE_SCHEME = ["async+rediscell", "async+rediscells", "async+rediscell+unix"]


class AsyncCellClusterStorage(_CellAsync, _AsyncRedisClusterStorage):
    """``async+rediscell+cluster://host:port[,host:port]``."""

    STORAGE_SCHEME = ["async+rediscell+cluster"]


class AsyncCellSentinelStorage(_CellAsync, _AsyncRedisSentinelStorage):
    """``async+rediscell+sentinel://host:port[,...]/service``."""

    STORAGE_SCHEME = ["async+rediscell+sentinel"]
