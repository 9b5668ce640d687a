#!/usr/bin/env python3
"""The worst single calls on large inputs, measured server-side (SLOWLOG).

Starts a server with redis-cell through the test kit (bench/testkit.py;
real clock, no persistence), logs every call (slowlog-log-slower-than 0),
and for each size N reports the server-side time (µs) of:

- CC.LOAD of a lease set of N leases, RESTORE of its DUMP, and DEBUG RELOAD
  with that one key in the database (save and load);
- CC.ACQUIRE and CC.PEEK on that key (a single call on N leases held);
- CL.THROTTLEALL with N keys and mixed limiters (GCRA, SW, SW APPROX, FW in
  turn): refused at once above 100 keys; and, at 10 and 100 keys, on absent
  keys (every key written) and again on the keys it wrote;
- MSET of N keys and DEL of them, as built-in references of the same size.

Each call runs `--rounds` times (default 5): the median and the worst are
reported (this machine is shared: the worst of a few includes pauses of the
host, the median is the call's own cost).

    python3 bench/worst_cases.py                                  # Redis 7.0, N = 10k, 40k, 160k
    python3 bench/worst_cases.py --server redis-8.2 --sizes 10000 40000
    python3 bench/worst_cases.py --module /path/to/libredis_cell.so

Needs redis-py (scripts/deps installs it in target/deps/python).
"""

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "target" / "deps" / "python"))

import redis  # noqa: E402
import run  # noqa: E402
import testkit  # noqa: E402


class Server(run.Server):
    def __init__(self, binary: str, module: Path):
        # The server maps its own copy: a rebuild during the run cannot
        # change the module under it.
        self.copies = tempfile.TemporaryDirectory(prefix="redis-cell-worst-")
        copy = Path(self.copies.name) / "libredis_cell.so"
        shutil.copy(module, copy)
        # DEBUG is refused from 7.0 on unless the start enables it; 6.2 has
        # no such setting.
        probe = run.Server(binary=binary)
        probe.stop()
        _, self.version = testkit.version(probe.info)
        debug = [] if self.version.startswith("6.") else [("enable-debug-command", "local")]
        super().__init__(copy, binary=binary, config=debug, timeout=600)
        self.r.config_set("slowlog-log-slower-than", 0)
        self.r.config_set("slowlog-max-len", 1024)

    def stop(self):
        super().stop()
        self.copies.cleanup()


def lease_payload(n: int, expires_at_ns: int) -> bytes:
    """What `CC.LOAD` takes: version 1, the count, then each lease's id
    (length and bytes) and expiry (core/src/lease.rs)."""
    parts = [b"\x01", run.varint(n)]
    for i in range(n):
        lease_id = b"lease-%032d" % i
        parts += [run.varint(len(lease_id)), lease_id, run.varint(expires_at_ns)]
    return b"".join(parts)


def timed(r, *words) -> int:
    """Runs one command; its server-side duration (µs) from SLOWLOG."""
    r.slowlog_reset()
    r.execute_command(*words)
    name = str(words[0]).lower().encode()
    for entry in r.slowlog_get(16):
        cmd = entry["command"]
        first = cmd.split()[0].lower() if isinstance(cmd, bytes) and cmd else b""
        if first == name or (name == b"debug" and first == b"debug"):
            return entry["duration"]
    raise RuntimeError(f"{words[0]} not in SLOWLOG")


def error_time(r, name) -> int:
    """The duration of the call just refused (SLOWLOG logs refusals too)."""
    for entry in r.slowlog_get(16):
        cmd = entry["command"]
        if isinstance(cmd, bytes) and cmd.split()[0].lower() == str(name).lower().encode():
            return entry["duration"]
    raise RuntimeError(f"{name} not in SLOWLOG")


