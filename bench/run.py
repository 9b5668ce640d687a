#!/usr/bin/env python3
"""Side-by-side benchmark of redis-cell against INCR and script-based limiters.

Starts its own servers (real clock, no persistence), runs redis-benchmark
with pipelining and many connections over a large random keyspace, and
prints ops/s and the ratio to INCR measured in the same run, over several
rounds (median). Then a memory table and the core's micro-benchmarks.

    bench/run.py                      # full run, writes bench/results.md and bench/ops.png
    bench/run.py --rounds 1 --requests 200000 --no-micro   # quick look
    bench/run.py --server redis-8.2   # another server of scripts/servers (a name or a path)

Set CELL_REFERENCE_MODULE=/path/to/other/libredis_cell.so to measure another
module's CL.THROTTLE (e.g. the original redis-cell) on its own server in the
same run.
"""

import argparse
import os
import platform
import re
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODULE = ROOT / "target" / "release" / "libredis_cell.so"
KEYSPACE = 100_000
# scripts/deps installs redis-py here.
sys.path.insert(0, str(ROOT / "target" / "deps" / "python"))
# The server binary, set from --server in main().
SERVER = "redis-server"


def resolve_server(name: str) -> str:
    """A server of the test matrix by name (scripts/servers), or a path."""
    out = subprocess.run([ROOT / "scripts" / "servers"], capture_output=True, text=True).stdout
    for line in out.splitlines():
        known, path = line.split(" ", 1)
        if known == name:
            return path
    return name


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, module: Path):
        import redis

        self.port = free_port()
        self.proc = subprocess.Popen(
            [SERVER, "--port", str(self.port), "--bind", "127.0.0.1",
             "--save", "", "--appendonly", "no", "--loadmodule", str(module)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        self.r = redis.Redis(port=self.port)
        for _ in range(200):
            try:
                self.r.ping()
                return
            except redis.ConnectionError:
                if self.proc.poll() is not None:
                    sys.exit(f"redis-server with {module} exited: does the module load?")
                time.sleep(0.05)
        sys.exit("redis-server did not start")

    def stop(self):
        self.proc.kill()
        self.proc.wait()


def bench(port: int, command: list[str], requests: int, clients: int, pipeline: int) -> float:
    out = subprocess.run(
        ["redis-benchmark", "-p", str(port), "-c", str(clients), "-P", str(pipeline),
         "-n", str(requests), "-r", str(KEYSPACE), "--csv", *command],
        capture_output=True, text=True, check=True,
    ).stdout
    for line in out.splitlines():
        fields = [f.strip('"') for f in line.split(",")]
        if len(fields) > 1 and fields[0] != "test":
            return float(fields[1])
    raise RuntimeError(f"no result in redis-benchmark output: {out!r}")


def workloads(shas: dict[str, str]) -> list[tuple[str, list[str]]]:
    k = "__rand_int__"
    return [
        ("PING", ["PING"]),
        ("INCR", ["INCR", f"n:{k}"]),
        ("CL.THROTTLE", ["CL.THROTTLE", f"cl:{k}", "15", "30", "60", "1"]),
        ("CL.PEEK", ["CL.PEEK", f"cl:{k}", "15", "30", "60"]),
        ("SW.ALLOW limit 100", ["SW.ALLOW", f"sw:{k}", "100", "60"]),
        ("SW.ALLOW limit 10000", ["SW.ALLOW", f"sx:{k}", "10000", "60"]),
        ("SW.ALLOW APPROX", ["SW.ALLOW", f"sa:{k}", "100", "60", "APPROX"]),
        ("FW.INCR", ["FW.INCR", f"fw:{k}", "100", "60"]),
        ("Lua GCRA", ["EVALSHA", shas["gcra"], "1", f"lg:{k}", "15", "30", "60", "1"]),
        ("Lua sorted-set sliding window", ["EVALSHA", shas["sliding_zset"], "1", f"lz:{k}", "100", "60"]),
        ("Lua INCR+EXPIRE fixed window", ["EVALSHA", shas["fixed_window"], "1", f"lf:{k}", "100", "60", "1"]),
    ]


def load_scripts(r) -> dict[str, str]:
    return {p.stem: r.script_load(p.read_text()) for p in sorted((ROOT / "bench" / "lua").glob("*.lua"))}


def throughput(args) -> list[tuple[str, float, float]]:
    server = Server(MODULE)
    reference = None
    if os.environ.get("CELL_REFERENCE_MODULE"):
        reference = Server(Path(os.environ["CELL_REFERENCE_MODULE"]))
    try:
        shas = load_scripts(server.r)
        loads = workloads(shas)
        ops: dict[str, list[float]] = {name: [] for name, _ in loads}
        ratios: dict[str, list[float]] = {name: [] for name, _ in loads}
        if reference:
            ops["reference CL.THROTTLE"] = []
            ratios["reference CL.THROTTLE"] = []
        for rnd in range(args.rounds):
            server.r.flushall()
            this_round = {}
            for name, command in loads:
                this_round[name] = bench(server.port, command, args.requests, args.clients, args.pipeline)
            if reference:
                reference.r.flushall()
                this_round["reference CL.THROTTLE"] = bench(
                    reference.port, ["CL.THROTTLE", "cl:__rand_int__", "15", "30", "60", "1"],
                    args.requests, args.clients, args.pipeline)
            for name, value in this_round.items():
                ops[name].append(value)
                ratios[name].append(value / this_round["INCR"])
            print(f"round {rnd + 1}/{args.rounds}: " + ", ".join(
                f"{n} {v:,.0f}" for n, v in this_round.items()), file=sys.stderr)
        return [(n, statistics.median(ops[n]), statistics.median(ratios[n])) for n in ops]
    finally:
        server.stop()
        if reference:
            reference.stop()


def used_memory(r) -> int:
    return int(r.info("memory")["used_memory"])


def memory(args) -> tuple[list[tuple[str, float]], list[tuple[int, float, float]]]:
    server = Server(MODULE)
    r = server.r
    try:
        shas = load_scripts(r)
        per_key = []
        n = 20_000
        cases = [
            ("CL.THROTTLE (string TAT)", lambda p, i: p.execute_command("CL.THROTTLE", f"c:{i}", 15, 30, 60)),
            ("SW.ALLOW, 1 request", lambda p, i: p.execute_command("SW.ALLOW", f"s:{i}", 100, 60)),
            ("SW.ALLOW APPROX", lambda p, i: p.execute_command("SW.ALLOW", f"a:{i}", 100, 60, "APPROX")),
            ("FW.INCR (string counter)", lambda p, i: p.execute_command("FW.INCR", f"f:{i}", 100, 60)),
            ("Lua GCRA (string)", lambda p, i: p.evalsha(shas["gcra"], 1, f"g:{i}", 15, 30, 60, 1)),
            ("Lua sorted set, 1 request", lambda p, i: p.evalsha(shas["sliding_zset"], 1, f"z:{i}", 100, 60)),
        ]
        for name, call in cases:
            r.flushall()
            time.sleep(0.2)
            before = used_memory(r)
            p = r.pipeline(transaction=False)
            for i in range(n):
                call(p, i)
            p.execute()
            per_key.append((name, (used_memory(r) - before) / n))

        per_request = []
        for limit in (100, 1_000, 100_000):
            r.flushall()
            now = time.time_ns()
            step = 60_000_000_000 // limit
            start = now - 60_000_000_000 + step
            p = r.pipeline(transaction=False)
            for i in range(limit):
                t = start + i * step
                p.execute_command("SW.RECORD", "log", 60_000_000_000, t, 1)
                p.zadd("zset", {f"{t // 1000}:{i}": t // 1000})
            p.execute()
            log = r.memory_usage("log", samples=0)
            zset = r.memory_usage("zset", samples=0)
            per_request.append((limit, log / limit, zset / limit))
        return per_key, per_request
    finally:
        server.stop()


def micro() -> list[tuple[str, str]]:
    out = subprocess.run(
        ["cargo", "bench", "-p", "cell-core", "--bench", "decisions", "--", "--noplot"],
        cwd=ROOT, capture_output=True, text=True, check=True,
    ).stdout
    results, name = [], None
    for line in out.splitlines():
        m = re.match(r"^(\S.*?)\s+time:\s+\[(\S+ \S+) (\S+ \S+) (\S+ \S+)\]", line)
        if m:
            results.append((m.group(1), m.group(3)))
            continue
        if line and not line.startswith(" ") and "time:" not in line:
            name = line.strip()
        m = re.match(r"^\s+time:\s+\[(\S+ \S+) (\S+ \S+) (\S+ \S+)\]", line)
        if m and name:
            results.append((name, m.group(2)))
    return results


def approx_error() -> str:
    return subprocess.run(
        ["cargo", "run", "-q", "--release", "-p", "cell-core", "--example", "approx_vs_exact"],
        cwd=ROOT, capture_output=True, text=True, check=True,
    ).stdout


def machine() -> str:
    cpu = platform.processor() or "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    words = subprocess.run([SERVER, "--version"], capture_output=True, text=True).stdout.split()
    server = f"{words[0]} {words[2].removeprefix('v=')}" if len(words) > 2 else SERVER
    return f"{os.cpu_count()} cores, {cpu}, Linux {platform.release()}, {server}"


def chart(rows, path: Path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not installed: no chart (pip install matplotlib)", file=sys.stderr)
        return
    names = [r[0] for r in rows][::-1]
    values = [r[1] for r in rows][::-1]
    colors = ["#c44e52" if n.startswith(("CL.", "SW.", "FW.")) else
              "#8c8c8c" if n.startswith("Lua") or n.startswith("reference") else "#4c72b0" for n in names]
    fig, ax = plt.subplots(figsize=(9, 5.5))
    ax.barh(names, values, color=colors)
    ax.set_xlabel("operations per second (redis-benchmark -c 50 -P 16, median of rounds)")
    ax.set_title("redis-cell commands vs INCR and Lua-script limiters")
    ax.set_xlim(0, max(values) * 1.15)
    for i, v in enumerate(values):
        ax.text(v, i, f" {v / 1e3:,.0f}k", va="center", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--requests", type=int, default=1_000_000)
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--pipeline", type=int, default=16)
    ap.add_argument("--server", default="redis-server",
                    help="server binary: a path, or a name from scripts/servers (redis-8.2, valkey-9.1, ...)")
    ap.add_argument("--no-build", action="store_true")
    ap.add_argument("--no-micro", action="store_true")
    ap.add_argument("--out", type=Path, default=ROOT / "bench")
    args = ap.parse_args()
    global SERVER
    SERVER = resolve_server(args.server)

    if not args.no_build:
        subprocess.run(["cargo", "build", "--release"], cwd=ROOT, check=True)
    rows = throughput(args)
    per_key, per_request = memory(args)
    micro_rows = [] if args.no_micro else micro()

    lines = [f"Machine: {machine()}.",
             f"Command: `bench/run.py --rounds {args.rounds} --requests {args.requests}` "
             f"(redis-benchmark -c {args.clients} -P {args.pipeline}, {KEYSPACE:,} random keys, "
             f"median of {args.rounds} rounds; ratios are to INCR within each round).", "",
             "| workload | ops/s | ratio to INCR |", "|---|---:|---:|"]
    lines += [f"| {n} | {o:,.0f} | {r:.2f} |" for n, o, r in rows]
    lines += ["", "| state | bytes per key |", "|---|---:|"]
    lines += [f"| {n} | {b:.0f} |" for n, b in per_key]
    lines += ["", "| requests in the window | SW.ALLOW bytes per request | sorted set bytes per request |",
              "|---:|---:|---:|"]
    lines += [f"| {l:,} | {a:.2f} | {z:.2f} |" for l, a, z in per_request]
    if micro_rows:
        lines += ["", "| core decision (criterion) | time per decision |", "|---|---:|"]
        lines += [f"| {n} | {t} |" for n, t in micro_rows]
    lines += ["", approx_error().rstrip()]
    text = "\n".join(lines) + "\n"
    print(text)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.md").write_text(text)
    chart(rows, args.out / "ops.png")


if __name__ == "__main__":
    main()
