"""Every public command as a description of one call: its name, keys,
arguments and how to read its reply. The sync and asyncio clients send the
same descriptions; only the engine (see ``_engine``) decides how."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from ._types import (
    Decision,
    Duration,
    Gcra,
    Lease,
    Limiter,
    PolicyInfo,
    ThrottleAllDecision,
    TopEntry,
    duration,
)

T = TypeVar("T")

#: Keyless operator commands go to every primary of a cluster (policies are
#: per node), or to the one node of a plain client.
ALL_PRIMARIES = "all-primaries"


@dataclass(frozen=True)
class Call(Generic[T]):
    name: str
    keys: Sequence[str]
    args: Sequence[str | int]
    parse: Callable[[Any], T]
    # The twin has no such function (policies, CL.TOP, SHADOW).
    module_only: bool = False
    # CL.THROTTLEALL: the module takes numkeys before the keys.
    numkeys: bool = False
    fanout: str | None = None
    # How the replies of every primary combine into one (with ``fanout``).
    merge: Callable[[list[Any]], Any] = field(default=lambda replies: replies[0])


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def decision(reply: Any) -> Decision:
    limited, limit, remaining, retry_after, reset_after = (int(x) for x in reply[:5])
    return Decision(bool(limited), limit, remaining, retry_after, reset_after)


def throttle_all_decision(reply: Any) -> ThrottleAllDecision:
    d = decision(reply)
    return ThrottleAllDecision(
        d.limited, d.limit, d.remaining, d.retry_after, d.reset_after, int(reply[5])
    )


def lease(reply: Any) -> Lease:
    d = decision(reply)
    lease_id = None if reply[5] is None else _text(reply[5])
    return Lease(d.limited, d.limit, d.remaining, d.retry_after, d.reset_after, lease_id)


def _flags(
    ms: bool, shadow: bool = False, countall: bool = False, policy: str | None = None
) -> list[str | int]:
    out: list[str | int] = []
    if ms:
        out.append("MS")
    if shadow:
        out.append("SHADOW")
    if countall:
        out.append("COUNTALL")
    if policy is not None:
        out += ["POLICY", policy]
    return out


def _module_only(shadow: bool, policy: str | None) -> bool:
    """SHADOW and POLICY are the module's: the twin has neither."""
    return shadow or policy is not None


def throttle(
    key: str,
    max_burst: int,
    count: int,
    period: Duration,
    quantity: int = 1,
    ms: bool = False,
    shadow: bool = False,
    policy: str | None = None,
) -> Call[Decision]:
    """CL.THROTTLE: GCRA, ``count`` per ``period`` with bursts of ``max_burst + 1``;
    with ``policy``, that policy's limiter when it exists (module only)."""
    args = [max_burst, count, duration(period), quantity, *_flags(ms, shadow, policy=policy)]
    return Call("CL.THROTTLE", [key], args, decision, module_only=_module_only(shadow, policy))


def peek(
    key: str,
    max_burst: int,
    count: int,
    period: Duration,
    ms: bool = False,
    policy: str | None = None,
) -> Call[Decision]:
    """CL.PEEK: what CL.THROTTLE would answer with quantity 0, writing nothing."""
    args = [max_burst, count, duration(period), *_flags(ms, policy=policy)]
    return Call("CL.PEEK", [key], args, decision, module_only=_module_only(False, policy))


def reserve(
    key: str,
    max_burst: int,
    count: int,
    period: Duration,
    max_wait: Duration,
    quantity: int = 1,
    ms: bool = False,
) -> Call[Decision]:
    """CL.RESERVE: a slot now or within ``max_wait`` (``retry_after`` is then the wait)."""
    args: list[str | int] = [
        max_burst,
        count,
        duration(period),
        quantity,
        "MAXWAIT",
        duration(max_wait),
    ]
    return Call("CL.RESERVE", [key], [*args, *_flags(ms)], decision)


def refund(
    key: str, max_burst: int, count: int, period: Duration, quantity: int, ms: bool = False
) -> Call[Decision]:
    """CL.REFUND: gives ``quantity`` back to a GCRA bucket."""
    args = [max_burst, count, duration(period), quantity, *_flags(ms)]
    return Call("CL.REFUND", [key], args, decision)


