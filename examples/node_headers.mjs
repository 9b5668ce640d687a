// Rate-limit an HTTP request with CL.THROTTLE from Node.js (ioredis).
// npm install ioredis; REDIS_URL=redis://localhost:6379 node examples/node_headers.mjs
import Redis from "ioredis";

const redis = new Redis(process.env.REDIS_URL ?? "redis://localhost:6379");

// One request of `user`: 15 requests per minute, bursts of up to 16.
export async function throttle(user) {
  const [limited, limit, remaining, retryAfter, resetAfter] = await redis.call(
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
//   const { status, headers } = await throttle(req.user.id);
//   res.writeHead(status, headers); if (status === 429) return res.end("Too Many Requests");
for (let i = 0; i < 18; i++) console.log(await throttle("user123"));
redis.disconnect();
