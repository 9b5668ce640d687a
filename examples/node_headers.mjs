// Rate-limit an HTTP request with CL.THROTTLE from Node.js (ioredis).
// npm install ioredis; REDIS_URL=redis://localhost:6379 node examples/node_headers.mjs [user]
//
// Where the server has no redis-cell module (a managed service), the same
// code runs on the Functions twin in functions/: cell() below picks the
// module's commands or the twin's functions once, with the same replies.
import { readFile } from "node:fs/promises";
import Redis from "ioredis";

const TWIN = new URL("../functions/", import.meta.url);

// Returns call(command, ...args), to create once, for redis-cell's commands
// written as for the module (call("CL.THROTTLE", key, 15, 30, 60)): the
// module's command where the server has it, otherwise the Functions twin,
// loaded if absent (FCALL; EVALSHA before Redis 7.0).
export async function cell(redis) {
  const [info] = await redis.call("COMMAND", "INFO", "CL.THROTTLE");
  if (info) return (command, ...args) => redis.call(command, ...args);
  // CL.THROTTLEALL numkeys key...; every other command: one key.
  const split = (command, args) => {
    const n = command.toUpperCase() === "CL.THROTTLEALL" ? Number(args.shift()) : 1;
    return [args.slice(0, n), args.slice(n)];
  };
  try {
    const libraries = await redis.call("FUNCTION", "LIST", "LIBRARYNAME", "redis_cell");
    if (libraries.length === 0) {
      await redis.call("FUNCTION", "LOAD", await readFile(new URL("redis_cell.lua", TWIN), "utf8"));
    }
    return (command, ...args) => {
      const [keys, rest] = split(command, args);
      return redis.call("FCALL", command.toLowerCase().replace(".", "_"), keys.length, ...keys, ...rest);
    };
  } catch (e) {
    if (!String(e.message).includes("unknown command")) throw e;
  }
  const sha = await redis.call("SCRIPT", "LOAD", await readFile(new URL("redis_cell_eval.lua", TWIN), "utf8"));
  return (command, ...args) => {
    const [keys, rest] = split(command, args);
    return redis.call("EVALSHA", sha, keys.length, ...keys, command.toLowerCase(), ...rest);
  };
}

// One request of `user`: 15 requests per minute, bursts of up to 16.
export async function throttle(call, user) {
  const [limited, limit, remaining, retryAfter, resetAfter] = await call(
    "CL.THROTTLE", `rl:${user}`, 15, 15, 60, 1,
  );
  const headers = {
    "RateLimit-Limit": String(limit),
    "RateLimit-Remaining": String(remaining),
    "RateLimit-Reset": String(resetAfter),
  };
  if (limited === 1) {
    headers["Retry-After"] = String(retryAfter);
    return { status: 429, headers };
  }
  return { status: 200, headers };
}

// In an HTTP handler:
//   const { status, headers } = await throttle(call, req.user.id);
//   res.writeHead(status, headers); if (status === 429) return res.end("Too Many Requests");
const redis = new Redis(process.env.REDIS_URL ?? "redis://localhost:6379");
const call = await cell(redis);
for (let i = 0; i < 18; i++) {
  const { status, headers } = await throttle(call, process.argv[2] ?? "user123");
  console.log(status, Object.entries(headers).map(([k, v]) => `${k}: ${v}`).join(" "));
}
redis.disconnect();
