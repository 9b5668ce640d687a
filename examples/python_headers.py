"""Rate-limit HTTP requests from Python (redis-py) with redis-cell.

Usage: REDIS_URL=redis://localhost:6379 python3 examples/python_headers.py [user] [mode]

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


def throttle(r: redis.Redis, user: str) -> tuple[int, dict[str, str]]:
    """Returns (status, headers) for one request of `user`:
    15 requests per minute, bursts of up to 16."""
    limited, limit, remaining, retry_after, reset_after = r.execute_command(
        "CL.THROTTLE", f"rl:{user}", 15, 15, 60, 1
    )
    headers = {
        "RateLimit-Limit": str(limit),
        "RateLimit-Remaining": str(remaining),
        "RateLimit-Reset": str(reset_after),
    }
    if limited:
        headers["Retry-After"] = str(retry_after)
        return 429, headers
    return 200, headers


def throttle_tiered(r: redis.Redis, user: str) -> tuple[int, dict[str, str]]:
    """Two limits at once, all or nothing: 5 per second (bursts of 5) and
    8 per day (calendar days, UTC). Durations come in milliseconds (MS);
    the headers round them up to whole seconds, so that a client that
    waits Retry-After is never early. The reply's last field says which
    limit bound."""
    limited, limit, remaining, retry_ms, reset_ms, index = r.execute_command(
        "CL.THROTTLEALL", 2, f"{{rl:{user}}}:sec", f"{{rl:{user}}}:day",
        "GCRA", 4, 5, 1,
        "FW", 8, 86400, "ALIGN",
        "MS",
    )
    headers = {
        "RateLimit-Limit": str(limit),
        "RateLimit-Remaining": str(remaining),
        "RateLimit-Reset": str(math.ceil(reset_ms / 1000)),
        "RateLimit-Policy": ["5;w=1", "8;w=86400"][index - 1],
    }
    if limited:
        if retry_ms >= 0:
            headers["Retry-After"] = str(math.ceil(retry_ms / 1000))
        return 429, headers
    return 200, headers


def call_when_allowed(r: redis.Redis, api: str, call):
    """Waits for a slot of `api` (100 calls per second, no burst, at most
    1 s of waiting) and then calls it; returns (waited ms, result), or None
    when no slot comes within a second."""
    limited, _limit, _remaining, wait_ms, _reset = r.execute_command(
        "CL.RESERVE", f"rl:api:{api}", 0, 100, 1, "MAXWAIT", 1, "MS"
    )
    if limited:
        return None
    waited = max(wait_ms, 0)
    if waited:
        time.sleep(waited / 1000)
    return waited, call()


def main() -> None:
    r = redis.Redis.from_url(os.environ.get("REDIS_URL", "redis://localhost:6379"))
    user = sys.argv[1] if len(sys.argv) > 1 else "user123"
    mode = sys.argv[2] if len(sys.argv) > 2 else "headers"
    if mode == "headers":
        for _ in range(18):
            status, headers = throttle(r, user)
            print(status, " ".join(f"{k}: {v}" for k, v in headers.items()))
    elif mode == "tiered":
        for _ in range(7):
            status, headers = throttle_tiered(r, user)
            print(status, " ".join(f"{k}: {v}" for k, v in headers.items()))
    elif mode == "worker":
        for i in range(10):
            waited, result = call_when_allowed(r, user, lambda: f"response {i}")
            print(f"waited {waited} ms, got {result}")
    else:
        sys.exit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    main()
