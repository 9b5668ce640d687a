#!/usr/bin/env python3
"""What named policies, shadow mode and refusal tracking cost.

Starts a server as bench/run.py does (its Server and redis_benchmark) and
measures, in each round and side by side, a limiter given as arguments
against the same limiter named by a policy, and a workload where about half
the calls are refused with the top-offender summaries on and off
(`CONFIG SET redis-cell.top-capacity`, so Redis 7.0+ or Valkey). Prints the
median ops/s and the median of the per-round ratios.

    bench/policies.py                        # 5 rounds of 500,000 requests
    bench/policies.py --rounds 9 --server redis-8.2
"""

import argparse
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import run  # noqa: E402

K = "__rand_int__"
GCRA = ["GCRA", 15, 30, 60]
FW = ["FW", 1000, 60, "ALIGN"]

# (name, command, top-capacity); pairs are compared as (policy / args).
WORKLOADS = [
    ("CL.THROTTLE (args)", ["CL.THROTTLE", f"a:{K}", 15, 30, 60], 1024),
    ("CL.LIMIT (policy)", ["CL.LIMIT", f"b:{K}", "gcra"], 1024),
    ("CL.THROTTLEALL GCRA + FW (args)", ["CL.THROTTLEALL", 2, f"{{c:{K}}}:a", f"{{c:{K}}}:b", *GCRA, *FW], 1024),
    ("CL.THROTTLEALL POLICY + POLICY", ["CL.THROTTLEALL", 2, f"{{d:{K}}}:a", f"{{d:{K}}}:b",
                                       "POLICY", "gcra", "POLICY", "fw"], 1024),
    # HALF per hour per key, with about twice as many calls per key: about
    # half refused (HALF is set from --requests).
    ("FW.INCR half refused, tracking off", ["FW.INCR", f"e:{K}", "HALF", 3600], 0),
    ("FW.INCR half refused, tracking on", ["FW.INCR", f"e:{K}", "HALF", 3600], 1024),
    ("CL.LIMIT half refused, tracking off", ["CL.LIMIT", f"f:{K}", "half"], 0),
    ("CL.LIMIT half refused, tracking on", ["CL.LIMIT", f"f:{K}", "half"], 1024),
]

PAIRS = [
    ("policy lookup and counters, CL.LIMIT / CL.THROTTLE", "CL.LIMIT (policy)", "CL.THROTTLE (args)"),
    ("policy lookups, CL.THROTTLEALL POLICY / args", "CL.THROTTLEALL POLICY + POLICY",
     "CL.THROTTLEALL GCRA + FW (args)"),
    ("refusal tracking, FW.INCR half refused", "FW.INCR half refused, tracking on",
     "FW.INCR half refused, tracking off"),
    ("refusal tracking, CL.LIMIT half refused", "CL.LIMIT half refused, tracking on",
     "CL.LIMIT half refused, tracking off"),
]


def stats(r, command) -> tuple[int, int]:
    """A command's calls and refusals so far, from INFO redis-cell."""
    name = str(command).lower().replace(".", "_")
    info = r.info("redis-cell")
    field = lambda what: int(info.get(f"redis-cell_{name}_{what}", 0))
    return field("calls"), field("limited")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--requests", type=int, default=500_000)
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--pipeline", type=int, default=16)
    ap.add_argument("--server", default="redis-server")
    args = ap.parse_args()
    run.SERVER = run.resolve_server(args.server)
    server = run.Server(run.MODULE)
    r = server.r
    # The server on one core, redis-benchmark (a child of this process) on
    # the other, as GUIDE.md advises on this two-core machine.
    try:
        os.sched_setaffinity(server.pid, {0})
        os.sched_setaffinity(0, {1})
    except OSError:
        pass
    half = max(1, args.requests // run.KEYSPACE // 2)
    ops = {name: [] for name, _, _ in WORKLOADS}
    ratios = {p[0]: [] for p in PAIRS}
    refused = {}
    try:
        for rnd in range(args.rounds):
            this = {}
            for name, command, capacity in WORKLOADS:
                command = [half if w == "HALF" else w for w in command]
                r.flushall()
                r.execute_command("CONFIG", "SET", "redis-cell.top-capacity", capacity)
                r.execute_command("CL.POLICY", "SET", "gcra", *GCRA)
                r.execute_command("CL.POLICY", "SET", "fw", *FW)
                r.execute_command("CL.POLICY", "SET", "half", "FW", half, 3600)
                before = stats(r, command[0])
                this[name] = run.redis_benchmark(server.port, command, args)
                after = stats(r, command[0])
                calls = after[0] - before[0]
                if calls:
                    refused[name] = (after[1] - before[1]) / calls
                ops[name].append(this[name])
            for label, a, b in PAIRS:
                ratios[label].append(this[a] / this[b])
            print(f"round {rnd + 1}/{args.rounds}: " + ", ".join(f"{n} {v:,.0f}" for n, v in this.items()),
                  file=sys.stderr)
    finally:
        server.stop()
    print(f"server: {run.SERVER}; {args.rounds} rounds of {args.requests:,} requests, "
          f"-c {args.clients} -P {args.pipeline}, keyspace {run.KEYSPACE:,}\n")
    print("| workload | ops/s (median) | refused |")
    print("|---|---:|---:|")
    for name, _, _ in WORKLOADS:
        share = f"{refused[name]:.0%}" if name in refused else "?"
        print(f"| {name} | {statistics.median(ops[name]):,.0f} | {share} |")
    print("\n| cost | ratio (median of rounds) | rounds |")
    print("|---|---:|---|")
    for label, _, _ in PAIRS:
        xs = ratios[label]
        print(f"| {label} | {statistics.median(xs):.3f} | {', '.join(f'{x:.3f}' for x in xs)} |")


if __name__ == "__main__":
    main()