def throttle_all(
    limiters: Sequence[tuple[str, Limiter]],
    quantity: int = 1,
    ms: bool = False,
    shadow: bool = False,
) -> Call[ThrottleAllDecision]:
    """CL.THROTTLEALL: several ``(key, limiter)`` pairs, all or nothing."""
    words: list[str | int] = []
    module_only = shadow
    for _key, limiter in limiters:
        words += limiter.words()
        module_only = module_only or limiter.words()[0] == "POLICY"
    if quantity != 1:
        words += ["QUANTITY", quantity]
    return Call(
        "CL.THROTTLEALL",
        [key for key, _ in limiters],
        [*words, *_flags(ms, shadow)],
        throttle_all_decision,
        module_only=module_only,
        numkeys=True,
    )


def sw_allow(
    key: str,
    limit: int,
    window: Duration,
    quantity: int = 1,
    approx: bool = False,
    ms: bool = False,
    shadow: bool = False,
    policy: str | None = None,
) -> Call[Decision]:
    """SW.ALLOW: the exact sliding window (or, ``approx=True``, the sliding counter)."""
    args: list[str | int] = [limit, duration(window), quantity]
    if approx:
        args.append("APPROX")
    args += _flags(ms, shadow, policy=policy)
    return Call("SW.ALLOW", [key], args, decision, module_only=_module_only(shadow, policy))


def sw_peek(
    key: str,
    limit: int,
    window: Duration,
    approx: bool = False,
    ms: bool = False,
    policy: str | None = None,
) -> Call[Decision]:
    """SW.PEEK: what SW.ALLOW would answer with quantity 0, writing nothing."""
    args: list[str | int] = [limit, duration(window)]
    if approx:
        args.append("APPROX")
    args += _flags(ms, policy=policy)
    return Call("SW.PEEK", [key], args, decision, module_only=_module_only(False, policy))


def sw_refund(
    key: str,
    limit: int,
    window: Duration,
    quantity: int,
    approx: bool = False,
    ms: bool = False,
) -> Call[Decision]:
    """SW.REFUND: gives ``quantity`` back, newest requests first."""
    args: list[str | int] = [limit, duration(window), quantity]
    if approx:
        args.append("APPROX")
    return Call("SW.REFUND", [key], [*args, *_flags(ms)], decision)


def _window(window: Duration, align: bool, tz: str | None) -> list[str | int]:
    out: list[str | int] = [duration(window)]
    if align:
        out.append("ALIGN")
    if tz is not None:
        out += ["TZ", tz]
    return out


def fw_incr(
    key: str,
    limit: int,
    window: Duration,
    quantity: int = 1,
    align: bool = False,
    tz: str | None = None,
    ms: bool = False,
    shadow: bool = False,
    countall: bool = False,
    policy: str | None = None,
) -> Call[Decision]:
    """FW.INCR: the fixed window counter; ``window`` a duration or a calendar unit.
    ``countall``: every hit counts, refused or not, as ``INCRBY`` counts it
    (``remaining`` is then negative when over, ``limit - remaining`` the count)."""
    flags = _flags(ms, shadow, countall, policy)
    args = [limit, *_window(window, align, tz), quantity, *flags]
    return Call("FW.INCR", [key], args, decision, module_only=_module_only(shadow, policy))


def fw_peek(
    key: str,
    limit: int,
    window: Duration,
    align: bool = False,
    tz: str | None = None,
    ms: bool = False,
    countall: bool = False,
    policy: str | None = None,
) -> Call[Decision]:
    """FW.PEEK: what FW.INCR would answer with quantity 0, writing nothing."""
    args = [limit, *_window(window, align, tz), *_flags(ms, countall=countall, policy=policy)]
    return Call("FW.PEEK", [key], args, decision, module_only=_module_only(False, policy))


def fw_refund(
    key: str,
    limit: int,
    window: Duration,
    quantity: int,
    align: bool = False,
    tz: str | None = None,
    ms: bool = False,
) -> Call[Decision]:
    """FW.REFUND: gives ``quantity`` back to the counter, keeping its window's end."""
    args = [limit, duration(window), quantity, *_window(window, align, tz)[1:], *_flags(ms)]
    return Call("FW.REFUND", [key], args, decision)


