import assert from "node:assert/strict";
import { createServer } from "node:http";
import { after, before, describe, test } from "node:test";
import express from "express";
import { rateLimit } from "express-rate-limit";
import { RedisStore } from "rate-limit-redis";
import { ModuleOnlyError, RedisCellStore } from "../dist/esm/express-rate-limit.js";
import { CLIENTS, clientsInUse, clusterTests, engines } from "./clients.mjs";
import { burst, count, listen } from "./http.mjs";
import { delta, operator, sameState } from "./operator.mjs";


/** One app instance: express-rate-limit with our store, on its own port. */
async function app(store, limit, windowMs, extra = {}) {
  const a = express();
  a.use(rateLimit({ windowMs, limit, store, standardHeaders: "draft-6", legacyHeaders: false, ...extra }));
  a.get("/", (_req, res) => res.send("ok"));
  a.get("/fail", (_req, res) => res.status(500).send("no"));
  const server = createServer(a);
  return { url: await listen(server), close: () => server.close() };
}

const sendCommandOf = (name, client) =>
  name === "ioredis" ? (...args) => client.call(...args) : (...args) => client.sendCommand(args);

let servers;
before(async () => (servers = await engines()));
after(() => servers.forEach((s) => s.server.stop()));

const clientNames = clientsInUse();
for (const name of clientNames) {
  for (const algorithm of ["fixed", "sliding", "gcra"]) {
    describe(`express-rate-limit, ${algorithm}, ${name}`, () => {
      test("two instances sharing one server: exact 200s and 429s, headers, reset", async () => {
        for (const { engine, server } of servers) {
          const { client, close } = await CLIENTS[name].single(server.port);
          const prefix = `erl:${name}:${algorithm}:${engine}:`;
          const mk = () => new RedisCellStore({ sendCommand: sendCommandOf(name, client), prefix, algorithm });
          const [a, b] = [await app(mk(), 7, 60_000), await app(mk(), 7, 60_000)];
          try {
            const res = await burst([a.url, b.url], 20);
            assert.equal(count(res, 200), 7, `${engine}: 7 of 20 concurrent requests pass`);
            assert.equal(count(res, 429), 13);
            for (const r of res) {
              assert.equal(r.headers.get("ratelimit-limit"), "7");
              const reset = Number(r.headers.get("ratelimit-reset"));
              assert.ok(reset > 0 && reset <= 60, `reset ${reset}`);
            }
            const remaining = res.filter((r) => r.status === 200).map((r) => Number(r.headers.get("ratelimit-remaining")));
            assert.deepEqual(remaining.sort((x, y) => x - y), [0, 1, 2, 3, 4, 5, 6]);
            const refused = res.find((r) => r.status === 429);
            assert.equal(refused.headers.get("ratelimit-remaining"), "0");
            const retry = Number(refused.headers.get("retry-after"));
            // The fixed window and the exact window free their first slot when
            // the window ends; GCRA frees one every windowMs / limit.
            if (algorithm === "gcra") assert.ok(retry >= 1 && retry <= 9, `retry-after ${retry}`);
            else assert.ok(retry > 50 && retry <= 60, `retry-after ${retry}`);
            // resetKey through the middleware frees the client at once.
            const store = mk();
            store.init({ windowMs: 60_000, limit: 7 });
            const keys = await client.keys?.(`${prefix}*`) ?? (await client.sendCommand(["KEYS", `${prefix}*`]));
            assert.equal(keys.length, 1);
            const key = keys[0].slice(prefix.length);
            assert.equal((await store.get(key)).totalHits, algorithm === "fixed" ? 20 : 7);
            await store.resetKey(key);
            assert.equal(await store.get(key), undefined);
            assert.equal(count(await burst([a.url, b.url], 3), 200), 3);
          } finally {
            a.close();
            b.close();
            await close();
          }
        }
      });
    });
  }
}

