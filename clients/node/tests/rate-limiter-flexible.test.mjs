import assert from "node:assert/strict";
import { performance } from "node:perf_hooks";
import { after, before, describe, test } from "node:test";
import { RateLimiterMemory, RateLimiterRedis, RateLimiterRes } from "rate-limiter-flexible";
import { ModuleOnlyError, RateLimiterCell, RateLimiterCellGcra } from "../dist/esm/rate-limiter-flexible.js";
import { CLIENTS, clientsInUse, clusterTests, engines } from "./clients.mjs";
import { delta, operator, sameState } from "./operator.mjs";

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** A call's outcome: resolved or rejected, and with what. */
async function outcome(p) {
  try {
    return { ok: true, value: await p };
  } catch (e) {
    return { ok: false, value: e };
  }
}

/**
 * `slack`: the longest time (ms) either limiter's calls of the sequence
 * took so far. Both keys open their windows one call apart and are read one
 * call apart, so a machine that stalls between the two moves their
 * msBeforeNext apart by as much.
 */
function same(ours, theirs, at, slack = 0) {
  assert.equal(ours.ok, theirs.ok, `${at}: resolves/rejects alike (ours ${String(ours.value)}, theirs ${String(theirs.value)})`);
  const [o, t] = [ours.value, theirs.value];
  if (t instanceof RateLimiterRes) {
    assert.ok(o instanceof RateLimiterRes, `${at}: a RateLimiterRes`);
    assert.equal(o.consumedPoints, t.consumedPoints, `${at}: consumedPoints`);
    assert.equal(o.remainingPoints, t.remainingPoints, `${at}: remainingPoints`);
    assert.equal(o.isFirstInDuration, t.isFirstInDuration, `${at}: isFirstInDuration`);
    // Both are the key's time to live, read a few ms apart (more when the machine stalled between them).
    const bound = 250 + 2 * slack;
    assert.ok(Math.abs(o.msBeforeNext - t.msBeforeNext) <= bound, `${at}: msBeforeNext ${o.msBeforeNext} vs ${t.msBeforeNext} (bound ${bound})`);
  } else if (t instanceof Error) {
    assert.ok(o instanceof Error, `${at}: an Error`);
    assert.equal(o.message, t.message, at);
  } else {
    assert.deepEqual(o, t, at);
  }
}

/** The same calls on both limiters, each on its own keys. */
const SEQUENCES = {
  "consume to the limit and beyond": (l) => [
    () => l.consume("a"),
    () => l.consume("a", 2),
    () => l.consume("a", 2),
    () => l.consume("a"),
    () => l.get("a"),
    () => l.get("nobody"),
  ],
  "penalty, reward, set, block, delete": (l) => [
    () => l.consume("b"),
    () => l.penalty("b", 2),
    () => l.reward("b", 1),
    () => l.consume("b"),
    () => l.set("b", 1, 10),
    () => l.consume("b"),
    () => l.block("b", 5),
    () => l.consume("b"),
    () => l.get("b"),
    () => l.delete("b"),
    () => l.delete("b"),
    () => l.consume("b"),
  ],
  "points as strings and decimals are rejected alike": (l) => [
    () => l.consume("c", "2"),
    () => l.consume("c", "02"),
    () => l.consume("c", "1.5"),
    () => l.consume("c", 1.5),
    () => l.penalty("c", 0.5),
    () => l.consume("c", 0),
    () => l.get("c"),
  ],
};

const OPTIONS = {
  "points 4 per 10 s": { points: 4, duration: 10 },
  "with blockDuration": { points: 3, duration: 10, blockDuration: 20 },
  "with blockOnConsumed": { points: 2, duration: 10, blockDuration: 20, blockOnConsumed: 4 },
  "duration 0 (never expires)": { points: 3, duration: 0 },
  "inMemoryBlockOnConsumed": { points: 2, duration: 10, inMemoryBlockOnConsumed: 3, inMemoryBlockDuration: 5 },
};

let servers;
before(async () => (servers = await engines()));
after(() => servers.forEach((s) => s.server.stop()));

