// Benchmark (not a test): the same Express app under load with each store,
// side by side in one run on one server with the module:
//   express-rate-limit with rate-limit-redis, and with RedisCellStore
//   (fixed, sliding, gcra); rate-limiter-flexible's RateLimiterRedis, and
//   RateLimiterCell / RateLimiterCellGcra, as middleware.
// Prints requests/s (the median of the rounds, the stores alternating in
// each round) and server-side time per hit (INFO commandstats: the usec of
// every command the store sent, over the hits).
//   node bench.mjs [--seconds 3] [--rounds 5] [--connections 50]
// Needs: npm ci, node scripts/build.mjs, and the module (REDIS_CELL_MODULE).
import { fork } from "node:child_process";
import { Agent, request } from "node:http";
import { parseArgs } from "node:util";
import { fileURLToPath } from "node:url";

const STORES = ["rate-limit-redis", "cell-fixed", "cell-sliding", "cell-gcra", "RateLimiterRedis", "RateLimiterCell", "RateLimiterCellGcra"];

if (process.argv[2] === "--app") {
  // The app, in its own process: one store, on a free loopback port.
  const [, , , store, redisPort] = process.argv;
  const { default: express } = await import("express");
  const { rateLimit } = await import("express-rate-limit");
  const { RedisStore } = await import("rate-limit-redis");
  const { RateLimiterRedis } = await import("rate-limiter-flexible");
  const { default: Redis } = await import("ioredis");
  const { RedisCellStore } = await import("./dist/esm/express-rate-limit.js");
  const { RateLimiterCell, RateLimiterCellGcra } = await import("./dist/esm/rate-limiter-flexible.js");
  const redis = new Redis({ host: "127.0.0.1", port: Number(redisPort) });
  const app = express();
  // Limits no client reaches: every hit is allowed, so every store does all its work.
  const limit = 1e9;
  const keyGenerator = (req) => String(req.headers["x-user"]);
  if (store === "rate-limit-redis" || store.startsWith("cell-")) {
    const s =
      store === "rate-limit-redis"
        ? new RedisStore({ sendCommand: (...a) => redis.call(...a), prefix: `b:${store}:` })
        : new RedisCellStore({ client: redis, prefix: `b:${store}:`, algorithm: store.slice(5) });
    app.use(rateLimit({ windowMs: 60_000, limit, store: s, keyGenerator, standardHeaders: "draft-6", legacyHeaders: false, validate: false }));
  } else {
    const L = { RateLimiterRedis, RateLimiterCell, RateLimiterCellGcra }[store];
    const l = new L({ storeClient: redis, keyPrefix: `b:${store}`, points: limit, duration: 60 });
    app.use((req, res, next) =>
      l.consume(keyGenerator(req)).then(() => next(), () => res.status(429).end()),
    );
  }
  app.get("/", (_req, res) => res.send("ok"));
  const server = app.listen(0, "127.0.0.1", () => process.send({ port: server.address().port }));
} else {
  const { values } = parseArgs({ options: { seconds: { type: "string", default: "3" }, rounds: { type: "string", default: "5" }, connections: { type: "string", default: "50" } } });
  const seconds = Number(values.seconds);
  const rounds = Number(values.rounds);
  const connections = Number(values.connections);
  const { startServer } = await import("./tests/servers.mjs");
  const { default: Redis } = await import("ioredis");
  const server = await startServer();
  const admin = new Redis({ host: "127.0.0.1", port: server.port });

  const load = (port) =>
    new Promise((resolve) => {
      const agent = new Agent({ keepAlive: true, maxSockets: connections });
      let done = 0;
      let errors = 0;
      const end = Date.now() + seconds * 1000;
      let running = connections;
      const one = (i) => {
        if (Date.now() >= end) {
          if (--running === 0) {
            agent.destroy();
            resolve({ done, errors });
          }
          return;
        }
        const req = request({ host: "127.0.0.1", port, path: "/", agent, headers: { "x-user": `u${i % 100}` } }, (res) => {
          res.resume();
          res.on("end", () => {
            if (res.statusCode === 200) done++;
            else errors++;
            one(i + connections);
          });
        });
        req.on("error", () => {
          errors++;
          one(i + connections);
        });
        req.end();
      };
      for (let c = 0; c < connections; c++) one(c);
    });

  const commandUsec = async () => {
    const info = await admin.info("commandstats");
    let usec = 0;
    for (const m of info.matchAll(/^cmdstat_([^:]+):calls=(\d+),usec=(\d+)/gm)) {
      if (!["info", "config", "flushall", "ping"].includes(m[1])) usec += Number(m[3]);
    }
    return usec;
  };

  const results = Object.fromEntries(STORES.map((s) => [s, { rps: [], usecPerHit: [] }]));
  for (let r = 0; r < rounds; r++) {
    for (const store of STORES) {
      const child = fork(fileURLToPath(import.meta.url), ["--app", store, String(server.port)], { stdio: "ignore" });
      const { port } = await new Promise((resolve) => child.once("message", resolve));
      await load(port); // warm-up: connections, scripts loaded, JIT
      await admin.flushall();
      await admin.config("RESETSTAT");
      const started = process.hrtime.bigint();
      const { done, errors } = await load(port);
      const secs = Number(process.hrtime.bigint() - started) / 1e9;
      const usec = await commandUsec();
      child.kill();
      if (errors > 0) throw new Error(`${store}: ${errors} requests failed`);
      results[store].rps.push(done / secs);
      results[store].usecPerHit.push(usec / done);
    }
  }
  const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  console.log(`${rounds} rounds of ${seconds} s, ${connections} connections, server ${process.env.REDIS_SERVER ?? "/usr/bin/redis-server"}`);
  console.log("| store | requests/s (median) | server usec per hit (median) | requests/s vs its baseline |");
  console.log("|---|---|---|---|");
  for (const store of STORES) {
    const base = store.startsWith("cell-") || store === "rate-limit-redis" ? "rate-limit-redis" : "RateLimiterRedis";
    const ratio = median(results[store].rps) / median(results[base].rps);
    console.log(`| ${store} | ${median(results[store].rps).toFixed(0)} | ${median(results[store].usecPerHit).toFixed(2)} | ${ratio.toFixed(2)} |`);
  }
  admin.disconnect();
  server.stop();
}