test("a window that ends lets the client in again, with the reset from the server", async () => {
  for (const { engine, server } of servers) {
    const { client, close } = await CLIENTS.ioredis.single(server.port);
    await Promise.all(
      ["fixed", "sliding", "gcra"].map(async (algorithm) => {
        const store = new RedisCellStore({ client, prefix: `short:${engine}:${algorithm}:`, algorithm });
        const a = await app(store, 2, 1000);
        try {
          const first = await burst([a.url], 4);
          assert.equal(count(first, 200), 2);
          const wait = Number(first.find((r) => r.status === 429).headers.get("retry-after"));
          assert.equal(wait, 1, `${algorithm}: Retry-After`);
          await new Promise((r) => setTimeout(r, 1200));
          assert.equal(count(await burst([a.url], 2), 200), 2);
        } finally {
          a.close();
        }
      }),
    );
    await close();
  }
});

test("skipFailedRequests decrements, never below zero, keeping the window's expiry", async () => {
  for (const { engine, server } of servers) {
    const { client, close } = await CLIENTS.ioredis.single(server.port);
    const prefix = `skip:${engine}:`;
    const store = new RedisCellStore({ client, prefix });
    const a = await app(store, 3, 60_000, { skipFailedRequests: true });
    try {
      // One at a time: each is given back when its response has finished.
      for (let i = 0; i < 5; i++) assert.equal((await burst([a.url], 1, "/fail"))[0].status, 500, "failed requests are given back");
      assert.equal(count(await burst([a.url], 5), 200), 3);
      const [key] = await client.keys(`${prefix}*`);
      const ttl = await client.pttl(key);
      assert.ok(ttl > 50_000 && ttl <= 60_000, `ttl ${ttl}`);
      // A decrement keeps the window's end; at zero FW.REFUND deletes the
      // key (a count of zero), and more decrements never go below it.
      await store.decrement(key.slice(prefix.length));
      // Five hits, the two 429s given back too (status >= 400), one more now.
      assert.equal(await client.get(key), "2");
      assert.equal(await client.pttl(key) <= ttl, true);
      assert.ok((await client.pttl(key)) > ttl - 5_000);
      for (let i = 0; i < 6; i++) await store.decrement(key.slice(prefix.length));
      assert.equal(await client.get(key), null);
      await store.decrement(key.slice(prefix.length));
      assert.equal(await client.get(key), null);
      assert.equal(await store.get(key.slice(prefix.length)), undefined);
    } finally {
      a.close();
    }
    await close();
  }
});

test("counts carry over from rate-limit-redis's keys", async () => {
  for (const { engine, server } of servers) {
    const { client, close } = await CLIENTS.ioredis.single(server.port);
    const prefix = `carry:${engine}:`;
    const old = await app(new RedisStore({ sendCommand: (...args) => client.call(...args), prefix }), 5, 60_000);
    const ours = await app(new RedisCellStore({ sendCommand: (...args) => client.call(...args), prefix }), 5, 60_000);
    try {
      assert.equal(count(await burst([old.url], 3), 200), 3);
      const res = await burst([ours.url], 4);
      assert.equal(count(res, 200), 2, "two left of five after rate-limit-redis's three");
    } finally {
      old.close();
      ours.close();
    }
    await close();
  }
});

test("the fixed store's key expires as rate-limit-redis's does: its PTTL never above windowMs", async () => {
  for (const { engine, server } of servers) {
    const { client, close } = await CLIENTS.ioredis.single(server.port);
    try {
      const sendCommand = (...args) => client.call(...args);
      const stores = {
        "rate-limit-redis": new RedisStore({ sendCommand, prefix: `ttl:${engine}:redis:` }),
        RedisCellStore: new RedisCellStore({ sendCommand, prefix: `ttl:${engine}:cell:` }),
      };
      for (const store of Object.values(stores)) await store.init({ windowMs: 60_000, limit: 5 });
      for (const [who, store] of Object.entries(stores)) {
        // Many keys, each read at once: some reads fall in the millisecond of the increment.
        const ttls = [];
        for (let i = 0; i < 40; i++) {
          await store.increment(`k${i}`);
          ttls.push(await client.pttl(`${store.prefix}k${i}`));
        }
        assert.ok(Math.max(...ttls) <= 60_000 && Math.min(...ttls) > 59_000, `${engine}, ${who}: ${ttls.join(" ")}`);
      }
    } finally {
      await close();
    }
  }
});