const clientNames = clientsInUse();
for (const name of clientNames) {
  describe(`RateLimiterCell against RateLimiterRedis, ${name}`, () => {
    for (const [optTitle, opts] of Object.entries(OPTIONS)) {
      test(optTitle, async () => {
        for (const { engine, server } of servers) {
          const { client, close } = await CLIENTS[name].single(server.port);
          const extra = name === "ioredis" ? {} : { useRedisPackage: true };
          try {
            for (const [seqTitle, seq] of Object.entries(SEQUENCES)) {
              const prefix = `${name}:${engine}:${optTitle}:${seqTitle}`;
              const theirs = new RateLimiterRedis({ storeClient: client, keyPrefix: `redis:${prefix}`, ...opts, ...extra });
              const ours = new RateLimiterCell({ storeClient: client, keyPrefix: `cell:${prefix}`, ...opts });
              assert.equal(ours.getKey("x"), `cell:${prefix}:x`);
              const [a, b] = [seq(ours), seq(theirs)];
              let slack = 0;
              for (let i = 0; i < a.length; i++) {
                const t0 = performance.now();
                const mine = await outcome(a[i]());
                const t1 = performance.now();
                const its = await outcome(b[i]());
                slack = Math.max(slack, t1 - t0, performance.now() - t1);
                same(mine, its, `${engine}, ${seqTitle}, call ${i}`, slack);
              }
              // The state itself is RateLimiterRedis's: an integer with its TTL.
              for (const key of ["a", "b", "c"]) {
                const [mine, its] = await Promise.all(
                  [ours, theirs].map((l) =>
                    name === "ioredis" ? client.get(l.getKey(key)) : client.sendCommand(["GET", l.getKey(key)]),
                  ),
                );
                assert.equal(mine, its, `${engine}, ${seqTitle}: the stored value of ${key}`);
              }
            }
          } finally {
            await close();
          }
        }
      });
    }
  });
}

test("a reward below zero: RateLimiterRedis stores negative points, RateLimiterCell stops at 0 (documented)", async () => {
  for (const { engine, server } of servers) {
    const { client, close } = await CLIENTS.ioredis.single(server.port);
    const opts = { points: 2, duration: 10 };
    const theirs = new RateLimiterRedis({ storeClient: client, keyPrefix: `neg:redis:${engine}`, ...opts });
    const ours = new RateLimiterCell({ storeClient: client, keyPrefix: `neg:cell:${engine}`, ...opts });
    for (const l of [ours, theirs]) {
      await l.consume("k");
      await l.reward("k", 3);
    }
    assert.equal((await theirs.get("k")).consumedPoints, -2);
    assert.equal(await ours.get("k"), null, "the counter reached 0: FW.REFUND deleted it");
    // So a burst after the reward gets `points`, not `points` + 2.
    const burst = async (l) => (await Promise.allSettled([1, 2, 3, 4].map(() => l.consume("k")))).filter((r) => r.status === "fulfilled").length;
    assert.equal(await burst(ours), 2);
    assert.equal(await burst(theirs), 4);
    await close();
  }
});

test("points beyond FW.INCR's exact range are a RangeError, not a key of another limiter", async () => {
  const { client, close } = await CLIENTS.ioredis.single(servers[0].server.port);
  try {
    const l = new RateLimiterCell({ storeClient: client, keyPrefix: "huge", points: 5, duration: 10 });
    for (const call of [() => l.consume("k", 2 ** 52 + 2), () => l.reward("k", 2 ** 53)]) {
      await assert.rejects(call(), (e) => e instanceof RangeError && /at most 2\^52 points/.test(e.message));
    }
    // 2^52 points still fit FW.INCR, and are over the limit: a refusal, as RateLimiterRedis's.
    const refused = await outcome(l.consume("k2", 2 ** 52));
    assert.ok(!refused.ok && refused.value instanceof RateLimiterRes && refused.value.remainingPoints === 0, String(refused.value));
  } finally {
    await close();
  }
});

