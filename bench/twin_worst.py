#!/usr/bin/env python3
"""The Functions twin's worst single calls on large states, server-side.

Starts a server through the test kit (bench/testkit.py; real clock, no
persistence, no module), loads the twin (FUNCTION LOAD; the EVAL script
on Redis 6.2), logs every call (slowlog-log-slower-than 0) and, for each
size N, writes the twin's own state of that size in one SET (the layout
of functions/src/lease.lua and functions/src/sliding.lua) and times, from
SLOWLOG (µs):

- cc_acquire with limit N: taking a lease on N - 1 held, refused on N
  held (and with the limit lowered to N/2), renewing one by its ID;
  cc_release and cc_renew of one of N, cc_peek;
- sw_allow with limit N: allowed on a log of N - 1 requests, limited on
  N; sw_peek, sw_refund; and with limit 100 on a log of N (an older
  library's log), as cc_release on N leases.

A call the twin refuses (a limit or a state above its caps) shows
"refused" and the time refusing took. Each call runs
`--rounds` times on a fresh copy of the state: the median and the worst
are printed (this machine is shared: the worst includes the host's pauses),
and the median CPU time the server's main thread ran meanwhile (Linux
schedstat), which other processes on the machine do not inflate.

    python3 bench/twin_worst.py                          # Redis 7.0, N = 1k, 10k, 100k, 1M
    python3 bench/twin_worst.py --server valkey-9.1 --sizes 1000 10000
    python3 bench/twin_worst.py --functions /tmp/old   # another build of the library

Needs redis-py (scripts/deps installs it in target/deps/python).
"""

import argparse
import os
import statistics
import struct
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "target" / "deps" / "python"))
sys.path.insert(0, str(ROOT / "bench"))

import redis  # noqa: E402
import run  # noqa: E402

HOUR_NS = 3_600 * 10**9


class Server(run.Server):
    def __init__(self, binary: str, library: Path):
        super().__init__(binary=binary, timeout=600)
        self.version = self.info["redis_version"]
        self.r.config_set("slowlog-log-slower-than", 0)
        self.r.config_set("slowlog-max-len", 1024)
        if int(self.version.split(".")[0]) >= 7:
            self.r.execute_command("FUNCTION", "LOAD", "REPLACE",
                                   (library / "redis_cell.lua").read_bytes())
            self.sha = None
        else:
            self.sha = self.r.script_load((library / "redis_cell_eval.lua").read_bytes())

    def call(self, name, key, *args):
        if self.sha is None:
            return self.r.execute_command("FCALL", name.replace(".", "_"), 1, key, *args)
        return self.r.execute_command("EVALSHA", self.sha, 1, key, name, *args)


def lease_id(i: int, length: int = 32) -> bytes:
    return (b"lease-%026d" % i).ljust(length, b"x")


def lease_state(n: int, expiry_ns: int, id_length: int = 32) -> bytes:
    """The twin's lease string (lease.lua): tag, id generator, entries."""
    s, ns = divmod(expiry_ns, 10**9)
    parts = [b"\0CCL", struct.pack(">dd", 0, 0)]
    for i in range(n):
        lid = lease_id(i, id_length)
        parts.append(s.to_bytes(5, "big") + ns.to_bytes(4, "big") + len(lid).to_bytes(2, "big") + lid)
    return b"".join(parts)


