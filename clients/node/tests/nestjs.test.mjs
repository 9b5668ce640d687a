import "reflect-metadata";
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { Controller, Get, Module } from "@nestjs/common";
import { APP_GUARD, NestFactory } from "@nestjs/core";
import { ExpressAdapter } from "@nestjs/platform-express";
import { FastifyAdapter } from "@nestjs/platform-fastify";
import { ThrottlerGuard, ThrottlerModule, ThrottlerStorageService } from "@nestjs/throttler";
import { Cell } from "../dist/esm/index.js";
import { ModuleOnlyError, RedisCellThrottlerStorage } from "../dist/esm/nestjs.js";
import { CLIENTS, clientsInUse, clusterTests, engines } from "./clients.mjs";
import { delta, operator } from "./operator.mjs";
import { burst, count } from "./http.mjs";

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** A NestJS app with one throttled route, decorated by hand (plain JavaScript). */
async function nestApp(storage, adapter, throttlers) {
  class AppController {
    hello() {
      return "ok";
    }
  }
  Controller()(AppController);
  Get("/")(AppController.prototype, "hello", Object.getOwnPropertyDescriptor(AppController.prototype, "hello"));
  class AppModule {}
  Module({
    imports: [ThrottlerModule.forRoot({ throttlers, storage })],
    controllers: [AppController],
    providers: [{ provide: APP_GUARD, useClass: ThrottlerGuard }],
  })(AppModule);
  const app = await NestFactory.create(AppModule, adapter === "fastify" ? new FastifyAdapter() : new ExpressAdapter(), {
    logger: false,
  });
  await app.listen(0, "127.0.0.1");
  const url = (await app.getUrl()).replace("[::1]", "127.0.0.1").replace("localhost", "127.0.0.1");
  return { url, close: () => app.close() };
}

let servers;
before(async () => (servers = await engines()));
after(() => servers.forEach((s) => s.server.stop()));

describe("the storage answers as the in-memory ThrottlerStorageService", () => {
  // Calls and pauses placed well away from every expiry (ttl 1 s), so that
  // the server's clock and the process's agree on each answer.
  const scenarios = {
    "block as long as ttl (the default)": { limit: 2, ttl: 1000, block: 1000, steps: [0, 0, 0, 0, 1300, 0, 0, 0] },
    "block longer than ttl": { limit: 2, ttl: 1000, block: 2500, steps: [0, 0, 0, 0, 1300, 0, 1500, 0, 0] },
    "block shorter than ttl: its hits are forgotten": { limit: 2, ttl: 1000, block: 300, steps: [0, 0, 0, 0, 500, 0, 0, 0] },
    "no block": { limit: 2, ttl: 1000, block: 0, steps: [0, 0, 0, 0, 1300, 0, 0, 0] },
  };
  for (const [title, s] of Object.entries(scenarios)) {
    test(title, async () => {
      await Promise.all(
        servers.map(async ({ engine, server }) => {
          const { client, close } = await CLIENTS.ioredis.single(server.port);
          const ours = new RedisCellThrottlerStorage(client, { prefix: `diff:${title}:` });
          const memory = new ThrottlerStorageService();
          try {
            for (const [i, pause] of s.steps.entries()) {
              if (pause) await sleep(pause);
              const [m, o] = await Promise.all([
                memory.increment("k", s.ttl, s.limit, s.block, "default"),
                ours.increment("k", s.ttl, s.limit, s.block, "default"),
              ]);
              const at = `${engine}, call ${i}: memory ${JSON.stringify(m)}, ours ${JSON.stringify(o)}`;
              assert.equal(o.totalHits, m.totalHits, at);
              assert.equal(o.isBlocked, m.isBlocked, at);
              assert.equal(o.timeToExpire, m.timeToExpire, at);
              // Before any block the in-memory answer is ceil((0 - now) / 1000):
              // the two clocks may straddle a second there.
              assert.ok(Math.abs(o.timeToBlockExpire - m.timeToBlockExpire) <= 1, at);
              if (m.isBlocked) assert.equal(o.timeToBlockExpire, m.timeToBlockExpire, at);
            }
          } finally {
            memory.onApplicationShutdown();
            await close();
          }
        }),
      );
    });
  }
});