test("execEvenly and the insurance limiter behave as RateLimiterRedis's", async () => {
  const { engine, server } = servers[0];
  const { client, close } = await CLIENTS.ioredis.single(server.port);
  const opts = { points: 3, duration: 1, execEvenly: true };
  const ours = new RateLimiterCell({ storeClient: client, keyPrefix: `even:${engine}`, ...opts });
  const started = Date.now();
  for (let i = 0; i < 3; i++) await ours.consume("k");
  assert.ok(Date.now() - started >= 200, "the second and third consumes were delayed");
  await close();
  // A client whose connection is closed (every call fails at once; no
  // stopped server whose port another process could take): both answer
  // from their insurance limiter.
  const c = await CLIENTS.ioredis.single(server.port);
  c.client.disconnect();
  for (const L of [RateLimiterCell, RateLimiterRedis]) {
    const l = new L({ storeClient: c.client, keyPrefix: "ins", points: 1, duration: 5, insuranceLimiter: new RateLimiterMemory({ points: 1, duration: 5 }) });
    assert.equal((await l.consume("k")).remainingPoints, 0);
    await assert.rejects(l.consume("k"), (e) => e instanceof RateLimiterRes);
  }
});

test("RateLimiterCellGcra: a smooth refill with rate-limiter-flexible's answers", async () => {
  for (const { engine, server } of servers) {
    const { client, close } = await CLIENTS.ioredis.single(server.port);
    // One point back every 5 s: far more than a loaded machine takes between two calls.
    const l = new RateLimiterCellGcra({ storeClient: client, keyPrefix: `gcra:${engine}`, points: 4, duration: 20 });
    const first = await l.consume("k");
    assert.deepEqual([first.consumedPoints, first.remainingPoints, first.isFirstInDuration], [1, 3, true]);
    await l.consume("k", 3);
    const refused = await outcome(l.consume("k"));
    assert.equal(refused.ok, false);
    assert.ok(refused.value instanceof RateLimiterRes);
    assert.equal(refused.value.remainingPoints, 0);
    // The next point comes back 5 s after the first consume.
    assert.ok(refused.value.msBeforeNext > 2500 && refused.value.msBeforeNext <= 5000, String(refused.value.msBeforeNext));
    assert.equal((await l.get("k")).remainingPoints, 0);
    assert.equal((await l.reward("k", 2)).remainingPoints, 2);
    assert.equal((await l.consume("k", 2)).remainingPoints, 0);
    assert.equal((await outcome(l.consume("k"))).ok, false);
    assert.equal(await l.delete("k"), true);
    assert.equal(await l.get("k"), null);
    await assert.rejects(l.block("k", 5), /GCRA/);
    assert.throws(() => new RateLimiterCellGcra({ storeClient: client, points: 2, duration: 1, blockDuration: 5 }), /blockDuration/);
    await close();
  }
});

/** The key's PTTL, read with either client. */
const pttl = (name, client, key) => (name === "ioredis" ? client.pttl(key) : client.sendCommand(["PTTL", key]));

