"""Rate-limit HTTP requests from Python (redis-py) with redis-cell.

Usage: REDIS_URL=redis://localhost:6379 python3 examples/python_headers.py [user] [mode]

Where the server has no redis-cell module (a managed service), the same code
runs on the Functions twin in functions/: `cell()` below picks the module's
commands or the twin's functions once, with the same replies.

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

TWIN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "functions")


def cell(r: redis.Redis):
    """Returns call(command, *args), to create once, for redis-cell's
    commands written as for the module (`call("CL.THROTTLE", key, 15, 30,
    60)`): the module's command where the server has it, otherwise the
    Functions twin, loaded if absent (FCALL; EVALSHA before Redis 7.0).
    The replies are the same either way."""
    if r.execute_command("COMMAND INFO", "CL.THROTTLE")[0] is not None:
        return r.execute_command

    def keys_of(command, args):
        # CL.THROTTLEALL numkeys key...; every other command: one key.
        if command.upper() == "CL.THROTTLEALL":
            n = int(args[0])
            return args[1:1 + n], args[1 + n:]
        return args[:1], args[1:]

    try:
        if not r.execute_command("FUNCTION LIST", "LIBRARYNAME", "redis_cell"):
            with open(os.path.join(TWIN, "redis_cell.lua")) as f:
                r.execute_command("FUNCTION LOAD", f.read())

        def fcall(command, *args):
            keys, rest = keys_of(command, args)
            return r.execute_command("FCALL", command.lower().replace(".", "_"), len(keys), *keys, *rest)
        return fcall
    except redis.ResponseError as e:
        if "unknown command" not in str(e):
            raise
    with open(os.path.join(TWIN, "redis_cell_eval.lua")) as f:
        script = r.register_script(f.read())

    def evalsha(command, *args):
        keys, rest = keys_of(command, args)
        return script(keys=keys, args=[command.lower(), *rest])
    return evalsha


def throttle(call, user: str) -> tuple[int, dict[str, str]]:
    """Returns (status, headers) for one request of `user`:
    15 requests per minute, bursts of up to 16."""
    limited, limit, remaining, retry_after, reset_after = call(
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


def throttle_tiered(call, user: str) -> tuple[int, dict[str, str]]:
    """Two limits at once, all or nothing: 5 per second (bursts of 5) and
    8 per day (calendar days, UTC). Durations come in milliseconds (MS);
    the headers round them up to whole seconds, so that a client that
    waits Retry-After is never early. The reply's last field says which
    limit bound."""
    limited, limit, remaining, retry_ms, reset_ms, index = call(
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


def call_when_allowed(call, api: str, request):
    """Waits for a slot of `api` (100 calls per second, no burst, at most
    1 s of waiting) and then calls it; returns (waited ms, result), or None
    when no slot comes within a second."""
    limited, _limit, _remaining, wait_ms, _reset = call(
        "CL.RESERVE", f"rl:api:{api}", 0, 100, 1, "MAXWAIT", 1, "MS"
    )
    if limited:
        return None
    waited = max(wait_ms, 0)
    if waited:
        time.sleep(waited / 1000)
    return waited, request()


def main() -> None:
    call = cell(redis.Redis.from_url(os.environ.get("REDIS_URL", "redis://localhost:6379")))
    user = sys.argv[1] if len(sys.argv) > 1 else "user123"
    mode = sys.argv[2] if len(sys.argv) > 2 else "headers"
    if mode == "headers":
        for _ in range(18):
            status, headers = throttle(call, user)
            print(status, " ".join(f"{k}: {v}" for k, v in headers.items()))
    elif mode == "tiered":
        for _ in range(7):
            status, headers = throttle_tiered(call, user)
            print(status, " ".join(f"{k}: {v}" for k, v in headers.items()))
    elif mode == "worker":
        for i in range(10):
            waited, result = call_when_allowed(call, user, lambda: f"response {i}")
            print(f"waited {waited} ms, got {result}")
    else:
        sys.exit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    main()
