import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { after, before, describe, test } from "node:test";
import { Cell, EngineError, REDIS_CELL_LUA, RedisCellError, detectEngine, loadFunctions } from "../dist/esm/index.js";
import { CLIENTS, clientsInUse, engines } from "./clients.mjs";
import { hasFunctions, startServer } from "./servers.mjs";

const repoLua = readFileSync(new URL("../../../functions/redis_cell.lua", import.meta.url), "utf8");

test("the package ships the repository's twin, byte for byte", () => {
  assert.equal(REDIS_CELL_LUA, repoLua);
  assert.equal(readFileSync(new URL("../dist/redis_cell.lua", import.meta.url), "utf8"), repoLua);
});

let servers;
before(async () => (servers = await engines()));
after(() => servers.forEach((s) => s.server.stop()));

for (const name of clientsInUse()) {
  describe(`helpers with ${name}`, () => {
    test("every public command on every engine", async () => {
      for (const { engine, server } of servers) {
        const { client, close } = await CLIENTS[name].single(server.port);
        try {
          const c = new Cell(client);
          assert.equal(await c.engine(), engine);
          const k = `${name}:${engine}`;
          const g = { maxBurst: 2, countPerPeriod: 3, period: 60 };
          assert.deepEqual(await c.throttle(`${k}:cl`, g), { limited: false, limit: 3, remaining: 2, retryAfter: -1, resetAfter: 20 });
          // The peek comes later: a loaded machine can stall a second between the calls.
          const peeked = await c.peek(`${k}:cl`, g);
          assert.deepEqual({ ...peeked, resetAfter: 0 }, { limited: false, limit: 3, remaining: 2, retryAfter: -1, resetAfter: 0 });
          assert.ok(peeked.resetAfter === 20 || peeked.resetAfter === 19, JSON.stringify(peeked));
          // Time passes between the calls: durations are compared within a second.
          const over = await c.throttle(`${k}:cl`, g, { quantity: 3, ms: true });
          assert.deepEqual({ ...over, retryAfter: 0, resetAfter: 0 }, { limited: true, limit: 3, remaining: 2, retryAfter: 0, resetAfter: 0 });
          assert.ok(over.retryAfter > 19000 && over.retryAfter <= 20000 && over.resetAfter > 19000, JSON.stringify(over));
          const r = await c.refund(`${k}:cl`, g, 1);
          assert.equal(r.remaining, 3);
          const res = await c.reserve(`${k}:res`, { maxBurst: 0, countPerPeriod: 1, period: 10 }, { maxWait: 60 });
          assert.equal(res.limited, false);
          const res2 = await c.reserve(`${k}:res`, { maxBurst: 0, countPerPeriod: 1, period: 10 }, { maxWait: 60, ms: true });
          assert.equal(res2.limited, false);
          assert.ok(res2.retryAfter > 9000 && res2.retryAfter <= 10000, `waits for the next slot: ${res2.retryAfter}`);
          const all = await c.throttleAll(
            [`{${k}}:a`, `{${k}}:b`, `{${k}}:c`],
            [
              { kind: "gcra", maxBurst: 9, countPerPeriod: 10, period: 1 },
              { kind: "sw", limit: 2, window: "1m" },
              { kind: "fw", limit: 5, window: "day", tz: "+09:00" },
            ],
          );
          assert.deepEqual({ ...all, resetAfter: 0 }, { limited: false, limit: 2, remaining: 1, retryAfter: -1, resetAfter: 0, index: 2 });
          assert.equal((await c.swAllow(`${k}:sw`, 2, "10s", { quantity: 2 })).remaining, 0);
          assert.equal((await c.swAllow(`${k}:sw`, 2, "10s")).limited, true);
          assert.equal((await c.swPeek(`${k}:sw`, 2, "10s")).remaining, 0);
          assert.equal((await c.swRefund(`${k}:sw`, 2, "10s", 1)).remaining, 1);
          assert.equal((await c.swAllow(`${k}:swa`, 2, "10s", { approx: true })).remaining, 1);
          assert.deepEqual(await c.fwIncr(`${k}:fw`, 3, 60, { quantity: 2 }), { limited: false, limit: 3, remaining: 1, retryAfter: -1, resetAfter: 60 });
          assert.equal((await c.fwPeek(`${k}:fw`, 3, 60)).remaining, 1);
          assert.equal((await c.fwRefund(`${k}:fw`, 3, 60, 5)).remaining, 3);
          assert.equal((await c.fwIncr(`${k}:fwa`, 3, 60, { align: true })).remaining, 2);
          const lease = await c.ccAcquire(`${k}:cc`, 1, 30, { id: "w1" });
          assert.deepEqual(lease, { limited: false, limit: 1, remaining: 0, retryAfter: -1, resetAfter: 30, id: "w1" });
          const refused = await c.ccAcquire(`${k}:cc`, 1, 30);
          assert.equal(refused.limited, true);
          assert.equal(refused.id, null);
          assert.equal((await c.ccPeek(`${k}:cc`, 1)).remaining, 0);
          assert.equal(await c.ccRenew(`${k}:cc`, "w1", 60), true);
          assert.equal(await c.ccRelease(`${k}:cc`, "w1"), true);
          assert.equal(await c.ccRelease(`${k}:cc`, "w1"), false);
          assert.equal(await c.ccRenew(`${k}:cc`, "w1", 60), false);
          // Errors carry the server's text, the same on both engines.
          await assert.rejects(c.throttle(`${k}:cl`, { ...g, period: "5x" }), (e) => {
            assert.ok(e instanceof RedisCellError);
            assert.equal(e.reply, "ERR invalid period: expected seconds or a number with a unit: ms, s, m, h or d");
            assert.equal(e.code, "ERR");
            return true;
          });
          await c.send(["SET", `${k}:str`, "x"], `${k}:str`);
          await assert.rejects(c.swAllow(`${k}:str`, 1, 1), (e) => e instanceof RedisCellError && e.code === "WRONGTYPE");
          if (engine === "module") {
            const api = name.replace(/[^a-z0-9]/g, "_");
            await c.policySet(api, { kind: "gcra", maxBurst: 9, countPerPeriod: 10, period: "1s" });
            assert.deepEqual(await c.policyList(), [api]);
            assert.equal((await c.limit(`${k}:pol`, api)).remaining, 9);
            const info = await c.policyGet(api);
            assert.deepEqual(info, { limiter: "GCRA 9 10 1s", shadow: false, calls: 1, allowed: 1, refused: 0, shadowRefused: 0, errors: 0 });
            await assert.rejects(c.policyGet("nope"), (e) => e.reply === "ERR unknown policy 'nope'");
            assert.ok(Array.isArray(await c.top({ count: 3 })));
            assert.equal(await c.policyDel(api), true);
            assert.equal(await c.policyDel(api), false);
          } else {
            await assert.rejects(c.limit(`${k}:pol`, "api"), EngineError);
            await assert.rejects(c.top(), EngineError);
          }
        } finally {
          await close();
        }
      }
    });
  });
}

