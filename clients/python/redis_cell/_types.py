"""Typed replies and limiter descriptions."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeAlias

__all__ = [
    "Decision",
    "Duration",
    "Fixed",
    "Gcra",
    "Lease",
    "Limiter",
    "Policy",
    "PolicyInfo",
    "Sliding",
    "ThrottleAllDecision",
    "TopEntry",
]

#: A duration as the commands read it: seconds (``60``, ``0.5``) or a number
#: with a unit (``"500ms"``, ``"15m"``, ``"1h"``, ``"1d"``).
Duration: TypeAlias = int | float | str


@dataclass(frozen=True)
class Decision:
    """The five integers every limiter answers.

    ``retry_after`` and ``reset_after`` are seconds, or milliseconds for a
    call made with ``ms=True``; ``retry_after`` is -1 when allowed (or when
    the request can never fit).
    """

    limited: bool
    limit: int
    remaining: int
    retry_after: int
    reset_after: int

    @property
    def allowed(self) -> bool:
        return not self.limited


@dataclass(frozen=True)
class ThrottleAllDecision(Decision):
    """CL.THROTTLEALL's answer: the binding limiter's decision and its 1-based index."""

    index: int


@dataclass(frozen=True)
class Lease(Decision):
    """CC.ACQUIRE's answer: the lease id, or None when refused."""

    id: str | None


@dataclass(frozen=True)
class TopEntry:
    """One key of CL.TOP: refused at most ``count`` and at least ``count - error`` times."""

    key: str
    count: int
    error: int
    shadow: int


@dataclass(frozen=True)
class PolicyInfo:
    """CL.POLICY GET: the limiter's words, the shadow flag and the counters."""

    limiter: str
    shadow: bool
    calls: int
    allowed: int
    refused: int
    shadow_refused: int
    errors: int


def duration(value: Duration) -> str:
    """Writes a duration as the grammar reads it (floats with up to 9 decimals)."""
    if isinstance(value, bool):
        raise TypeError("a duration is a number of seconds or a string such as '15m'")
    if isinstance(value, float):
        text = f"{value:.9f}".rstrip("0").rstrip(".")
        return text or "0"
    return str(value)


@dataclass(frozen=True)
class Gcra:
    """A GCRA limiter (CL.THROTTLE's parameters)."""

    max_burst: int
    count: int
    period: Duration

    def words(self) -> list[str]:
        return ["GCRA", str(self.max_burst), str(self.count), duration(self.period)]


@dataclass(frozen=True)
class Sliding:
    """A sliding window limiter (SW.ALLOW's parameters)."""

    limit: int
    window: Duration
    approx: bool = False

    def words(self) -> list[str]:
        w = ["SW", str(self.limit), duration(self.window)]
        return [*w, "APPROX"] if self.approx else w


@dataclass(frozen=True)
class Fixed:
    """A fixed window limiter (FW.INCR's parameters): a duration or a calendar
    unit; ``countall``, every hit counted, refused or not (as ``INCRBY``)."""

    limit: int
    window: Duration
    align: bool = False
    tz: str | None = None
    countall: bool = False

    def words(self) -> list[str]:
        w = ["FW", str(self.limit), duration(self.window)]
        if self.align:
            w.append("ALIGN")
        if self.tz is not None:
            w += ["TZ", self.tz]
        if self.countall:
            w.append("COUNTALL")
        return w


@dataclass(frozen=True)
class Policy:
    """A named policy (module only), in CL.THROTTLEALL."""

    name: str

    def words(self) -> list[str]:
        return ["POLICY", self.name]


Limiter: TypeAlias = Gcra | Sliding | Fixed | Policy