for (const name of clientNames) {
  const extra = name === "ioredis" ? {} : { useRedisPackage: true };
  describe(`rate-limiter-flexible's RateLimiterRedis cases, ${name}`, () => {
    test("customDuration sets the key's expiry, as RateLimiterRedis's does", async () => {
      for (const { engine, server } of servers) {
        const { client, close } = await CLIENTS[name].single(server.port);
        try {
          const prefix = `cd:${name}:${engine}`;
          // The limiter's duration is 60 s, each call's 2 or 4: bounds that a
          // loaded machine's delays (well under a second) cannot cross.
          const theirs = new RateLimiterRedis({ storeClient: client, keyPrefix: `${prefix}:redis`, points: 2, duration: 60, ...extra });
          const ours = new RateLimiterCell({ storeClient: client, keyPrefix: `${prefix}:cell`, points: 2, duration: 60 });
          for (const [l, who] of [[theirs, "RateLimiterRedis"], [ours, "RateLimiterCell"]]) {
            const at = `${engine}, ${who}`;
            const res = await l.consume("k", 1, { customDuration: 2 });
            // rate-limiter-flexible's own assertion, and the key's TTL: the
            // given seconds, not the limiter's sixty, and never above them.
            assert.ok(res.msBeforeNext <= 2000 && res.msBeforeNext > 1000, `${at}: msBeforeNext ${res.msBeforeNext}`);
            const ttl = await pttl(name, client, l.getKey("k"));
            assert.ok(ttl <= 2000 && ttl > 1000, `${at}: PTTL ${ttl}`);
            // A second consume keeps the window it found.
            assert.ok((await l.consume("k", 1, { customDuration: 4 })).msBeforeNext <= 2000, at);
            // customDuration 0: a counter that never expires.
            const never = await l.consume("never", 1, { customDuration: 0 });
            assert.equal(never.msBeforeNext, -1, at);
            assert.equal(await pttl(name, client, l.getKey("never")), -1, at);
            // penalty takes it too.
            await l.penalty("p", 1, { customDuration: 4 });
            const p = await pttl(name, client, l.getKey("p"));
            assert.ok(p <= 4000 && p > 3000, `${at}: penalty PTTL ${p}`);
          }
          // The GCRA variant: customDuration is the call's period (one point
          // back every customDuration / points), so the key is full again,
          // and expires, after 4 s / 2 for one point.
          const gcra = new RateLimiterCellGcra({ storeClient: client, keyPrefix: `${prefix}:gcra`, points: 2, duration: 60 });
          const g = await gcra.consume("k", 1, { customDuration: 4 });
          assert.ok(g.msBeforeNext <= 2000 && g.msBeforeNext > 1000, `${engine}, gcra: ${g.msBeforeNext}`);
          const gt = await pttl(name, client, gcra.getKey("k"));
          assert.ok(gt <= 2000 && gt > 1000, `${engine}, gcra: PTTL ${gt}`);
          await assert.rejects(gcra.consume("z", 1, { customDuration: 0 }), (e) => e instanceof TypeError && /customDuration/.test(e.message));
        } finally {
          await close();
        }
      }
    });

    test("the in-memory block expires with the blocked key, as RateLimiterRedis's does", async () => {
      const runs = [];
      for (const { engine, server } of servers) {
        const { client, close } = await CLIENTS[name].single(server.port);
        const limiters = {
          RateLimiterRedis: (o) => new RateLimiterRedis({ ...o, ...extra }),
          RateLimiterCell: (o) => new RateLimiterCell(o),
          RateLimiterCellGcra: (o) => new RateLimiterCellGcra(o),
        };
        for (const [who, mk] of Object.entries(limiters)) {
          runs.push(
            (async () => {
              const at = `${engine}, ${who}`;
              const keyPrefix = `mem:${name}:${engine}:${who}`;
              // Blocked in memory for the key's own time to live.
              const l = mk({ storeClient: client, keyPrefix, points: 1, duration: 1, inMemoryBlockOnConsumed: 1 });
              const first = await l.consume("a");
              const blocked = l._inMemoryBlockedKeys.msBeforeExpire(l.getKey("a"));
              assert.ok(blocked > 0 && blocked <= 1000 && blocked <= first.msBeforeNext, `${at}: blocked ${blocked}, msBeforeNext ${first.msBeforeNext}`);
              // rate-limiter-flexible's "expire inMemory blocked key": after
              // the block, the key has expired too and a new window opens.
              // The block starts after the key's window did, so it ends after the key's expiry.
              const m = mk({ storeClient: client, keyPrefix, points: 1, duration: 1, inMemoryBlockOnConsumed: 2, inMemoryBlockDuration: 1 });
              await assert.rejects(m.consume("b", 2), (e) => e instanceof RateLimiterRes, at);
              assert.ok(m._inMemoryBlockedKeys.msBeforeExpire(m.getKey("b")) > 0, `${at}: blocked in memory`);
              await assert.rejects(m.consume("b"), (e) => e instanceof RateLimiterRes && e.remainingPoints === 0, `${at}: refused from memory`);
              await sleep(1001);
              const after = await m.consume("b");
              assert.ok(after.msBeforeNext <= 1000 && after.remainingPoints === 0, `${at}: ${JSON.stringify(after)}`);
            })(),
          );
        }
        runs.push(Promise.allSettled(runs.slice()).then(close));
      }
      const results = await Promise.allSettled(runs);
      const failed = results.find((r) => r.status === "rejected");
      if (failed) throw failed.reason;
    });

    test("a client that is not ready: the call fails as RateLimiterRedis's does, not the constructor", async () => {
      const real = await CLIENTS[name].single(servers[0].server.port);
      // Closed for good: the clients answer every call with their own error.
      if (name === "ioredis") real.client.disconnect();
      else await real.client.disconnect();
      // The shapes rate-limiter-flexible's tests give for clients that are not ready.
      const fakes = [{ status: "closed" }, { isReady: () => false }, { isReady: false }, { _slots: { getClient: () => ({ isReady: false }) }, isOpen: true }];
      for (const rejectIfRedisNotReady of [false, true]) {
        for (const L of [RateLimiterCell, RateLimiterCellGcra]) {
          const at = `${L.name}, rejectIfRedisNotReady ${rejectIfRedisNotReady}`;
          const opts = { storeClient: real.client, points: 2, duration: 1, rejectIfRedisNotReady };
          const theirs = new RateLimiterRedis({ ...opts, ...extra });
          const ours = new L(opts);
          for (const call of [(l) => l.consume("k"), (l) => l.get("k"), (l) => l.penalty("k")]) {
            const [a, b] = [await outcome(call(ours)), await outcome(call(theirs))];
            assert.equal(a.ok, false, at);
            assert.equal(b.ok, false, at);
            assert.equal(a.value.constructor, b.value.constructor, at);
            assert.equal(a.value.message, b.value.message, at);
          }
          if (rejectIfRedisNotReady) {
            for (const storeClient of fakes) {
              const l = new L({ storeClient, points: 2, duration: 1, rejectIfRedisNotReady });
              await assert.rejects(l.consume("k"), { message: "Redis connection is not ready" }, at);
              await assert.rejects(l.get("k"), { message: "Redis connection is not ready" }, at);
            }
          }
        }
      }
    });
  });
}