test("a server with neither engine gets an error naming both; an explicit engine skips COMMAND", async () => {
  const bare = await startServer({ module: false });
  try {
    const { client, close } = await CLIENTS.ioredis.single(bare.port);
    await assert.rejects(new Cell(client).throttle("k", { maxBurst: 1, countPerPeriod: 1, period: 1 }), (e) => {
      assert.ok(e instanceof EngineError);
      assert.match(e.message, /module/);
      assert.match(e.message, /loadFunctions/);
      return true;
    });
    if (await hasFunctions()) {
      await loadFunctions(client);
      assert.equal(await detectEngine(client), "functions");
      // A user that may not call COMMAND: detection says so, an explicit engine works.
      await client.call("ACL", "SETUSER", "app", "on", ">pw", "~*", "+@all", "-command");
      const { client: app, close: closeApp } = await CLIENTS.ioredis.single(bare.port);
      await app.call("AUTH", "app", "pw");
      await assert.rejects(new Cell(app).engine(), (e) => e instanceof EngineError && /set it explicitly/.test(e.message));
      const d = await new Cell(app, { engine: "functions" }).throttle("k", { maxBurst: 1, countPerPeriod: 1, period: 1 });
      assert.equal(d.remaining, 1);
      await closeApp();
    }
    await close();
  } finally {
    bare.stop();
  }
});

test("the eval engine runs the twin as one EVAL script, on every server (Redis 6.2 has no Functions)", async () => {
  const bare = await startServer({ module: false });
  const withModule = await startServer({ module: true });
  try {
    const { client, close } = await CLIENTS.ioredis.single(bare.port);
    const { client: mod, close: closeMod } = await CLIENTS.ioredis.single(withModule.port);
    const onEval = new Cell(client, { engine: "eval" });
    const onModule = new Cell(mod, { engine: "module" });
    const g = { maxBurst: 2, countPerPeriod: 3, period: 60 };
    for (let i = 0; i < 4; i++) {
      const [a, b] = [await onEval.throttle("e:cl", g), await onModule.throttle("e:cl", g)];
      assert.deepEqual({ ...a, retryAfter: 0, resetAfter: 0 }, { ...b, retryAfter: 0, resetAfter: 0 });
    }
    assert.equal((await onEval.throttle("e:cl", g)).limited, true);
    const sw = await onEval.swAllow("e:sw", 2, 60);
    assert.equal(sw.remaining, 1);
    await assert.rejects(onEval.policyList(), (e) => e instanceof EngineError);
    await close();
    await closeMod();
  } finally {
    bare.stop();
    withModule.stop();
  }
});
