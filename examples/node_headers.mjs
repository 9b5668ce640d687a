// Rate-limit an HTTP request with CL.THROTTLE from Node.js (ioredis), through
// the redis-cell package (clients/node).
// npm install ioredis redis-cell; REDIS_URL=redis://localhost:6379 node examples/node_headers.mjs [user]
//
// Where the server has no redis-cell module (a managed service), the same
// code runs on the Functions twin in functions/: the package picks the
// module's commands or the twin's functions once, with the same replies.
import Redis from "ioredis";
import { Cell, EngineError, loadFunctions } from "redis-cell";

// The module's commands where the server has them; otherwise the twin,
// loaded here if absent (FUNCTION LOAD: Redis 7.0+ and Valkey), or run as
// one EVAL script where the server has no Functions (Redis 6.2).
// A user that may not call COMMAND (the README's ACL recipe) names the
// engine instead: REDIS_CELL_ENGINE=module (or functions).
export async function connect(redis) {
  const engine = process.env.REDIS_CELL_ENGINE;
  if (engine) return new Cell(redis, { engine });
  const cell = new Cell(redis);
  try {
    await cell.engine();
  } catch (e) {
    if (!(e instanceof EngineError)) throw e;
    try {
      await loadFunctions(redis);
    } catch (e) {
      // No FUNCTION before Redis 7.0: the twin as one EVAL script.
      if (!String(e?.message).includes("unknown command")) throw e;
      return new Cell(redis, { engine: "eval" });
    }
  }
  return cell;
}

// One request of `user`: 15 requests per minute, bursts of up to 16.
export async function throttle(cell, user) {
  const d = await cell.throttle(`rl:${user}`, { maxBurst: 15, countPerPeriod: 15, period: 60 });
  const headers = {
    "RateLimit-Limit": String(d.limit),
    "RateLimit-Remaining": String(d.remaining),
    "RateLimit-Reset": String(d.resetAfter),
  };
  if (d.limited) {
    headers["Retry-After"] = String(d.retryAfter);
    return { status: 429, headers };
  }
  return { status: 200, headers };
}

// In an HTTP handler:
//   const { status, headers } = await throttle(cell, req.user.id);
//   res.writeHead(status, headers); if (status === 429) return res.end("Too Many Requests");
const redis = new Redis(process.env.REDIS_URL ?? "redis://localhost:6379");
const cell = await connect(redis);
for (let i = 0; i < 18; i++) {
  const { status, headers } = await throttle(cell, process.argv[2] ?? "user123");
  console.log(status, Object.entries(headers).map(([k, v]) => `${k}: ${v}`).join(" "));
}
redis.disconnect();
