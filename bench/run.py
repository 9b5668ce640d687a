#!/usr/bin/env python3
"""Side-by-side benchmark of redis-cell against INCR, the module API's floor
and script-based limiters.

Starts its server through the test kit (bench/testkit.py; real clock, no
persistence) with redis-cell and the floor module (bench/floor.rs) loaded,
runs redis-benchmark with pipelining and many connections over a large
random keyspace, and prints ops/s, the ratio to INCR and to the floor
measured in the same round (median of the rounds), and the worst single
call seen (SLOWLOG). Operations of several commands (MULTI ... EXEC, a
command pair) go through bench/loadgen.rs, with INCR measured by the same
tool as their reference. Then the memory tables, the worst single calls on
a log of ten million requests, the core's micro-benchmarks and the APPROX
error table.

    bench/run.py                      # full run, writes bench/results.md and bench/ops.png
    bench/run.py --rounds 1 --requests 200000 --no-micro --huge 1000000   # quick look
    bench/run.py --server redis-8.2   # another server of scripts/servers (a name or a path)
    bench/run.py --floor-pairs --pin  # only each command against its floor, in alternation

The Functions twin (functions/) is loaded into the same server and measured
beside the module's commands and the simple scripts of bench/lua: FCALL on
Redis 7.0 and later and on Valkey, EVALSHA of functions/redis_cell_eval.lua
before (Redis 6.2). `--pin` runs the server on core 0 and the load
generators on core 1 (taskset), which steadies the ratios on a shared
machine.

Set CELL_REFERENCE_MODULE=/path/to/other/libredis_cell.so to measure another
module's CL.THROTTLE (e.g. the original redis-cell) on its own server in the
same run.
"""

import argparse
import os
import platform
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

import testkit

ROOT = Path(__file__).resolve().parent.parent
MODULE = ROOT / "target" / "release" / "libredis_cell.so"
FLOOR = ROOT / "target" / "release" / "libcell_floor.so"
LOADGEN = ROOT / "target" / "release" / "loadgen"
KEYSPACE = 100_000
# A call slower than this is logged by SLOWLOG: the worst single call column.
SLOW_US = 25
# The worst single call is measured apart from throughput, with one client
# (pipelined): with fifty clients on a two-core machine, the scheduler's
# pauses would be all it shows.
LATENCY_REQUESTS = 200_000
# scripts/deps installs redis-py here.
sys.path.insert(0, str(ROOT / "target" / "deps" / "python"))
# The server binary, set from --server in main().
SERVER = "redis-server"
# Command prefixes that pin the server and the load generators to cores
# (--pin), empty otherwise.
PIN_SERVER: list = []
PIN_CLIENT: list = []
TWIN = ROOT / "functions"


def resolve_server(name: str) -> str:
    """A server of the test matrix by name (scripts/servers), or a path."""
    out = subprocess.run([ROOT / "scripts" / "servers"], capture_output=True, text=True).stdout
    for line in out.splitlines():
        known, path = line.split(" ", 1)
        if known == name:
            return path
    return name


class Server:
    """A server of the test kit (bench/testkit.py) on SERVER (pinned with
    --pin) with these modules loaded, and a client of it. Its own directory
    (SAVE in the huge-log test writes dump.rdb there) goes with it."""

    def __init__(self, *modules: Path, binary=None, config=(), timeout=None):
        import redis

        self.kit = testkit.start(modules, server=binary or SERVER, config=config, wrap=PIN_SERVER)
        self.port, self.pid = self.kit["port"], self.kit["pid"]
        self.r = redis.Redis(port=self.port, socket_timeout=timeout)
        self.info = self.r.info("server")

    def stop(self):
        testkit.stop(self.kit)


def redis_benchmark(port: int, command: list, args, clients=None, requests=None) -> float:
    out = subprocess.run(
        [*PIN_CLIENT, "redis-benchmark", "-p", str(port), "-c", str(clients or args.clients), "-P", str(args.pipeline),
         "-n", str(requests or args.requests), "-r", str(KEYSPACE), "--csv", *map(str, command)],
        capture_output=True, text=True,
    )
    if out.returncode != 0:
        raise RuntimeError(f"redis-benchmark {command} failed: {out.stdout[-500:]} {out.stderr[-500:]}")
    out = out.stdout
    for line in out.splitlines():
        fields = [f.strip('"') for f in line.split(",")]
        if len(fields) > 1 and fields[0] != "test":
            return float(fields[1])
    raise RuntimeError(f"no result in redis-benchmark output: {out!r}")