const clientNames = clientsInUse();
for (const adapter of ["express", "fastify"]) {
  for (const name of clientNames) {
    test(`NestJS (${adapter}) with ${name}: two instances, exact 200s and 429s, headers, block`, async () => {
      for (const { engine, server } of servers) {
        const { client, close } = await CLIENTS[name].single(server.port);
        const storage = () => new RedisCellThrottlerStorage(client, { prefix: `nest:${adapter}:${name}:${engine}:` });
        const throttlers = [{ ttl: 60_000, limit: 5 }];
        const a = await nestApp(storage(), adapter, throttlers);
        const b = await nestApp(storage(), adapter, throttlers);
        try {
          const res = await burst([a.url, b.url], 16);
          assert.equal(count(res, 200), 5, `${engine}: 5 of 16 pass`);
          assert.equal(count(res, 429), 11);
          const ok = res.filter((r) => r.status === 200);
          assert.deepEqual(ok.map((r) => Number(r.headers.get("x-ratelimit-remaining"))).sort(), [0, 1, 2, 3, 4]);
          for (const r of ok) {
            assert.equal(r.headers.get("x-ratelimit-limit"), "5");
            assert.equal(r.headers.get("x-ratelimit-reset"), "60");
          }
          for (const r of res.filter((r) => r.status === 429)) {
            const retry = Number(r.headers.get("retry-after"));
            assert.ok(retry >= 59 && retry <= 60, `Retry-After ${retry}`);
          }
        } finally {
          await a.close();
          await b.close();
          await close();
        }
      }
    });
  }
}

test("NestJS: the block ends and the client is back (both adapters)", async () => {
  for (const { engine, server } of servers) {
    const { client, close } = await CLIENTS.ioredis.single(server.port);
    await Promise.all(
      ["express", "fastify"].map(async (adapter) => {
        const a = await nestApp(new RedisCellThrottlerStorage(client, { prefix: `end:${adapter}:${engine}:` }), adapter, [
          { ttl: 800, limit: 2, blockDuration: 800 },
        ]);
        try {
          const first = await burst([a.url], 5);
          assert.equal(count(first, 200), 2);
          await sleep(1200);
          assert.equal(count(await burst([a.url], 3), 200), 2);
        } finally {
          await a.close();
        }
      }),
    );
    await close();
  }
});

clusterTests("NestJS on a cluster", async ({ name, engine, client }) => {
  const mk = () => new RedisCellThrottlerStorage(client, { prefix: `cn:${name}:${engine}:` });
  const a = await nestApp(mk(), "express", [{ ttl: 60_000, limit: 3 }]);
  const b = await nestApp(mk(), "fastify", [{ ttl: 60_000, limit: 3 }]);
  try {
    const res = await burst([a.url, b.url], 9);
    assert.equal(count(res, 200), 3, engine);
    assert.equal(count(res, 429), 6);
  } finally {
    await a.close();
    await b.close();
  }
});

/** The hits of a storage's key that its sliding window holds (SW.PEEK, either engine). */
async function hitsHeld(client, key) {
  const d = await new Cell(client).swPeek(key, 10_000, "60000ms", { ms: true });
  return 10_000 - d.remaining;
}

