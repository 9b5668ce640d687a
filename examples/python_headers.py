"""Rate-limit HTTP requests from Python with redis-cell, through the
`redis-cell` package (clients/python: `pip install ./clients/python`).

Usage: REDIS_URL=redis://localhost:6379 python3 examples/python_headers.py [user] [mode]

Where the server has no redis-cell module (a managed service), the same code
runs on the Functions twin in functions/: `cell()` below uses the module's
commands where the server has them, and otherwise loads the twin, which the
package ships (on Redis 6.2, without functions, its EVAL script).

Modes (each prints what the application would do):
  headers  CL.THROTTLE: the HTTP status and headers for 18 requests
  tiered   CL.THROTTLEALL: a per-second and a per-day limit in one call
  worker   CL.RESERVE: workers that wait for their slot, then call an API
"""

import math
import os
import sys
import time

import redis

from redis_cell import Cell, EngineNotFoundError, Fixed, Gcra


def cell(r: redis.Redis) -> Cell:
    """The module's commands where the server has them; otherwise this
    application installs the twin itself (the package never does so
    silently): FUNCTION LOAD, or the EVAL script before Redis 7.0. A user
    that may not call COMMAND (the README's ACL recipe) names the engine
    instead: REDIS_CELL_ENGINE=module (or functions, eval)."""
    engine = os.environ.get("REDIS_CELL_ENGINE")
    if engine:
        return Cell(r, engine=engine)
    c = Cell(r)
    try:
        c.detect()
    except EngineNotFoundError:
        try:
            c.load_functions()
        except redis.ResponseError as e:
            if "unknown command" not in str(e):
                raise
            c = Cell(r, engine="eval")
    return c


def throttle(c: Cell, user: str) -> tuple[int, dict[str, str]]:
    """Returns (status, headers) for one request of `user`:
    15 requests per minute, bursts of up to 16."""
    d = c.throttle(f"rl:{user}", max_burst=15, count=15, period=60)
    headers = {
        "RateLimit-Limit": str(d.limit),
        "RateLimit-Remaining": str(d.remaining),
        "RateLimit-Reset": str(d.reset_after),
    }
    if d.limited:
        headers["Retry-After"] = str(d.retry_after)
        return 429, headers
    return 200, headers


def throttle_tiered(c: Cell, user: str) -> tuple[int, dict[str, str]]:
    """Two limits at once, all or nothing: 5 per second (bursts of 5) and
    8 per day (calendar days, UTC). Durations come in milliseconds (MS);
    the headers round them up to whole seconds, so that a client that
    waits Retry-After is never early. `index` says which limit bound."""
    d = c.throttle_all(
        [
            (f"{{rl:{user}}}:sec", Gcra(max_burst=4, count=5, period=1)),
            (f"{{rl:{user}}}:day", Fixed(limit=8, window=86400, align=True)),
        ],
        ms=True,
    )
    headers = {
        "RateLimit-Limit": str(d.limit),
        "RateLimit-Remaining": str(d.remaining),
        "RateLimit-Reset": str(math.ceil(d.reset_after / 1000)),
        "RateLimit-Policy": ["5;w=1", "8;w=86400"][d.index - 1],
    }
    if d.limited:
        if d.retry_after >= 0:
            headers["Retry-After"] = str(math.ceil(d.retry_after / 1000))
        return 429, headers
    return 200, headers


def call_when_allowed(c: Cell, api: str, request):
    """Waits for a slot of `api` (100 calls per second, no burst, at most
    1 s of waiting) and then calls it; returns (waited ms, result), or None
    when no slot comes within a second."""
    d = c.reserve(f"rl:api:{api}", max_burst=0, count=100, period=1, max_wait=1, ms=True)
    if d.limited:
        return None
    waited = max(d.retry_after, 0)
    if waited:
        time.sleep(waited / 1000)
    return waited, request()


def main() -> None:
    c = cell(redis.Redis.from_url(os.environ.get("REDIS_URL", "redis://localhost:6379")))
    user = sys.argv[1] if len(sys.argv) > 1 else "user123"
    mode = sys.argv[2] if len(sys.argv) > 2 else "headers"
    if mode == "headers":
        for _ in range(18):
            status, headers = throttle(c, user)
            print(status, " ".join(f"{k}: {v}" for k, v in headers.items()))
    elif mode == "tiered":
        for _ in range(7):
            status, headers = throttle_tiered(c, user)
            print(status, " ".join(f"{k}: {v}" for k, v in headers.items()))
    elif mode == "worker":
        for i in range(10):
            waited, result = call_when_allowed(c, user, lambda: f"response {i}")
            print(f"waited {waited} ms, got {result}")
    else:
        sys.exit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    main()
