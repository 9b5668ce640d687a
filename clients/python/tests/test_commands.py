"""Every helper, on both engines, sync and asyncio: typed replies equal to
what the command answers, typed errors with the server's text."""

from __future__ import annotations

import pytest

from redis_cell import (
    ArgumentError,
    AsyncCell,
    Cell,
    Decision,
    Engine,
    Fixed,
    Gcra,
    Lease,
    ModuleOnlyError,
    Sliding,
    ThrottleAllDecision,
    WrongTypeError,
)


def test_throttle_peek_refund(cell: Cell, key: str) -> None:
    # 30 per hour: a token every 120 s, so a slow machine changes nothing.
    assert cell.throttle(key, 15, 30, 3600) == Decision(False, 16, 15, -1, 120)
    assert cell.peek(key, 15, 30, 3600) == Decision(False, 16, 15, -1, 120)
    assert cell.throttle(key, 15, 30, 3600, quantity=15).remaining == 0
    refused = cell.throttle(key, 15, 30, 3600)
    assert refused.limited and 0 < refused.retry_after <= 120 and not refused.allowed
    assert cell.refund(key, 15, 30, 3600, 16).remaining == 16
    ms = cell.throttle(key, 15, 30, "1h", ms=True)
    assert ms.reset_after == 120_000


def test_reserve(cell: Cell, key: str) -> None:
    first = cell.reserve(key, 0, 1, 60, max_wait=120, ms=True)
    assert first == Decision(False, 1, 0, -1, 60_000)
    second = cell.reserve(key, 0, 1, 60, max_wait=120, ms=True)
    assert not second.limited and 0 < second.retry_after <= 60_000


def test_throttle_all(cell: Cell, key: str) -> None:
    pairs = [
        (f"{{{key}}}:s", Gcra(4, 5, 1)),
        (f"{{{key}}}:d", Fixed(2, 86400, align=True)),
        (f"{{{key}}}:w", Sliding(3, "1m")),
    ]
    first = cell.throttle_all(pairs)
    assert isinstance(first, ThrottleAllDecision)
    assert not first.limited
    cell.throttle_all(pairs)
    third = cell.throttle_all(pairs)
    assert third.limited and third.index == 2 and third.limit == 2
    assert cell.throttle_all(pairs, quantity=0, ms=True).limit in (2, 3, 5)


def test_sliding_window(cell: Cell, key: str) -> None:
    assert cell.sw_allow(key, 5, "1m", 5) == Decision(False, 5, 0, -1, 60)
    refused = cell.sw_allow(key, 5, 60)
    assert refused.limited and (refused.limit, refused.remaining) == (5, 0)
    assert 55 <= refused.retry_after <= 60 and refused.reset_after == refused.retry_after
    peek = cell.sw_peek(key, 5, 60)
    assert not peek.limited and peek.remaining == 0
    assert cell.sw_refund(key, 5, 60, 2).remaining == 2
    approx = key + ":a"
    assert cell.sw_allow(approx, 5, 60, approx=True).remaining == 4
    assert cell.sw_peek(approx, 5, 60, approx=True).remaining == 4
    assert cell.sw_refund(approx, 5, 60, 1, approx=True).remaining == 5


def test_fixed_window(cell: Cell, key: str) -> None:
    assert cell.fw_incr(key, 2, 60) == Decision(False, 2, 1, -1, 60)
    assert cell.fw_incr(key, 2, 60, quantity=2).limited
    assert cell.fw_peek(key, 2, 60).remaining == 1
    assert cell.fw_refund(key, 2, 60, 1).remaining == 2
    day = cell.fw_incr(key + ":d", 10, "day", tz="+09:00", ms=True)
    assert not day.limited and 0 < day.reset_after <= 86_400_000
    assert not cell.fw_incr(key + ":a", 3, 10, align=True).limited


def test_fixed_window_countall(cell: Cell, key: str) -> None:
    """Every hit counts, refused or not; the count is ``limit - remaining``."""
    assert cell.fw_incr(key, 2, 60, countall=True) == Decision(False, 2, 1, -1, 60)
    assert cell.fw_incr(key, 2, 60, quantity=2, countall=True) == Decision(True, 2, -1, 60, 60)
    assert cell.fw_incr(key, 2, 60, quantity=3, countall=True) == Decision(True, 2, -4, -1, 60)
    assert cell.client.get(key) == b"6"
    assert cell.fw_peek(key, 2, 60, countall=True).remaining == -4
    pairs = [(key + ":t", Fixed(1, 60, countall=True))]
    assert [cell.throttle_all(pairs).limited for _ in range(3)] == [False, True, True]
    assert cell.client.get(key + ":t") == b"3"


def test_leases(cell: Cell, key: str) -> None:
    lease = cell.acquire(key, 1, "30s")
    assert isinstance(lease, Lease) and lease.id and not lease.limited
    refused = cell.acquire(key, 1, 30)
    assert refused.limited and refused.id is None
    assert cell.cc_peek(key, 1).remaining == 0
    assert cell.renew(key, lease.id, 10) is True
    assert cell.release(key, lease.id) is True
    assert cell.release(key, lease.id) is False
    named = cell.acquire(key, 2, 30, id="worker-1", ms=True)
    assert named.id == "worker-1" and named.reset_after == 30_000