test("resetExpiryOnChange: true is refused with the reason; false is accepted", () => {
  assert.throws(() => new RedisCellStore({ sendCommand: async () => null, resetExpiryOnChange: true }), /sliding/);
  new RedisCellStore({ sendCommand: async () => null, resetExpiryOnChange: false });
  assert.throws(() => new RedisCellStore({}), /exactly one of/);
});

clusterTests("express-rate-limit on a cluster", async ({ name, engine, client }) => {
  for (const algorithm of ["fixed", "sliding", "gcra"]) {
    const mk = () =>
      name === "ioredis"
        ? new RedisCellStore({ client, prefix: `c:${name}:${engine}:${algorithm}:`, algorithm })
        : new RedisCellStore({
            sendCommandCluster: ({ key, isReadOnly, command }) => client.sendCommand(key, isReadOnly, command),
            prefix: `c:${name}:${engine}:${algorithm}:`,
            algorithm,
          });
    const [a, b] = [await app(mk(), 4, 60_000), await app(mk(), 4, 60_000)];
    try {
      const res = await burst([a.url, b.url], 10);
      assert.equal(count(res, 200), 4, `${engine} ${algorithm}`);
      assert.equal(count(res, 429), 6);
    } finally {
      a.close();
      b.close();
    }
  }
});

/** The status of each of `n` requests sent one after another. */
async function oneByOne(url, n) {
  const out = [];
  for (let i = 0; i < n; i++) out.push((await burst([url], 1))[0]);
  return out;
}

/** The one key a prefix has on the server. */
async function onlyKey(op, prefix) {
  const keys = await op.client.keys(`${prefix}*`);
  assert.equal(keys.length, 1, `one key under ${prefix}: ${keys.join(" ")}`);
  return keys[0];
}

for (const name of clientNames) {
  test(`fixed, ${name}: 15 requests at a limit of 10 are 5 refusals in INFO and CL.TOP, with rate-limit-redis's value and TTL`, async () => {
    for (const { engine, server } of servers) {
      const { client, close } = await CLIENTS[name].single(server.port);
      const op = await operator(server.port);
      const sendCommand = sendCommandOf(name, client);
      const prefix = { cell: `op:${name}:${engine}:cell:`, redis: `op:${name}:${engine}:redis:` };
      const ours = await app(new RedisCellStore({ sendCommand, prefix: prefix.cell }), 10, 60_000);
      const theirs = await app(new RedisStore({ sendCommand, prefix: prefix.redis }), 10, 60_000);
      try {
        const opened = [];
        const run = async () => {
          for (const a of [ours, theirs]) {
            opened.push(Date.now());
            const res = await burst([a.url], 15);
            assert.equal(count(res, 200), 10, engine);
            assert.equal(count(res, 429), 5, engine);
          }
        };
        if (engine === "module") assert.equal(await delta(op, "fw_incr_limited", run), 5, "fw_incr_limited grew by 5");
        else await run();
        const key = await onlyKey(op, prefix.cell);
        if (engine === "module") assert.deepEqual(await op.top(key), [key, 5, 0, 0], "CL.TOP");
        sameState(await op.state(key), await op.state(await onlyKey(op, prefix.redis)), 60_000, `${engine}, ${name}`, opened[1] - opened[0]);
        assert.equal((await op.state(key)).value, "15");
      } finally {
        ours.close();
        theirs.close();
        await op.close();
        await close();
      }
    }
  });
}

test("a limit that is a function of the request: the store cannot know it, the server refuses nothing", async () => {
  const { server } = servers.find((s) => s.engine === "module");
  const { client, close } = await CLIENTS.ioredis.single(server.port);
  const op = await operator(server.port);
  const prefix = "op:fn:";
  const a = await app(new RedisCellStore({ client, prefix }), () => 10, 60_000);
  try {
    const grew = await delta(op, "fw_incr_limited", async () => assert.equal(count(await burst([a.url], 15), 429), 5));
    assert.equal(grew, 0, "express-rate-limit refused 5, the server none");
    const key = await onlyKey(op, prefix);
    assert.equal(await op.top(key), undefined);
    assert.equal((await op.state(key)).value, "15");
    // The store's limit option gives it the limit again.
    const b = await app(new RedisCellStore({ client, prefix: "op:fn2:", limit: 10 }), () => 10, 60_000);
    try {
      assert.equal(await delta(op, "fw_incr_limited", async () => assert.equal(count(await burst([b.url], 15), 429), 5)), 5);
    } finally {
      b.close();
    }
  } finally {
    a.close();
    await op.close();
    await close();
  }
});

