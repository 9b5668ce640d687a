"""Where calendar periods end in named time zones, by Python's zoneinfo.

The oracle for core/tests/zones.rs. For each zone, it picks instants
around every change of offset in a list of years (and random instants from
1677 to 2262), and prints one line per instant and unit:

    zone unit second end_second

`end_second` is the end of the period containing `second`, found with
zoneinfo's own local-time mapping (fold and bisection), not by walking
transitions as the Rust code does:

- day, week, month, year: the first instant after `second` at which the
  local clock reads the next period's first day, 00:00, or later;
- minute, hour: the next local minute or hour at the offset in force at
  `second`, or the next change of offset if that comes first.

Every boundary is a whole second (offsets and changes are), so the end of
the period containing a nanosecond instant is that of its whole second.
"""

import random
import sys
from datetime import date, datetime, time, timedelta
from zoneinfo import ZoneInfo

ZONES = sys.argv[1].split(",")
UNITS = ["minute", "hour", "day", "week", "month", "year"]
YEARS = [1892, 1911, 1942, 1944, 1970, 1987, 1996, 2007, 2010, 2011, 2012,
         2024, 2025, 2026, 2027, 2038, 2100, 2261]
# i64 nanoseconds reach from 1677-09-21 to 2262-04-11.
FIRST, LAST = -9_223_372_036, 9_223_372_035


def offset(z, s):
    return int(datetime.fromtimestamp(s, z).utcoffset().total_seconds())


def local(z, s):
    return datetime.fromtimestamp(s, z).replace(tzinfo=None)


def first_second(lo, hi, pred):
    """The first second in (lo, hi] for which pred holds (pred(hi) does)."""
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if pred(mid):
            hi = mid
        else:
            lo = mid
    return hi


def end_small(z, s, step):
    off = offset(z, s)
    end = ((s + off) // step + 1) * step - off
    if offset(z, end - 1) == off:
        return end
    return first_second(s, end - 1, lambda t: offset(z, t) != off)


def next_first_day(d, unit):
    if unit == "day":
        return d + timedelta(days=1)
    if unit == "week":
        return d - timedelta(days=d.weekday()) + timedelta(days=7)
    if unit == "month":
        return date(d.year + (d.month == 12), d.month % 12 + 1, 1)
    return date(d.year + 1, 1, 1)


def end_big(z, s, unit):
    target = datetime.combine(next_first_day(local(z, s).date(), unit), time())
    readings = []
    for fold in (0, 1):
        t = int(target.replace(tzinfo=z, fold=fold).timestamp())
        readings.append(t)
    exact = [t for t in readings if local(z, t) == target and t > s]
    if exact:
        return min(exact)
    # The target is skipped: the clock jumps over it, between the instant
    # it maps to at the offset after the jump and the one before.
    lo, hi = min(readings), max(readings)
    return first_second(max(lo, s), hi, lambda t: local(z, t) >= target)


def end(z, s, unit):
    if unit == "minute":
        return end_small(z, s, 60)
    if unit == "hour":
        return end_small(z, s, 3600)
    return end_big(z, s, unit)


def changes(z, year):
    """The changes of offset in a year, found by sampling every 2 hours."""
    start = int(datetime(year, 1, 1).timestamp()) - 86_400
    stop = int(datetime(year + 1, 1, 1).timestamp()) + 86_400
    start, stop = max(start, FIRST), min(stop, LAST)
    found = []
    prev = offset(z, start)
    t = start
    while t + 7200 <= stop:
        cur = offset(z, t + 7200)
        if cur != prev:
            found.append(first_second(t, t + 7200, lambda u: offset(z, u) != prev))
        prev, t = cur, t + 7200
    return found


def main():
    rng = random.Random(20261130)
    out = sys.stdout
    for name in ZONES:
        z = ZoneInfo(name)
        instants = set()
        for year in YEARS:
            for change in changes(z, year):
                for k in range(-53, 54):
                    instants.add(change + k * 1800)
                instants.update([change - 1, change + 1])
        instants.update(rng.randint(FIRST, LAST) for _ in range(300))
        instants = {s for s in instants if FIRST <= s <= LAST}
        for unit in UNITS:
            # Each end found, and the second before it, are instants too:
            # the last of one window and the first of the next.
            ends = {s: end(z, s, unit) for s in sorted(instants)}
            for e in set(ends.values()):
                for t in (e - 1, e):
                    if FIRST <= t <= LAST and t not in ends:
                        ends[t] = end(z, t, unit)
            for s in sorted(ends):
                out.write(f"{name} {unit} {s} {ends[s]}\n")
    out.flush()


main()