def test_errors_carry_the_server_text(cell: Cell, key: str) -> None:
    with pytest.raises(ArgumentError) as bad:
        cell.sw_allow(key, -5, 60)
    assert bad.value.message == "ERR invalid limit: must be 0 or greater"
    cell.client.set(key, "text")
    with pytest.raises(WrongTypeError) as wrong:
        cell.sw_allow(key, 5, 60)
    assert wrong.value.message.startswith("WRONGTYPE")


def test_operator_commands(cell: Cell, key: str) -> None:
    name = "p-" + key.split(":")[1][:20]
    if cell.engine is not Engine.MODULE:
        for call in (
            lambda: cell.limit(key, name),
            lambda: cell.policy_list(),
            lambda: cell.top(),
            lambda: cell.throttle(key, 1, 1, 1, shadow=True),
            lambda: cell.fw_incr(key, 1, 1, policy=name),
            lambda: cell.sw_peek(key, 1, 1, policy=name),
            lambda: cell.policy_promote(name),
        ):
            with pytest.raises(ModuleOnlyError):
                call()
        return
    cell.policy_set(name, Gcra(0, 1, 60))
    assert name in cell.policy_list()
    assert not cell.limit(key, name).limited
    assert cell.limit(key, name).limited
    assert cell.limit(key, name, shadow=True) == Decision(False, 1, 0, -1, 60)
    info = cell.policy_get(name)
    assert (info.limiter, info.calls, info.refused, info.shadow_refused) == ("GCRA 0 1 60", 3, 1, 1)
    top = {e.key: e for e in cell.top(count=1000, policy=name)}
    assert top[key].count == 2 and top[key].shadow == 1
    assert cell.policy_del(name) is True
    assert cell.policy_del(name) is False
    with pytest.raises(ArgumentError, match="unknown policy"):
        cell.policy_get(name)
    # POLICY on a limiter command: the app's numbers while there is no such
    # policy, the policy's once it exists; a trial, then promoted.
    fixed = key + ":f"
    assert cell.fw_incr(fixed, 5, 60, policy=name, countall=True).limit == 5
    cell.policy_set(name, Fixed(1, 60), trial=Fixed(3, 60))
    assert cell.fw_incr(fixed, 5, 60, policy=name, countall=True) == Decision(True, 1, -1, 60, 60)
    assert cell.fw_peek(fixed, 5, 60, policy=name, countall=True).remaining == -1
    assert cell.policy_get(name).limiter == "FW 1 60"
    cell.policy_promote(name)
    assert cell.policy_get(name).limiter == "FW 3 60"
    assert cell.fw_incr(fixed, 5, 60, policy=name, countall=True) == Decision(False, 3, 0, -1, 60)
    assert cell.throttle(key + ":g", 0, 1, 60, policy=name + "x").limit == 1
    assert cell.policy_del(name) is True
    # A policy keeps its kind: a sliding one under a name of its own.
    sliding = name + "-s"
    cell.policy_set(sliding, Sliding(1, 60), trial=Sliding(1, 30))
    window = key + ":s"
    assert [cell.sw_allow(window, 9, 60, policy=sliding).limited for _ in range(2)] == [
        False,
        True,
    ]
    assert cell.sw_peek(window, 9, 60, policy=sliding).limit == 1
    assert [e.key for e in cell.top(policy=sliding, trial=True)] == [window]
    assert cell.policy_del(sliding) is True


async def test_async_helpers(acell: AsyncCell, key: str) -> None:
    assert await acell.throttle(key, 15, 30, 3600) == Decision(False, 16, 15, -1, 120)
    assert (await acell.peek(key, 15, 30, 3600)).remaining == 15
    assert (await acell.refund(key, 15, 30, 3600, 1)).remaining == 16
    assert not (await acell.reserve(key + ":r", 0, 10, 1, max_wait=1)).limited
    pair = await acell.throttle_all(
        [(f"{{{key}}}:a", Gcra(1, 1, 1)), (f"{{{key}}}:b", Sliding(1, 60))]
    )
    assert pair.index in (1, 2)
    assert (await acell.sw_allow(key + ":w", 2, 60)).remaining == 1
    assert (await acell.sw_peek(key + ":w", 2, 60)).remaining == 1
    assert (await acell.sw_refund(key + ":w", 2, 60, 1)).remaining == 2
    assert (await acell.fw_incr(key + ":f", 2, 60)).remaining == 1
    assert (await acell.fw_peek(key + ":f", 2, 60)).remaining == 1
    assert (await acell.fw_refund(key + ":f", 2, 60, 1)).remaining == 2
    lease = await acell.acquire(key + ":c", 1, 30)
    assert lease.id is not None
    assert await acell.renew(key + ":c", lease.id, 30)
    assert (await acell.cc_peek(key + ":c", 1)).remaining == 0
    assert await acell.release(key + ":c", lease.id)
    with pytest.raises(ArgumentError):
        await acell.fw_incr(key, -1, 60)
