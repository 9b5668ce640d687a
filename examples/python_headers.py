"""Rate-limit an HTTP request with CL.THROTTLE from Python (redis-py).

Usage: REDIS_URL=redis://localhost:6379 python3 examples/python_headers.py [user]
Prints the HTTP status and headers the application would send.
"""

import os
import sys

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


def main() -> None:
    r = redis.Redis.from_url(os.environ.get("REDIS_URL", "redis://localhost:6379"))
    user = sys.argv[1] if len(sys.argv) > 1 else "user123"
    for _ in range(18):
        status, headers = throttle(r, user)
        print(status, " ".join(f"{k}: {v}" for k, v in headers.items()))


if __name__ == "__main__":
    main()