for (const name of clientNames) {
  for (const [mode, block] of [["the default block (as long as ttl)", 60_000], ["no block", 0]]) {
    test(`${mode}, ${name}: 15 hits at a limit of 10 are 5 refusals in INFO and CL.TOP, with the in-memory storage's answers and hits`, async () => {
      for (const { engine, server } of servers) {
        const { client, close } = await CLIENTS[name].single(server.port);
        const op = await operator(server.port);
        const prefix = `op:${name}:${engine}:${block}:`;
        const ours = new RedisCellThrottlerStorage(client, { prefix });
        const memory = new ThrottlerStorageService();
        try {
          const run = async () => {
            for (let i = 0; i < 15; i++) {
              const [m, o] = await Promise.all([
                memory.increment("k", 60_000, 10, block, "default"),
                ours.increment("k", 60_000, 10, block, "default"),
              ]);
              const at = `${engine}, hit ${i + 1}: memory ${JSON.stringify(m)}, ours ${JSON.stringify(o)}`;
              assert.equal(o.totalHits, m.totalHits, at);
              assert.equal(o.isBlocked, m.isBlocked, at);
              assert.equal(o.isBlocked, i >= 10, at);
              assert.equal(o.timeToExpire, m.timeToExpire, at);
              assert.ok(Math.abs(o.timeToBlockExpire - m.timeToBlockExpire) <= 1, at);
            }
          };
          if (engine === "module") assert.equal(await delta(op, "sw_allow_limited", run), 5, "sw_allow_limited grew by 5");
          else await run();
          const hits = `${prefix}{k}:default:hits`;
          if (engine === "module") assert.deepEqual(await op.top(hits), [hits, 5, 0, 0], "CL.TOP");
          // The hits each live ttl: those the in-memory storage keeps, and the key expires with the last.
          assert.equal(await hitsHeld(client, hits), memory.hitExpirations.get("k").get("default").length);
          const ttl = await op.client.pttl(hits);
          assert.ok(ttl > 55_000 && ttl <= 60_000, `PTTL ${ttl}`);
        } finally {
          memory.onApplicationShutdown();
          await op.close();
          await close();
        }
      }
    });
  }

  test(`recipes, ${name}: the NestJS app's limit changed live, a stricter limit on trial, promoted`, async () => {
    const { server } = servers.find((s) => s.engine === "module");
    const { client, close } = await CLIENTS[name].single(server.port);
    const op = await operator(server.port);
    const policy = `nest-${name}`;
    const prefix = `live:${name}:`;
    // The throttler named "default" goes through the policy.
    const a = await nestApp(new RedisCellThrottlerStorage(client, { prefix, policy: { default: policy } }), "express", [{ ttl: 60_000, limit: 3 }]);
    const statuses = async (n) => {
      const out = [];
      for (let i = 0; i < n; i++) out.push((await burst([a.url], 1))[0].status);
      return out;
    };
    try {
      // No such policy yet: the app's own 3 a minute.
      assert.deepEqual(await statuses(2), [200, 200]);
      const [hits] = await op.client.keys(`${prefix}*:hits`);
      // Raised to 10 while the app runs: its 4th and 5th requests pass.
      await op.policy("SET", policy, "SW", 10, "1m");
      assert.deepEqual(await statuses(3), [200, 200, 200]);
      // A stricter limit on trial: nobody is refused; CL.TOP shows whom it would refuse.
      await op.policy("SET", policy, "SW", 10, "1m", "TRIAL", "SW", 2, "1m");
      assert.deepEqual(await statuses(3), [200, 200, 200]);
      assert.deepEqual(await op.top(hits, { policy, trial: true }), [hits, 1, 0, 1], "CL.TOP POLICY name TRIAL");
      // Promoted: the trial's 2 a minute is enforced at once (and blocks, as @nestjs/throttler's own limit does).
      await op.policy("PROMOTE", policy);
      assert.deepEqual(await statuses(2), [429, 429]);
      assert.deepEqual(await op.top(hits, { policy }), [hits, 2, 0, 0]);
    } finally {
      await a.close();
      await op.policy("DEL", policy).catch(() => {});
      await op.close();
      await close();
    }
  });
}

test("a policy: checked names, per throttler, and the module's engine", async () => {
  const fake = { send: async () => null, transaction: async () => [], masters: async () => [], cluster: false };
  assert.throws(() => new RedisCellThrottlerStorage(fake, { policy: "a:b" }), TypeError);
  assert.throws(() => new RedisCellThrottlerStorage(fake, { policy: { default: "ok", login: "not ok" } }), /login/);
  assert.throws(() => new RedisCellThrottlerStorage(fake, { policy: "api", engine: "functions" }), ModuleOnlyError);
  const twin = servers.find((s) => s.engine === "functions");
  if (twin) {
    const { client, close } = await CLIENTS.ioredis.single(twin.server.port);
    try {
      const s = new RedisCellThrottlerStorage(client, { prefix: "twin-policy:", policy: { login: "api" } });
      // A throttler the object does not name has no policy.
      assert.equal((await s.increment("k", 1000, 2, 0, "default")).totalHits, 1);
      await assert.rejects(s.increment("k", 1000, 2, 0, "login"), ModuleOnlyError);
    } finally {
      await close();
    }
  }
});