clusterTests("RateLimiterCell on a cluster", async ({ name, engine, client }) => {
  const l = new RateLimiterCell({ storeClient: client, keyPrefix: `cl:${name}:${engine}`, points: 3, duration: 10 });
  const results = await Promise.allSettled(Array.from({ length: 12 }, (_, i) => l.consume(`u${i % 2}`)));
  assert.equal(results.filter((r) => r.status === "fulfilled").length, 6, engine);
  assert.equal((await l.get("u0")).consumedPoints, 6);
});

/** Whether each of `n` consumes, one after another, resolved. */
async function consumes(l, key, n) {
  const out = [];
  for (let i = 0; i < n; i++) out.push((await outcome(l.consume(key))).ok);
  return out;
}

for (const name of clientNames) {
  const extra = name === "ioredis" ? {} : { useRedisPackage: true };
  test(`RateLimiterCell, ${name}: 15 consumes at 10 points are 5 refusals in INFO and CL.TOP, with RateLimiterRedis's value and TTL`, async () => {
    for (const { engine, server } of servers) {
      const { client, close } = await CLIENTS[name].single(server.port);
      const op = await operator(server.port);
      try {
        const opts = { storeClient: client, points: 10, duration: 60 };
        const ours = new RateLimiterCell({ ...opts, keyPrefix: `op:${name}:${engine}:cell` });
        const theirs = new RateLimiterRedis({ ...opts, ...extra, keyPrefix: `op:${name}:${engine}:redis` });
        const opened = [];
        const run = async () => {
          for (const l of [ours, theirs]) {
            opened.push(Date.now());
            const ok = await consumes(l, "k", 15);
            assert.deepEqual(ok, [...Array(10).fill(true), ...Array(5).fill(false)], engine);
          }
        };
        if (engine === "module") assert.equal(await delta(op, "fw_incr_limited", run), 5, "fw_incr_limited grew by 5");
        else await run();
        const key = ours.getKey("k");
        if (engine === "module") assert.deepEqual(await op.top(key), [key, 5, 0, 0], "CL.TOP");
        sameState(await op.state(key), await op.state(theirs.getKey("k")), 60_000, `${engine}, ${name}`, opened[1] - opened[0]);
        assert.equal((await op.state(key)).value, "15");
      } finally {
        await op.close();
        await close();
      }
    }
  });

  test(`recipes, ${name}: RateLimiterCell's points changed live, a stricter limit on trial, promoted`, async () => {
    const { server } = servers.find((s) => s.engine === "module");
    const { client, close } = await CLIENTS[name].single(server.port);
    const op = await operator(server.port);
    const policy = `rlf-${name}`;
    const l = new RateLimiterCell({ storeClient: client, keyPrefix: `live:${name}`, points: 10, duration: 60, policy });
    const key = l.getKey("u");
    try {
      // No such policy yet: the limiter's own 10 points.
      assert.deepEqual(await consumes(l, "u", 2), [true, true]);
      await op.policy("SET", policy, "FW", 3, "1m");
      const third = await l.consume("u");
      // The policy's remaining (0 of 3), read against the limiter's 10 points.
      assert.deepEqual([third.consumedPoints, third.remainingPoints], [10, 0]);
      const fourth = await outcome(l.consume("u"));
      assert.ok(!fourth.ok && fourth.value instanceof RateLimiterRes && fourth.value.consumedPoints > 10, String(fourth.value));
      await op.policy("SET", policy, "FW", 20, "1m");
      assert.deepEqual(await consumes(l, "u", 1), [true]);
      await op.policy("SET", policy, "FW", 20, "1m", "TRIAL", "FW", 2, "1m");
      assert.deepEqual(await consumes(l, "u", 4), [true, true, true, true]);
      assert.deepEqual(await op.top(key, { policy, trial: true }), [key, 2, 0, 2], "CL.TOP POLICY name TRIAL");
      await op.policy("PROMOTE", policy);
      assert.deepEqual(await consumes(l, "u", 1), [false]);
      assert.deepEqual(await op.top(key, { policy }), [key, 2, 0, 0]);
      assert.equal((await op.state(key)).value, "10", "every point counted, as RateLimiterRedis counts it");
    } finally {
      await op.policy("DEL", policy).catch(() => {});
      await op.close();
      await close();
    }
  });
}