def loadgen(port: int, commands: list, args, clients=None, requests=None) -> float:
    words = []
    for i, c in enumerate(commands):
        if i:
            words.append(";")
        words += map(str, c)
    out = subprocess.run(
        [*PIN_CLIENT, LOADGEN, "--port", str(port), "--clients", str(clients or args.clients), "--pipeline", str(args.pipeline),
         "--requests", str(requests or args.requests // 2), "--keyspace", str(KEYSPACE), *words],
        capture_output=True, text=True, check=True,
    ).stdout
    return float(out.strip())


def load_twin(r):
    """Loads the twin: None where it is a Functions library (FCALL), the
    EVAL script's SHA1 before Redis 7.0."""
    import redis

    try:
        r.execute_command("FUNCTION", "LOAD", "REPLACE", (TWIN / "redis_cell.lua").read_text())
        return None
    except redis.ResponseError as e:
        if "unknown command" not in str(e):
            raise
    return r.script_load((TWIN / "redis_cell_eval.lua").read_text())


# The simple scripts of bench/lua loaded as functions too (Redis 7.0+,
# Valkey), into the same Lua state as the twin: Redis steps that state's
# garbage collector every 50 calls, and a step costs more in a larger
# state, so a script pays for the libraries loaded beside it.
SIMPLE_FUNCTIONS = ["gcra", "fixed_window", "sliding_zset"]


def load_simple_functions(r, twin) -> bool:
    """Loads the simple scripts as the library cell_bench (simple_gcra,
    simple_fixed_window, simple_sliding_zset) where the twin is a Functions
    library; False before Redis 7.0."""
    if twin is not None:
        return False
    lib = ["#!lua name=cell_bench"]
    for name in SIMPLE_FUNCTIONS:
        body = (ROOT / "bench" / "lua" / f"{name}.lua").read_text()
        lib.append(f"redis.register_function('simple_{name}', function(KEYS, ARGV)\n{body}\nend)")
    r.execute_command("FUNCTION", "LOAD", "REPLACE", "\n".join(lib))
    return True


def twin_call(sha, name: str, keys: list, args: list) -> list:
    """FCALL name numkeys key... arg..., or EVALSHA sha numkeys key...
    command arg... with the EVAL script."""
    if sha is None:
        return ["FCALL", name, len(keys), *keys, *args]
    return ["EVALSHA", sha, len(keys), *keys, name.replace("_", "."), *args]


# The twin's functions beside the simple script of the same limiter: the
# rows whose ratio (twin / script, per round) the results report.
TWIN_PAIRS = [
    ("twin cl_throttle", "Lua GCRA"),
    ("twin fw_incr", "Lua INCR+EXPIRE fixed window"),
    ("twin sw_allow limit 100", "Lua sorted-set sliding window"),
    ("twin cl_throttleall GCRA + FW", "Lua all-or-nothing GCRA + FW"),
    ("twin cl_throttle", "Lua GCRA, a function beside the twin"),
    ("twin fw_incr", "Lua INCR+EXPIRE fixed window, a function beside the twin"),
    ("twin sw_allow limit 100", "Lua sorted-set sliding window, a function beside the twin"),
]


# (name, tool, command(s), floor): tool "rb" is redis-benchmark, "lg" the
# load generator; floor "one", "two" or "type" names the floor a row is
# compared to ("type": a module-type value, as the sliding windows keep).
def workloads(shas: dict[str, str], twin, simple_functions=False):
    k = "__rand_int__"
    gcra = ["GCRA", 15, 30, 60]
    fw = ["FW", 1000, 60, "ALIGN"]
    beside = [
        ("Lua GCRA, a function beside the twin", "rb",
         ["FCALL", "simple_gcra", 1, f"lh:{k}", 15, 30, 60, 1], None),
        ("Lua sorted-set sliding window, a function beside the twin", "rb",
         ["FCALL", "simple_sliding_zset", 1, f"ly:{k}", 100, 60], None),
        ("Lua INCR+EXPIRE fixed window, a function beside the twin", "rb",
         ["FCALL", "simple_fixed_window", 1, f"le:{k}", 100, 60, 1], None),
    ] if simple_functions else []
    return [
        ("PING", "rb", ["PING"], None),
        ("INCR", "rb", ["INCR", f"n:{k}"], None),
        ("INCR (loadgen)", "lg", [["INCR", f"n:{k}"]], None),
        ("floor, one key", "rb", ["FLOOR.ONE", f"f:{k}"], None),
        ("floor, two keys", "rb", ["FLOOR.TWO", f"{{f:{k}}}:a", f"{{f:{k}}}:b"], None),
        ("floor, module type", "rb", ["FLOOR.TYPE", f"ft:{k}"], None),
        # The floors again with as many arguments as the commands compared
        # to them (the extra words are ignored): the server's own share of
        # a longer call, which no module can avoid.
        ("floor, one key, 6 arguments (as CL.THROTTLE)", "rb", ["FLOOR.ONE", f"f:{k}", 15, 30, 60, 1], "one"),
        ("floor, two keys, 13 arguments (as CL.THROTTLEALL GCRA + FW)", "rb",
         ["FLOOR.TWO", f"{{f:{k}}}:a", f"{{f:{k}}}:b", *gcra, *fw], "two"),
        ("floor, module type, 4 arguments (as SW.ALLOW)", "rb", ["FLOOR.TYPE", f"ft:{k}", 100, 60], "type"),
        ("floor, integer-encoded (GET and SET through RedisModule_Call)", "rb", ["FLOOR.INT", f"fi:{k}"], "one"),
        ("CL.THROTTLE", "rb", ["CL.THROTTLE", f"cl:{k}", 15, 30, 60, 1], "one"),
        ("CL.PEEK", "rb", ["CL.PEEK", f"cl:{k}", 15, 30, 60], "one"),
        ("CL.REFUND", "rb", ["CL.REFUND", f"cl:{k}", 15, 30, 60, 1], "one"),
        ("CL.RESERVE MAXWAIT 1", "rb", ["CL.RESERVE", f"cr:{k}", 15, 30, 60, "MAXWAIT", 1], "one"),
        ("CL.THROTTLEALL GCRA + FW", "rb",
         ["CL.THROTTLEALL", 2, f"{{t:{k}}}:a", f"{{t:{k}}}:b", *gcra, *fw], "two"),
        ("CL.THROTTLEALL GCRA + FW + SW", "rb",
         ["CL.THROTTLEALL", 3, f"{{u:{k}}}:a", f"{{u:{k}}}:b", f"{{u:{k}}}:c", *gcra, *fw, "SW", 100, 60], None),
        ("MULTI: CL.THROTTLE + FW.INCR", "lg",
         [["MULTI"], ["CL.THROTTLE", f"{{m:{k}}}:a", 15, 30, 60], ["FW.INCR", f"{{m:{k}}}:b", 1000, 60, "ALIGN"],
          ["EXEC"]], None),
        ("MULTI: CL.THROTTLE + FW.INCR + SW.ALLOW", "lg",
         [["MULTI"], ["CL.THROTTLE", f"{{v:{k}}}:a", 15, 30, 60], ["FW.INCR", f"{{v:{k}}}:b", 1000, 60, "ALIGN"],
          ["SW.ALLOW", f"{{v:{k}}}:c", 100, 60], ["EXEC"]], None),
        ("Lua all-or-nothing GCRA + FW", "rb",
         ["EVALSHA", shas["throttle_all"], 2, f"{{l:{k}}}:a", f"{{l:{k}}}:b", 15, 30, 60, 1000, 60], None),
        ("SW.ALLOW limit 100", "rb", ["SW.ALLOW", f"sw:{k}", 100, 60], "type"),
        ("SW.ALLOW limit 10000", "rb", ["SW.ALLOW", f"sx:{k}", 10000, 60], "type"),
        ("SW.ALLOW APPROX", "rb", ["SW.ALLOW", f"sa:{k}", 100, 60, "APPROX"], "type"),
        ("SW.PEEK", "rb", ["SW.PEEK", f"sw:{k}", 100, 60], "type"),
        ("SW.REFUND", "rb", ["SW.REFUND", f"sw:{k}", 100, 60, 1], "type"),
        ("FW.INCR", "rb", ["FW.INCR", f"fw:{k}", 100, 60], "one"),
        ("FW.PEEK", "rb", ["FW.PEEK", f"fw:{k}", 100, 60], "one"),
        ("FW.REFUND", "rb", ["FW.REFUND", f"fw:{k}", 100, 60, 1], "one"),
        ("FW.INCR day TZ +09:00", "rb", ["FW.INCR", f"fd:{k}", 10000, "day", "TZ", "+09:00"], "one"),
        ("CC.ACQUIRE + CC.RELEASE", "lg",
         [["CC.ACQUIRE", f"cc:{k}", 100, 60, "ID", "worker"], ["CC.RELEASE", f"cc:{k}", "worker"]], None),
        ("Lua GCRA", "rb", ["EVALSHA", shas["gcra"], 1, f"lg:{k}", 15, 30, 60, 1], None),
        ("Lua sorted-set sliding window", "rb", ["EVALSHA", shas["sliding_zset"], 1, f"lz:{k}", 100, 60], None),
        ("Lua INCR+EXPIRE fixed window", "rb", ["EVALSHA", shas["fixed_window"], 1, f"lf:{k}", 100, 60, 1], None),
        ("twin cl_throttle", "rb", twin_call(twin, "cl_throttle", [f"tc:{k}"], [15, 30, 60, 1]), None),
        ("twin cl_peek", "rb", twin_call(twin, "cl_peek", [f"tc:{k}"], [15, 30, 60]), None),
        ("twin fw_incr", "rb", twin_call(twin, "fw_incr", [f"tf:{k}"], [100, 60, 1]), None),
        ("twin sw_allow limit 100", "rb", twin_call(twin, "sw_allow", [f"ts:{k}"], [100, 60]), None),
        ("twin sw_allow APPROX", "rb", twin_call(twin, "sw_allow", [f"tx:{k}"], [100, 60, "APPROX"]), None),
        ("twin cl_throttleall GCRA + FW", "rb",
         twin_call(twin, "cl_throttleall", [f"{{ta:{k}}}:a", f"{{ta:{k}}}:b"], [*gcra, *fw]), None),
        ("twin cc_acquire + cc_release", "lg",
         [twin_call(twin, "cc_acquire", [f"tcc:{k}"], [100, 60, "ID", "worker"]),
          twin_call(twin, "cc_release", [f"tcc:{k}"], ["worker"])], None),
    ] + beside


# Each command against its floors, and FW.INCR against the script it
# replaces: the rows whose ratio --floor-pairs measures in alternation.
FLOOR_PAIRS = [
    ("CL.THROTTLE", "floor, one key"),
    ("CL.THROTTLE", "floor, one key, 6 arguments (as CL.THROTTLE)"),
    ("CL.PEEK", "floor, one key"),
    ("CL.RESERVE MAXWAIT 1", "floor, one key"),
    ("CL.THROTTLEALL GCRA + FW", "floor, two keys"),
    ("CL.THROTTLEALL GCRA + FW", "floor, two keys, 13 arguments (as CL.THROTTLEALL GCRA + FW)"),
    ("SW.ALLOW limit 100", "floor, module type"),
    ("SW.ALLOW limit 100", "floor, module type, 4 arguments (as SW.ALLOW)"),
    ("SW.ALLOW APPROX", "floor, module type"),
    ("FW.INCR", "floor, one key"),
    ("FW.INCR", "Lua INCR+EXPIRE fixed window"),
]


def alternate(server, commands: dict, pairs: list, args, flush=True) -> list:
    """Each pair's two workloads run in alternation (reference, row,
    reference, row...) with short runs of a quarter of --requests, so that
    both see the same load on a shared machine: the median, lowest and
    highest ratio (row / reference) of the --pairs adjacent runs. With
    `flush` the keys are dropped before each pair of runs; without it, one
    untimed run of each first fills its keys, so that every timed run
    meets existing keys. None with --pairs 0."""
    out = []
    for a, b in pairs if args.pairs else []:
        if a not in commands or b not in commands:
            continue
        ratios = []
        if not flush:
            server.r.flushall()
            for name in (b, a):
                redis_benchmark(server.port, commands[name], args, requests=args.requests // 4)
        for _ in range(args.pairs):
            if flush:
                server.r.flushall()
            reference = redis_benchmark(server.port, commands[b], args, requests=args.requests // 4)
            row = redis_benchmark(server.port, commands[a], args, requests=args.requests // 4)
            ratios.append(row / reference)
        print(f"{a} / {b}: " + ", ".join(f"{x:.2f}" for x in ratios), file=sys.stderr)
        out.append((a, b, statistics.median(ratios), min(ratios), max(ratios)))
    return out


def only_pairs(args, pairs=TWIN_PAIRS, flush=True):
    """--only-pairs, --floor-pairs: a table of alternating runs alone."""
    server = Server(MODULE, FLOOR)
    try:
        shas = load_scripts(server.r)
        twin = load_twin(server.r)
        simple = load_simple_functions(server.r, twin)
        return alternate(server, {w[0]: w[2] for w in workloads(shas, twin, simple)}, pairs, args, flush)
    finally:
        server.stop()


def alternation_table(pairs, args, what: str, header: str) -> list:
    """The table of `alternate`'s ratios, under a sentence saying `what`."""
    return ["", f"{what}: {args.pairs} runs of each in alternation ({args.requests // 4:,} requests a run), "
            "the ratio of their throughputs in adjacent runs:", "", header, "|---|---|---:|---:|---:|"] + [
        f"| {a} | {b} | {m:.2f} | {lo:.2f} | {hi:.2f} |" for a, b, m, lo, hi in pairs]


def pairs_table(pairs, args) -> list:
    return alternation_table(pairs, args, "The Functions twin against the simple (inexact) script of the same limiter",
                             "| twin | simple script | twin / script (median) | lowest | highest |")


def floor_pairs_table(pairs, args) -> list:
    return alternation_table(pairs, args, "Each command against its floor (on keys that exist), and `FW.INCR` "
                             "against the script", "| command | against | ratio (median) | lowest | highest |")


def load_scripts(r) -> dict[str, str]:
    return {p.stem: r.script_load(p.read_text()) for p in sorted((ROOT / "bench" / "lua").glob("*.lua"))}


def slowest(r, commands) -> float:
    """The longest call (µs) SLOWLOG holds for these command names."""
    names = {str(c[0]).lower() for c in commands}
    worst = 0
    for entry in r.slowlog_get(100_000):
        words = entry["command"].split() if isinstance(entry["command"], bytes) else []
        name = words[0].decode().lower() if words else ""
        if name in names:
            worst = max(worst, entry["duration"])
    return worst


def throughput(args):
    server = Server(MODULE, FLOOR)
    reference = None
    if os.environ.get("CELL_REFERENCE_MODULE"):
        reference = Server(Path(os.environ["CELL_REFERENCE_MODULE"]))
    r = server.r
    r.config_set("slowlog-log-slower-than", SLOW_US)
    r.config_set("slowlog-max-len", 100_000)
    try:
        shas = load_scripts(r)
        twin = load_twin(r)
        simple = load_simple_functions(r, twin)
        loads = [w for w in workloads(shas, twin, simple)
                 if not args.only or w[0] in ("INCR", "INCR (loadgen)", "floor, one key", "floor, two keys",
                                             "floor, module type")
                 or any(o in w[0] for o in args.only)]
        names = [w[0] for w in loads] + (["reference CL.THROTTLE"] if reference else [])
        ops = {n: [] for n in names}
        to_incr = {n: [] for n in names}
        to_floor = {n: [] for n in names}
        worst = {n: 0.0 for n in names}
        for rnd in range(args.rounds):
            r.flushall()
            this = {}
            for name, tool, command, _ in loads:
                if tool == "rb":
                    this[name] = redis_benchmark(server.port, command, args)
                else:
                    this[name] = loadgen(server.port, command, args)
            if reference:
                reference.r.flushall()
                this["reference CL.THROTTLE"] = redis_benchmark(
                    reference.port, ["CL.THROTTLE", "cl:__rand_int__", 15, 30, 60, 1], args)
            floors = {"one": this["floor, one key"], "two": this["floor, two keys"],
                      "type": this["floor, module type"]}
            for name, tool, _, floor in loads:
                ops[name].append(this[name])
                incr = this["INCR (loadgen)"] if tool == "lg" else this["INCR"]
                to_incr[name].append(this[name] / incr)
                if floor:
                    to_floor[name].append(this[name] / floors[floor])
            if reference:
                n = "reference CL.THROTTLE"
                ops[n].append(this[n])
                to_incr[n].append(this[n] / this["INCR"])
                to_floor[n].append(this[n] / floors["one"])
            print(f"round {rnd + 1}/{args.rounds}: " + ", ".join(
                f"{n} {v:,.0f}" for n, v in this.items()), file=sys.stderr)
        for name, tool, command, _ in loads:
            r.slowlog_reset()
            if tool == "rb":
                redis_benchmark(server.port, command, args, clients=1, requests=LATENCY_REQUESTS)
                worst[name] = slowest(r, [command])
            else:
                loadgen(server.port, command, args, clients=1, requests=LATENCY_REQUESTS // 2)
                worst[name] = slowest(r, command)
        med = lambda xs: statistics.median(xs) if xs else None
        rows = [(n, med(ops[n]), med(to_incr[n]), med(to_floor[n]), worst[n]) for n in names]
        commands = {w[0]: w[2] for w in loads}
        pairs = alternate(server, commands, TWIN_PAIRS, args)
        floors = alternate(server, commands, FLOOR_PAIRS, args, flush=False)
        return rows, pairs, floors
    finally:
        server.stop()
        if reference:
            reference.stop()


def used_memory(r) -> int:
    return int(r.info("memory")["used_memory"])


def memory():
    server = Server(MODULE, FLOOR)
    r = server.r
    try:
        shas = load_scripts(r)
        twin = load_twin(r)
        tw = lambda p, name, key, *args: p.execute_command(*twin_call(twin, name, [key], list(args)))
        per_key = []
        n = 20_000
        cases = [
            ("CL.THROTTLE (string TAT)", lambda p, i: p.execute_command("CL.THROTTLE", f"c:{i}", 15, 30, 60)),
            ("SW.ALLOW, 1 request", lambda p, i: p.execute_command("SW.ALLOW", f"s:{i}", 100, 60)),
            ("SW.ALLOW APPROX", lambda p, i: p.execute_command("SW.ALLOW", f"a:{i}", 100, 60, "APPROX")),
            ("FW.INCR (string counter)", lambda p, i: p.execute_command("FW.INCR", f"f:{i}", 100, 60)),
            ("the floor's value, raw, updated in place", lambda p, i: p.execute_command("FLOOR.ONE", f"fo:{i}")),
            ("the floor's value, integer-encoded", lambda p, i: p.execute_command("FLOOR.INT", f"fi:{i}")),
            ("CC.ACQUIRE, 1 lease (32-character id)", lambda p, i: p.execute_command("CC.ACQUIRE", f"cc:{i}", 10, 60)),
            ("Lua GCRA (string)", lambda p, i: p.evalsha(shas["gcra"], 1, f"g:{i}", 15, 30, 60, 1)),
            ("Lua sorted set, 1 request", lambda p, i: p.evalsha(shas["sliding_zset"], 1, f"z:{i}", 100, 60)),
            ("twin cl_throttle (the same string TAT)", lambda p, i: tw(p, "cl_throttle", f"tc:{i}", 15, 30, 60)),
            ("twin sw_allow, 1 request", lambda p, i: tw(p, "sw_allow", f"ts:{i}", 100, 60)),
            ("twin sw_allow APPROX", lambda p, i: tw(p, "sw_allow", f"ta:{i}", 100, 60, "APPROX")),
            ("twin fw_incr (the same string counter)", lambda p, i: tw(p, "fw_incr", f"tf:{i}", 100, 60)),
            ("twin cc_acquire, 1 lease (its generated id)", lambda p, i: tw(p, "cc_acquire", f"tl:{i}", 10, 60)),
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
                p.execute_command("SW.RECORD", "log", 60_000_000_000, t)
                p.zadd("zset", {f"{t // 1000}:{i}": t // 1000})
            p.execute()
            log = r.memory_usage("log", samples=0)
            zset = r.memory_usage("zset", samples=0)
            # The twin's log grows by one call per request (each rewrites
            # its string): measured up to 1,000 requests.
            twin_log = None
            if limit <= 1_000:
                p = r.pipeline(transaction=False)
                for i in range(limit):
                    tw(p, "sw_allow", "twinlog", limit, 60)
                p.execute()
                twin_log = r.memory_usage("twinlog", samples=0) / limit
            per_request.append((limit, log / limit, zset / limit, twin_log))

        # 1,000 leases, the most the twin holds on a key (lease.MAX).
        r.flushall()
        p = r.pipeline(transaction=False)
        for i in range(1_000):
            p.execute_command("CC.ACQUIRE", "leases", 10_000, 600)
            tw(p, "cc_acquire", "twinleases", 1_000, 600)
        p.execute()
        per_lease = r.memory_usage("leases", samples=0) / 1_000
        twin_lease = r.memory_usage("twinleases", samples=0) / 1_000
        return per_key, per_request, (per_lease, twin_lease)
    finally:
        server.stop()


def varint(v: int) -> bytes:
    """An unsigned varint (7 bits a byte, the lowest first), as SW.LOAD's
    and CC.LOAD's payloads write integers."""
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def huge_log(n: int):
    """Single calls (SLOWLOG, server-side µs) on a sliding log of `n`
    requests: the median and the worst of several, and what DUMP, SAVE and
    DEL of such a key cost. The same is measured for INCR, as the noise
    floor of this machine."""
    server = Server(MODULE)
    r = server.r
    rows = []

    def payload(window_ns: int, first_ns: int, delta_ns: int) -> bytes:
        last = first_ns + (n - 1) * delta_ns
        head = b"E" + window_ns.to_bytes(8, "little") + b"\x01" + varint(n) + varint(n) + varint(first_ns) + varint(last)
        return head + b"\x00" + varint(delta_ns << 1) * (n - 1)

    def timed(*command) -> float:
        r.config_set("slowlog-log-slower-than", 0)
        r.slowlog_reset()
        r.execute_command(*command)
        entries = [e for e in r.slowlog_get(10) if e["command"].split()[0].lower() == str(command[0]).lower().encode()]
        r.config_set("slowlog-log-slower-than", SLOW_US)
        return max(e["duration"] for e in entries)

    def stats(durations) -> str:
        return f"{statistics.median(durations):,.0f} | {max(durations):,.0f}"

    def stream(*command):
        """`n` pipelined calls from one client: the worst, and how many took
        over 1 ms."""
        r.config_set("slowlog-log-slower-than", SLOW_US)
        r.slowlog_reset()
        start = time.time()
        subprocess.run(["redis-benchmark", "-p", str(server.port), "-c", "1", "-P", "64", "-n", str(n),
                        "-q", *map(str, command)], capture_output=True, check=True)
        slow = [e["duration"] for e in r.slowlog_get(100_000)
                if e["command"].split()[0].lower() == str(command[0]).lower().encode()]
        note = f"{time.time() - start:.1f} s in all; {sum(d > 1000 for d in slow)} calls over 1 ms"
        return f"— | {max(slow, default=0):,.0f}", note

    try:
        r.config_set("proto-max-bulk-len", str(2 ** 31))
        r.config_set("slowlog-max-len", 100_000)
        rows.append((f"{n:,} INCR on one key (this machine's noise floor)", *stream("INCR", "counter")))
        rows.append((f"{n:,} RPUSH growing one list (a built-in structure growing alike)",
                     *stream("RPUSH", "list", "x")))
        rows.append((f"{n:,} SW.ALLOW growing one log to {n:,} requests", *stream("SW.ALLOW", "grow", 2 * n, 600)))
        # Every request leaves the window at once: the next call drops them.
        expiry = []
        for _ in range(5):
            now = time.time_ns()
            r.execute_command("SW.LOAD", "expiring", payload(1_000_000_000, now - 900_000_000, 20))
            time.sleep(1.2)
            expiry.append(timed("SW.ALLOW", "expiring", 2 * n, 1))
        rows.append((f"the call after all {n:,} requests left the window (5 times)", stats(expiry), ""))
        # A full window refusing a request as large as the limit: the wait
        # comes from the newest requests.
        now = time.time_ns()
        r.execute_command("SW.LOAD", "full", payload(600_000_000_000, now - 500_000_000, 20))
        rows.append((f"a refusal of quantity {n:,} on that full window (200 times)",
                     stats([timed("SW.ALLOW", "full", n, 600, n) for _ in range(200)]), ""))
        rows.append(("SW.PEEK on it (20 times)", stats([timed("SW.PEEK", "full", n, 600) for _ in range(20)]), ""))
        rows.append(("SW.REFUND of 1,000 from it (20 times)",
                     stats([timed("SW.REFUND", "full", n, 600, 1000) for _ in range(20)]), ""))
        memory = r.memory_usage("full", samples=0)
        rows.append((f"DUMP of the {n:,}-request key (3 times)", stats([timed("DUMP", "full") for _ in range(3)]),
                     f"O(N); MEMORY USAGE {memory / n:.2f} bytes per request"))
        rows.append(("SAVE with that key", stats([timed("SAVE")]), "O(N); BGSAVE does it in a child process"))
        rows.append(("DEL of that key", stats([timed("DEL", "full")]), "UNLINK frees it in the background"))
        return rows
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
    server = Server()
    server.stop()
    name, version = testkit.version(server.info)
    return f"{os.cpu_count()} cores, {cpu}, Linux {platform.release()}, {name} {version}"


def chart(rows, path: Path):
    """Bars of each workload's ratio to INCR, and to its floor where it has
    one."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not installed: no chart (pip install matplotlib)", file=sys.stderr)
        return
    rows = [r for r in rows if r[2] is not None and not r[0].startswith("INCR (")][::-1]
    names = [r[0] for r in rows]
    fig, ax = plt.subplots(figsize=(10, 9))
    height = 0.4
    ys = range(len(rows))
    ax.barh([y + height / 2 for y in ys], [r[2] for r in rows], height, color="#4c72b0", label="ratio to INCR")
    floors = [(y, r[3]) for y, r in zip(ys, rows) if r[3] is not None]
    ax.barh([y - height / 2 for y, _ in floors], [f for _, f in floors], height, color="#c44e52",
            label="ratio to the module API's floor")
    for y, r in zip(ys, rows):
        ax.text(r[2], y + height / 2, f" {r[2]:.2f}", va="center", fontsize=7)
        if r[3] is not None:
            ax.text(r[3], y - height / 2, f" {r[3]:.2f}", va="center", fontsize=7)
    ax.set_yticks(list(ys))
    ax.set_yticklabels(names, fontsize=8)
    ax.set_xlabel("throughput ratio (redis-benchmark -c 50 -P 16, median of rounds)")
    ax.set_title("redis-cell against INCR, the module API's floor and Lua scripts")
    ax.legend(loc="lower right")
    ax.set_xlim(0, max(max(r[2] for r in rows), max((f for _, f in floors), default=0)) * 1.15)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def rows_from(results: Path):
    """The throughput rows of a results.md written by this script."""
    rows, inside = [], False
    for line in results.read_text().splitlines():
        if line.startswith("| workload |"):
            inside = True
            continue
        if inside and not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip("|").split("|")]
        if inside and len(cells) == 5 and cells[1].replace(",", "").isdigit():
            number = lambda c: None if c in ("—", "") else float(c)
            rows.append((cells[0], float(cells[1].replace(",", "")), number(cells[2]), number(cells[3]), 0))
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--requests", type=int, default=1_000_000)
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--pipeline", type=int, default=16)
    ap.add_argument("--huge", type=int, default=10_000_000, help="requests in the huge-log test (0: skip)")
    ap.add_argument("--server", default="redis-server",
                    help="server binary: a path, or a name from scripts/servers (redis-8.2, valkey-9.1, ...)")
    ap.add_argument("--only", action="append", help="run only the workloads whose name contains this (repeatable)")
    ap.add_argument("--no-memory", action="store_true")
    ap.add_argument("--no-build", action="store_true")
    ap.add_argument("--no-micro", action="store_true")
    ap.add_argument("--out", type=Path, default=ROOT / "bench")
    ap.add_argument("--replot", type=Path, help="only redraw the chart from this results.md")
    ap.add_argument("--pairs", type=int, default=9,
                    help="alternating runs of each twin function and its simple script (0: none)")
    ap.add_argument("--only-pairs", action="store_true", help="print only the twin-against-script table")
    ap.add_argument("--floor-pairs", action="store_true",
                    help="print only the table of each command against its floor, run in alternation")
    ap.add_argument("--pin", action="store_true",
                    help="run the server on core 0 and the load generators on core 1 (taskset)")
    args = ap.parse_args()
    if args.replot:
        chart(rows_from(args.replot), args.out / "ops.png")
        return
    global SERVER, PIN_SERVER, PIN_CLIENT
    SERVER = resolve_server(args.server)
    if args.pin:
        PIN_SERVER, PIN_CLIENT = ["taskset", "-c", "0"], ["taskset", "-c", "1"]

    if not args.no_build:
        subprocess.run(["cargo", "build", "--release", "-p", "redis-cell", "-p", "cell-bench"], cwd=ROOT, check=True)
        subprocess.run(["cargo", "build", "-q", "-p", "testkit"], cwd=ROOT, check=True)
    if args.only_pairs:
        print("\n".join(pairs_table(only_pairs(args), args)))
        return
    if args.floor_pairs:
        print("\n".join(floor_pairs_table(only_pairs(args, FLOOR_PAIRS, flush=False), args)))
        return
    rows, pairs, floors = throughput(args)
    per_key, per_request, per_lease = ([], [], None) if args.no_memory else memory()
    huge = huge_log(args.huge) if args.huge else []
    micro_rows = [] if args.no_micro else micro()

    fmt = lambda v: "—" if v is None else f"{v:.2f}"
    worst = lambda us: f"< {SLOW_US}" if us < SLOW_US else f"{us:,.0f}"
    lines = [f"Machine: {machine()}.",
             f"Command: `bench/run.py --rounds {args.rounds} --requests {args.requests} --server {args.server}"
             f"{' --pin' if args.pin else ''}{f' --huge {args.huge}' if args.huge != 10_000_000 else ''}"
             f"{' --no-micro' if args.no_micro else ''}` "
             f"(redis-benchmark -c {args.clients} -P {args.pipeline}, {KEYSPACE:,} random keys, "
             f"median of {args.rounds} rounds; ratios are within each round). The worst single call is "
             f"the longest SLOWLOG entry in a separate pass of {LATENCY_REQUESTS:,} calls from one client "
             f"(-P {args.pipeline}); calls under {SLOW_US} µs are not logged.", "",
             "| workload | ops/s | ratio to INCR | ratio to the floor | worst single call (µs) |",
             "|---|---:|---:|---:|---:|"]
    lines += [f"| {n} | {o:,.0f} | {fmt(i)} | {fmt(f)} | {worst(w)} |" for n, o, i, f, w in rows]
    if floors:
        lines += floor_pairs_table(floors, args)
    if pairs:
        lines += pairs_table(pairs, args)
    if per_key:
        lines += ["", "| state | bytes per key |", "|---|---:|"]
        lines += [f"| {n} | {b:.0f} |" for n, b in per_key]
        lines += ["", f"A held lease costs {per_lease[0]:.1f} bytes (1,000 leases with 32-character ids on one key); "
                  f"in the twin, {per_lease[1]:.1f} bytes (its generated ids).", ""]
        lines += ["| requests in the window | SW.ALLOW bytes per request | sorted set bytes per request "
                  "| twin sw_allow bytes per request |",
                  "|---:|---:|---:|---:|"]
        lines += [f"| {l:,} | {a:.2f} | {z:.2f} | {fmt(t)} |" for l, a, z, t in per_request]
    if huge:
        lines += ["", f"A log of {args.huge:,} requests (SLOWLOG, server-side time of one call, µs):", "",
                  "| call | median | worst | note |", "|---|---:|---:|---|"]
        lines += [f"| {n} | {us} | {note} |" for n, us, note in huge]
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