def log_state(n: int, now_ns: int) -> bytes:
    """The twin's exact log (sliding.lua): tag, base, one entry a request
    (quantity 1), spread over the half hour before now."""
    parts = [b"\0SWE", (0).to_bytes(7, "big")]
    start = now_ns - HOUR_NS // 2
    step = (HOUR_NS // 2) // max(n, 1)
    for i in range(n):
        s, ns = divmod(start + i * step, 10**9)
        parts.append(s.to_bytes(5, "big") + ns.to_bytes(4, "big") + (i + 1).to_bytes(7, "big"))
    return b"".join(parts)


def cpu_ns(pid: int) -> int:
    """The time the server's main thread has run on a CPU (ns)."""
    with open(f"/proc/{pid}/task/{pid}/schedstat") as f:
        return int(f.read().split()[0])


def timed(srv, name, key, *args):
    """One call's server-side time (µs) from SLOWLOG, the CPU time (µs)
    the server's main thread spent meanwhile, and its reply."""
    srv.r.slowlog_reset()
    start = cpu_ns(srv.pid)
    try:
        reply = srv.call(name, key, *args)
    except redis.ResponseError as e:
        reply = e
    cpu = (cpu_ns(srv.pid) - start) // 1000
    for entry in srv.r.slowlog_get(16):
        words = entry["command"].split()
        if words and words[0].lower() in (b"fcall", b"evalsha"):
            return entry["duration"], cpu, reply
    raise RuntimeError(f"{name} not in SLOWLOG")


def measure(srv, n: int, rounds: int) -> dict:
    """Each call at the limit n: on n - 1 held leases or logged requests
    where it takes one, on n where it is refused or reads."""
    r = srv.r
    row = {}
    now = time.time_ns()
    full, short = lease_state(n, now + HOUR_NS), lease_state(n - 1, now + HOUR_NS)
    log, log_short = log_state(n, now), log_state(n - 1, now)

    def worst(label, state, name, *args):
        times, cpus, reply = [], [], None
        for _ in range(rounds):
            r.set("k", state, px=HOUR_NS // 10**6)
            t, cpu, reply = timed(srv, name, "k", *args)
            times.append(t)
            cpus.append(cpu)
        row[label] = (statistics.median(times), max(times),
                      str(reply) if isinstance(reply, redis.ResponseError) else None,
                      statistics.median(cpus))

    worst("cc_acquire, taken", short, "cc.acquire", n, 3600)
    worst("cc_acquire, refused", full, "cc.acquire", n, 3600)
    worst("cc_acquire, refused (limit lowered to n/2)", full, "cc.acquire", n // 2, 3600)
    worst("cc_acquire, own ID", full, "cc.acquire", n, 3600, "ID", lease_id(n // 2))
    worst("cc_release", full, "cc.release", lease_id(n // 2))
    if n <= 10_000:  # the longest ids the twin takes (lease.MAX_ID)
        worst("cc_release, ids of 128 bytes", lease_state(n, now + HOUR_NS, 128), "cc.release",
              lease_id(n // 2, 128))
    else:
        row["cc_release, ids of 128 bytes"] = None
    worst("cc_renew", full, "cc.renew", lease_id(n // 2), 3600)
    worst("cc_peek", full, "cc.peek", n)
    worst("sw_allow, allowed", log_short, "sw.allow", n, "1h")
    worst("sw_allow, limited", log, "sw.allow", n, "1h")
    worst("sw_peek", log, "sw.peek", n, "1h")
    worst("sw_refund", log, "sw.refund", n, "1h", n // 2)
    worst("sw_allow on a log of n (limit 100)", log, "sw.allow", 100, "1h")
    worst("cc_release on n leases", full, "cc.release", lease_id(n // 2))
    r.flushall()
    return row


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--server", default="redis-7.0", help="a server of scripts/servers, or a path")
    p.add_argument("--sizes", type=int, nargs="+", default=[1_000, 10_000, 100_000, 1_000_000])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--functions", type=Path, default=ROOT / "functions",
                   help="the folder of redis_cell.lua and redis_cell_eval.lua (e.g. an older build)")
    args = p.parse_args()
    srv = Server(run.resolve_server(args.server), args.functions)
    try:
        rows = {n: measure(srv, n, args.rounds) for n in args.sizes}
    finally:
        srv.stop()
    def cell(t):
        if t is None:
            return "not measured"
        if t[2] is None:
            return f"{t[0]:,.0f} ({t[1]:,}) {t[3]:,.0f}"
        # A refusal: its error's first words and what refusing took.
        return f"refused: {t[0]:,.0f} ({t[1]:,}) {t[3]:,.0f} `{' '.join(t[2].split()[:4])}...`"
    print(f"The twin's single calls, server-side µs: SLOWLOG median (worst) of {args.rounds}, then the "
          f"median CPU time of the server's main thread (/proc schedstat) across the call; "
          f"{'FCALL' if srv.sha is None else 'EVALSHA'} on {args.server} {srv.version}, "
          f"load average {os.getloadavg()[0]:.1f}\n")
    print("| call | " + " | ".join(f"n = {n:,}" for n in args.sizes) + " |")
    print("|---|" + "---:|" * len(args.sizes))
    for name in next(iter(rows.values())):
        print(f"| {name} | " + " | ".join(cell(rows[n][name]) for n in args.sizes) + " |")
    worst = max((t[1], name, n) for n, row in rows.items() for name, t in row.items() if t)
    print(f"\nThe worst call of all: {worst[0]:,} µs ({worst[1]}, n = {worst[2]:,})")

if __name__ == "__main__":
    main()
