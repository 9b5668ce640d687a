"""Benchmark (not a test): redis-cell's limits storage beside limits' own
Redis storage, on the same server, in one run.

Usage: target/python/venv/bin/python clients/python/bench.py
       [--server /usr/bin/redis-server] [--module target/release/libredis_cell.so]
       [--seconds 3] [--rounds 3]

Prints, for the moving window at limits 100 and 10,000: bytes per recorded
request (MEMORY USAGE of the key once the window is full, divided by the
requests in it) and the time per hit (filling the window, one request a
hit); for one request of cost 1,000 (limit 10,000): the time of that hit
and the bytes it stores; and the requests per second that a small
flask-limiter app (werkzeug, threaded, on loopback) serves under load (8
client threads) with each storage. Each figure is the median of the rounds,
the two storages measured alternately in each round. The server is started
by the test kit (bench/testkit.py; cargo build -p testkit).
"""

from __future__ import annotations

import argparse
import http.client
import importlib.util
import logging
import os
import statistics
import sys
import threading
import time
from pathlib import Path
from types import ModuleType

import redis
from limits import RateLimitItemPerMinute
from limits.storage import storage_from_string
from limits.strategies import MovingWindowRateLimiter

import redis_cell.limits  # noqa: F401  (registers rediscell://)

REPO = Path(__file__).resolve().parents[2]


def _testkit() -> ModuleType:
    """bench/testkit.py, the client of the test kit that starts the server."""
    spec = importlib.util.spec_from_file_location("testkit", REPO / "bench" / "testkit.py")
    if spec is None or spec.loader is None:
        sys.exit(f"no {REPO / 'bench' / 'testkit.py'}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


testkit = _testkit()
# The server's port, from the kit's answer in main().
PORT = 0


def fill(uri: str, limit: int) -> tuple[float, float]:
    """(bytes per request, microseconds per hit) for a full moving window."""
    storage = storage_from_string(uri)
    storage.reset()
    limiter = MovingWindowRateLimiter(storage)
    item = RateLimitItemPerMinute(limit)
    start = time.perf_counter()
    for _ in range(limit):
        if not limiter.hit(item, "bench"):
            sys.exit(f"{uri}: refused before the limit")
    elapsed = time.perf_counter() - start
    client = redis.Redis("127.0.0.1", PORT)
    size = client.memory_usage(f"LIMITS:{item.key_for('bench')}", samples=0) or 0
    return size / limit, elapsed / limit * 1e6


def cost(uri: str) -> tuple[float, int]:
    """(milliseconds, bytes stored) for one request of cost 1,000."""
    storage = storage_from_string(uri)
    storage.reset()
    limiter = MovingWindowRateLimiter(storage)
    item = RateLimitItemPerMinute(10_000)
    start = time.perf_counter()
    assert limiter.hit(item, "cost", cost=1000)
    elapsed = time.perf_counter() - start
    client = redis.Redis("127.0.0.1", PORT)
    return elapsed * 1e3, client.memory_usage(f"LIMITS:{item.key_for('cost')}", samples=0) or 0


def app_rate(uri: str, seconds: float) -> float:
    """Requests per second of a flask-limiter app on ``uri`` under load."""
    from flask import Flask
    from flask_limiter import Limiter
    from flask_limiter.util import get_remote_address
    from werkzeug.serving import make_server

    redis.Redis("127.0.0.1", PORT).flushall()
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # no line per request
    app = Flask("bench")
    limiter = Limiter(
        get_remote_address, app=app, storage_uri=uri, strategy="moving-window",
        default_limits=["1000000 per minute"],
    )  # fmt: skip
    app.add_url_rule("/", "root", lambda: "ok")
    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    counts = [0] * 8
    stop = time.perf_counter() + seconds

    def load(i: int) -> None:
        connection = http.client.HTTPConnection("127.0.0.1", server.server_port)
        while time.perf_counter() < stop:
            connection.request("GET", "/")
            response = connection.getresponse()
            response.read()
            if response.status != 200:
                raise RuntimeError(f"status {response.status}")
            counts[i] += 1
        connection.close()

    workers = [threading.Thread(target=load, args=(i,)) for i in range(len(counts))]
    begin = time.perf_counter()
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    rate = sum(counts) / (time.perf_counter() - begin)
    server.shutdown()
    del limiter
    return rate


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--server", default="/usr/bin/redis-server")
    parser.add_argument(
        "--module",
        default=os.environ.get("REDIS_CELL_MODULE", str(REPO / "target/release/libredis_cell.so")),
    )
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--rounds", type=int, default=3)
    options = parser.parse_args()
    global PORT
    started = testkit.start([options.module], server=options.server)
    PORT = started["port"]
    storages = {"limits redis://": f"redis://127.0.0.1:{PORT}",
                "redis-cell rediscell://": f"rediscell://127.0.0.1:{PORT}"}  # fmt: skip
    results: dict[str, dict[str, list[float]]] = {name: {} for name in storages}
    try:
        for _ in range(options.rounds):
            for name, uri in storages.items():
                r = results[name]
                for limit in (100, 10_000):
                    per, us = fill(uri, limit)
                    r.setdefault(f"moving window {limit}: bytes/request", []).append(per)
                    r.setdefault(f"moving window {limit}: us/hit", []).append(us)
                ms, size = cost(uri)
                r.setdefault("cost 1000: ms for the hit", []).append(ms)
                r.setdefault("cost 1000: bytes stored", []).append(size)
                r.setdefault("flask-limiter app: requests/s", []).append(
                    app_rate(uri, options.seconds)
                )
    finally:
        testkit.stop(started)
    names = list(storages)
    print(
        f"{'median of ' + str(options.rounds) + ' rounds':40} "
        + " ".join(f"{n:>24}" for n in names)
        + "   ratio"
    )
    for metric in results[names[0]]:
        a, b = (statistics.median(results[n][metric]) for n in names)
        print(f"{metric:40} {a:24.1f} {b:24.1f}   {b / a if a else float('nan'):.2f}")


if __name__ == "__main__":
    main()