def acquire(
    key: str, limit: int, lease_time: Duration, id: str | None = None, ms: bool = False
) -> Call[Lease]:
    """CC.ACQUIRE: one of ``limit`` concurrent leases (or renews the one ``id`` holds)."""
    args: list[str | int] = [limit, duration(lease_time)]
    if id is not None:
        args += ["ID", id]
    return Call("CC.ACQUIRE", [key], [*args, *_flags(ms)], lease)


def release(key: str, id: str) -> Call[bool]:
    """CC.RELEASE: True if ``id`` held a lease."""
    return Call("CC.RELEASE", [key], [id], lambda r: bool(int(r)))


def renew(key: str, id: str, lease_time: Duration) -> Call[bool]:
    """CC.RENEW: True if ``id`` held a lease, now extended to ``lease_time`` from now."""
    return Call("CC.RENEW", [key], [id, duration(lease_time)], lambda r: bool(int(r)))


def cc_peek(key: str, limit: int, ms: bool = False) -> Call[Decision]:
    """CC.PEEK: the leases held now, writing nothing."""
    return Call("CC.PEEK", [key], [limit, *_flags(ms)], decision)


def limit(
    key: str, policy: str, quantity: int = 1, ms: bool = False, shadow: bool = False
) -> Call[Decision]:
    """CL.LIMIT: the named policy's limiter applied to ``key`` (module only)."""
    args = [policy, quantity, *_flags(ms, shadow)]
    return Call("CL.LIMIT", [key], args, decision, module_only=True)


def policy_set(
    name: str, limiter: Gcra | Limiter, shadow: bool = False, trial: Limiter | None = None
) -> Call[None]:
    """CL.POLICY SET: creates or replaces a policy (on every primary of a cluster);
    ``trial``, a limiter of the same kind run in shadow beside it."""
    args: list[str | int] = ["SET", name, *limiter.words()]
    if shadow:
        args.append("SHADOW")
    if trial is not None:
        args += ["TRIAL", *trial.words()]
    return Call("CL.POLICY", [], args, lambda _r: None, module_only=True, fanout=ALL_PRIMARIES)


def policy_promote(name: str) -> Call[None]:
    """CL.POLICY PROMOTE: the policy's trial becomes its limiter (on every primary)."""
    return Call(
        "CL.POLICY",
        [],
        ["PROMOTE", name],
        lambda _r: None,
        module_only=True,
        fanout=ALL_PRIMARIES,
    )


def _policy_info(reply: Any) -> PolicyInfo:
    fields = {_text(reply[i]): reply[i + 1] for i in range(0, len(reply), 2)}
    return PolicyInfo(
        limiter=_text(fields["limiter"]),
        shadow=bool(int(fields["shadow"])),
        calls=int(fields["calls"]),
        allowed=int(fields["allowed"]),
        refused=int(fields["refused"]),
        shadow_refused=int(fields["shadow_refused"]),
        errors=int(fields["errors"]),
    )


def policy_get(name: str) -> Call[PolicyInfo]:
    """CL.POLICY GET: the policy (``ArgumentError`` "unknown policy" if there is none)."""
    return Call("CL.POLICY", [], ["GET", name], _policy_info, module_only=True)


def policy_del(name: str) -> Call[bool]:
    """CL.POLICY DEL: True if there was such a policy (on every primary of a cluster)."""
    return Call(
        "CL.POLICY",
        [],
        ["DEL", name],
        lambda r: bool(int(r)),
        module_only=True,
        fanout=ALL_PRIMARIES,
        merge=lambda replies: max(int(r) for r in replies),
    )


def policy_list() -> Call[list[str]]:
    """CL.POLICY LIST: the policies' names, sorted bytewise."""
    return Call("CL.POLICY", [], ["LIST"], lambda r: [_text(x) for x in r], module_only=True)


def top(
    count: int | None = None, policy: str | None = None, reset: bool = False, trial: bool = False
) -> Call[list[TopEntry]]:
    """CL.TOP: the keys refused most often, most first; with ``policy`` and
    ``trial``, those the policy's trial would have refused."""
    args: list[str | int] = []
    if count is not None:
        args += ["COUNT", count]
    if policy is not None:
        args += ["POLICY", policy]
    if reset:
        args.append("RESET")
    if trial:
        args.append("TRIAL")

    def parse(reply: Any) -> list[TopEntry]:
        return [TopEntry(_text(k), int(c), int(e), int(s)) for k, c, e, s in reply]

    return Call("CL.TOP", [], args, parse, module_only=True)