test("RateLimiterCellGcra through a policy: the policy's GCRA decides", async () => {
  const { server } = servers.find((s) => s.engine === "module");
  const { client, close } = await CLIENTS.ioredis.single(server.port);
  const op = await operator(server.port);
  try {
    const l = new RateLimiterCellGcra({ storeClient: client, keyPrefix: "live-gcra", points: 10, duration: 60, policy: "rlf-gcra" });
    await op.policy("SET", "rlf-gcra", "GCRA", 1, 2, "1m");
    assert.deepEqual(await consumes(l, "u", 3), [true, true, false]);
    assert.deepEqual(await op.top(l.getKey("u"), { policy: "rlf-gcra" }), [l.getKey("u"), 1, 0, 0]);
  } finally {
    await op.policy("DEL", "rlf-gcra").catch(() => {});
    await op.close();
    await close();
  }
});

test("a policy: a checked name and the module's engine", async () => {
  const opts = { storeClient: {}, points: 5, duration: 10 };
  assert.throws(() => new RateLimiterCell({ ...opts, policy: "a b" }), TypeError);
  assert.throws(() => new RateLimiterCell({ ...opts, policy: "api", engine: "functions" }), ModuleOnlyError);
  assert.throws(() => new RateLimiterCellGcra({ ...opts, policy: "api", engine: "eval" }), ModuleOnlyError);
  const twin = servers.find((s) => s.engine === "functions");
  if (twin) {
    const { client, close } = await CLIENTS.ioredis.single(twin.server.port);
    try {
      const l = new RateLimiterCell({ ...opts, storeClient: client, keyPrefix: "twin-policy", policy: () => "api" });
      await assert.rejects(l.consume("k"), ModuleOnlyError);
      assert.deepEqual(await client.keys("twin-policy*"), []);
    } finally {
      await close();
    }
  }
});