for (const name of clientNames) {
  test(`recipes, ${name}: the Express app's limit changed live, a stricter limit on trial, promoted`, async () => {
    const { server } = servers.find((s) => s.engine === "module");
    const { client, close } = await CLIENTS[name].single(server.port);
    const op = await operator(server.port);
    const policy = `express-${name}`;
    const prefix = `live:${name}:`;
    const a = await app(new RedisCellStore({ sendCommand: sendCommandOf(name, client), prefix, policy }), 10, 60_000);
    const statuses = async (n) => (await oneByOne(a.url, n)).map((r) => r.status);
    try {
      // No such policy yet: the app's own 10 a minute.
      assert.deepEqual(await statuses(2), [200, 200]);
      const key = await onlyKey(op, prefix);
      // Lowered to 3 while the app runs: its next request is the third of 3.
      assert.equal(await op.policy("SET", policy, "FW", 3, "1m"), "OK");
      const [third, fourth] = await oneByOne(a.url, 2);
      assert.equal(third.status, 200);
      assert.equal(third.headers.get("ratelimit-remaining"), "0", "the policy's remaining");
      assert.equal(fourth.status, 429);
      // Raised to 20: the same key's count (5 hits, every one counted) is under it.
      await op.policy("SET", policy, "FW", 20, "1m");
      assert.deepEqual(await statuses(1), [200]);
      // A stricter limit on trial: nobody is refused; CL.TOP shows whom it would refuse.
      await op.policy("SET", policy, "FW", 20, "1m", "TRIAL", "FW", 2, "1m");
      assert.deepEqual(await statuses(4), [200, 200, 200, 200]);
      assert.deepEqual(await op.top(key, { policy, trial: true }), [key, 2, 0, 2], "CL.TOP POLICY name TRIAL");
      assert.deepEqual(await op.top(key, { policy }), [key, 1, 0, 0], "the trial refused nobody: only the refusal under 3");
      // Promoted: the trial's limit is enforced at once.
      await op.policy("PROMOTE", policy);
      assert.deepEqual(await statuses(1), [429]);
      assert.deepEqual(await op.top(key, { policy }), [key, 2, 0, 0]);
      // The value is what rate-limit-redis would hold: every request counted.
      assert.equal((await op.state(key)).value, "10");
      // Deleted: the app's own 10 again, over which the key's 11th request is.
      await op.policy("DEL", policy);
      assert.deepEqual(await statuses(1), [429]);
    } finally {
      a.close();
      await op.policy("DEL", policy).catch(() => {});
      await op.close();
      await close();
    }
  });
}

test("a policy: a checked name, a store that knows its limit, and the module's engine", async () => {
  assert.throws(() => new RedisCellStore({ sendCommand: async () => null, policy: "no:colons" }), TypeError);
  assert.throws(() => new RedisCellStore({ sendCommand: async () => null, policy: "api", engine: "functions" }), ModuleOnlyError);
  assert.throws(() => new RedisCellStore({ sendCommand: async () => null, policy: "api", engine: "eval" }), /no policies/);
  const store = new RedisCellStore({ sendCommand: async () => null, policy: "api" });
  assert.throws(() => store.init({ windowMs: 1000, limit: () => 5 }), /needs the limit as a number/);
  await assert.rejects(store.increment("k"), /needs the limit as a number/);
  const twin = servers.find((s) => s.engine === "functions");
  if (twin) {
    // Detected, not given: the first call says so, and sends nothing.
    const { client, close } = await CLIENTS.ioredis.single(twin.server.port);
    try {
      const s = new RedisCellStore({ client, prefix: "twin-policy:", policy: () => "api" });
      s.init({ windowMs: 1000, limit: 5 });
      await assert.rejects(s.increment("k"), ModuleOnlyError);
      assert.deepEqual(await client.keys("twin-policy:*"), []);
    } finally {
      await close();
    }
  }
});