def throttleall_within_bound(r, rounds: int) -> dict:
    """CL.THROTTLEALL at 10 and 100 keys, on absent keys and on existing ones."""
    row = {}
    for n in (10, 100):
        keys = [f"k{i}" for i in range(n)]
        call = ["CL.THROTTLEALL", n, *keys, *limiters(n)]
        for label, fresh in (("new keys", True), ("existing keys", False)):
            times = []
            for _ in range(rounds):
                if fresh:
                    r.flushall()
                times.append(timed(r, *call))
            row[f"{n} keys, {label}"] = (statistics.median(times), max(times))
    r.flushall()
    return row


def limiters(n: int) -> list:
    kinds = [["GCRA", 10, 1, 1], ["SW", 10, 60], ["SW", 10, 60, "APPROX"], ["FW", 10, 60]]
    words = []
    for i in range(n):
        words += kinds[i % len(kinds)]
    return words


def measure(r, n: int, rounds: int) -> dict:
    row = {}

    def worst(name, *words, before=None):
        times = []
        for _ in range(rounds):
            if before:
                before()
            try:
                times.append(timed(r, *words))
            except redis.ResponseError:
                times.append(error_time(r, words[0]))
        row[name] = (statistics.median(times), max(times))

    r.flushall()
    payload = lease_payload(n, time.time_ns() + 3_600 * 10**9)
    worst("CC.LOAD", "CC.LOAD", "leases", payload)
    dump = r.dump("leases")
    worst("RESTORE", "RESTORE", "restored", 0, dump, "REPLACE")
    r.delete("restored")
    worst("CC.ACQUIRE", "CC.ACQUIRE", "leases", n + 1, 3_600, "ID", "lease-%032d" % (n // 2))
    worst("CC.PEEK", "CC.PEEK", "leases", n + 1)
    worst("DEBUG RELOAD", "DEBUG", "RELOAD")
    r.flushall()

    keys = [f"k{i}" for i in range(n)]
    call = ["CL.THROTTLEALL", n, *keys, *limiters(n)]
    worst("CL.THROTTLEALL (refused above 100 keys)", *call)
    r.flushall()
    mset = ["MSET"]
    for k in keys:
        mset += [k, "1"]
    worst("MSET", *mset)
    worst("DEL", "DEL", *keys, before=lambda: r.execute_command(*mset))
    r.flushall()
    return row


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--server", default="redis-7.0", help="a server of scripts/servers, or a path")
    p.add_argument("--module", default=str(ROOT / "target" / "release" / "libredis_cell.so"))
    p.add_argument("--sizes", type=int, nargs="+", default=[10_000, 40_000, 160_000])
    p.add_argument("--rounds", type=int, default=5)
    args = p.parse_args()
    server = Server(run.resolve_server(args.server), Path(args.module))
    try:
        rows = {n: measure(server.r, n, args.rounds) for n in args.sizes}
        bounded = throttleall_within_bound(server.r, args.rounds)
    finally:
        server.stop()
    names = list(next(iter(rows.values())).keys())
    cell = lambda t: f"{t[0]:,.0f} ({t[1]:,})"  # noqa: E731
    print(f"Single calls, server-side µs (SLOWLOG): median (worst) of {args.rounds}, v={server.version}\n")
    print("| call | " + " | ".join(f"N = {n:,}" for n in args.sizes) + " |")
    print("|---|" + "---:|" * len(args.sizes))
    for name in names:
        print(f"| {name} | " + " | ".join(cell(rows[n][name]) for n in args.sizes) + " |")
    print("\n| CL.THROTTLEALL within the bound | µs |\n|---|---:|")
    for name, t in bounded.items():
        print(f"| {name} | {cell(t)} |")
    if len(args.sizes) > 1:
        a, b = args.sizes[0], args.sizes[-1]
        print(f"\nGrowth of the median from N = {a:,} to {b:,} ({b / a:g} times the input):")
        for name in names:
            if rows[a][name][0]:
                print(f"- {name}: {rows[b][name][0] / rows[a][name][0]:.1f} times")


if __name__ == "__main__":
    main()
