// A server that lost the twin's library (FUNCTION FLUSH, a restart without
// persistence), a server without the module, a library that cannot be
// loaded, and a key written by another limiter: each answers with its own
// error class, or recovers.
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { after, before, describe, test } from "node:test";
import express from "express";
import { rateLimit } from "express-rate-limit";
import {
  ArgumentError,
  Cell,
  EngineError,
  EngineNotFoundError,
  LibraryMissingError,
  LimiterMismatchError,
  ModuleMissingError,
  OutOfRangeError,
  RedisCellError,
  WrongTypeError,
  adapt,
  loadFunctions,
} from "../dist/esm/index.js";
import { RedisCellStore } from "../dist/esm/express-rate-limit.js";
import { RedisCellThrottlerStorage } from "../dist/esm/nestjs.js";
import { RateLimiterCell, RateLimiterCellGcra } from "../dist/esm/rate-limiter-flexible.js";
import { CLIENTS, clientsInUse, engines } from "./clients.mjs";
import { listen } from "./http.mjs";
import { hasFunctions, raw, startCluster, startServer } from "./servers.mjs";

const clientNames = clientsInUse();
const send = (name, client, args) => (name === "ioredis" ? client.call(...args) : client.sendCommand(args.map(String)));

/** Waits until the client answers again (it reconnects by itself after a restart). */
async function reconnected(name, client) {
  const deadline = Date.now() + 10_000;
  for (;;) {
    try {
      await send(name, client, ["PING"]);
      return;
    } catch (e) {
      if (Date.now() > deadline) throw e;
      await new Promise((r) => setTimeout(r, 50));
    }
  }
}

/** An adapter that records every command's first two words, on every node it reaches. */
function counting(client, log) {
  const wrap = (a) => ({
    cluster: a.cluster,
    send: (args, key, readonly) => {
      log.push(`${args[0]} ${args[1]}`);
      return a.send(args, key, readonly);
    },
    transaction: (key, commands) => a.transaction(key, commands),
    masters: async () => (await a.masters()).map(wrap),
  });
  return wrap(adapt(client));
}

/** An Express app limited by the store; its errors are 500s, as an app's are. */
async function app(store) {
  const a = express();
  a.use(rateLimit({ windowMs: 60_000, limit: 100, store, standardHeaders: "draft-6", legacyHeaders: false }));
  a.get("/", (_req, res) => res.send("ok"));
  const server = createServer(a);
  return { url: await listen(server), close: () => server.close() };
}

const functions = await hasFunctions();

describe("the twin's library, lost and loaded again", { skip: !functions && "the server has no Functions (Redis 6.2)" }, () => {
  for (const name of clientNames) {
    test(`FUNCTION FLUSH, then every call succeeds: helpers, an Express request, RateLimiterCell (${name})`, async () => {
      const server = await startServer({ module: false });
      const { client, close } = await CLIENTS[name].single(server.port);
      const web = await app(new RedisCellStore({ client, prefix: `flush:${name}:` }));
      try {
        await loadFunctions(client);
        const cell = new Cell(client);
        const limiter = new RateLimiterCell({ storeClient: client, keyPrefix: `flush:${name}:rlf`, points: 5, duration: 60 });
        assert.equal((await cell.fwIncr("k", 5, 60)).remaining, 4);
        assert.equal((await fetch(web.url)).status, 200);
        assert.equal((await limiter.consume("k")).remainingPoints, 4);

        assert.equal(await raw(server.port, "FUNCTION", "FLUSH"), "+OK\r\n");
        // The keys stay: the counts go on where they were.
        assert.equal((await cell.fwIncr("k", 5, 60)).remaining, 3);
        assert.match(await raw(server.port, "FUNCTION", "LIST"), /redis_cell/);
        await raw(server.port, "FUNCTION", "FLUSH");
        const res = await fetch(web.url);
        assert.equal(res.status, 200);
        assert.equal(res.headers.get("ratelimit-remaining"), "98");
        await raw(server.port, "FUNCTION", "FLUSH");
        assert.equal((await limiter.consume("k")).remainingPoints, 3);
      } finally {
        web.close();
        await close();
        server.stop();
      }
    });

    test(`a restart without persistence, then success (${name})`, async () => {
      let server = await startServer({ module: false });
      const { client, close } = await CLIENTS[name].single(server.port);
      // node-redis reports the lost connection as an event while it reconnects.
      client.on("error", () => {});
      try {
        await loadFunctions(client);
        const cell = new Cell(client);
        assert.equal(await cell.engine(), "functions");
        assert.equal((await cell.swAllow("k", 3, 60)).remaining, 2);
        server = await server.restart();
        await reconnected(name, client);
        assert.equal(await raw(server.port, "FUNCTION", "LIST"), "*0\r\n", "the restarted server has no library");
        // Everything is gone: a new window.
        assert.equal((await cell.swAllow("k", 3, 60)).remaining, 2);
        assert.match(await raw(server.port, "FUNCTION", "LIST"), /redis_cell/);
      } finally {
        await close();
        server.stop();
      }
    });
  }

  test("calls failing at once share one load; two clients loading at once both succeed", async () => {
    const server = await startServer({ module: false });
    const a = await CLIENTS.ioredis.single(server.port);
    const b = await CLIENTS.ioredis.single(server.port);
    try {
      await loadFunctions(a.client);
      const log = [];
      const cells = [new Cell(counting(a.client, log), { engine: "functions" }), new Cell(counting(b.client, log), { engine: "functions" })];
      await raw(server.port, "FUNCTION", "FLUSH");
      const results = await Promise.all(cells.flatMap((c, i) => Array.from({ length: 10 }, () => c.fwIncr(`both:${i}`, 100, 60))));
      assert.equal(results.length, 20);
      assert.deepEqual(results.map((d) => d.limited), Array(20).fill(false));
      const loads = log.filter((l) => l === "FUNCTION LOAD").length;
      assert.ok(loads >= 1 && loads <= 2, `one load per engine at most: ${loads}`);
      assert.equal((await cells[0].fwPeek("both:0", 100, 60)).remaining, 90);
      // Only "Function not found" loads: bad arguments and a key of another kind are the caller's errors.
      log.length = 0;
      await a.client.lpush("both:list", "x");
      await assert.rejects(cells[0].throttle("both:bad", { maxBurst: 1, countPerPeriod: 0, period: 1 }), ArgumentError);
      await assert.rejects(cells[0].fwIncr("both:list", 5, 60), LimiterMismatchError);
      assert.deepEqual(log.filter((l) => l.startsWith("FUNCTION")), []);
    } finally {
      await a.close();
      await b.close();
      server.stop();
    }
  });

  test("a read-only call is retried on the master the library was loaded on, not on a replica", async () => {
    const server = await startServer({ module: false });
    const { client, close } = await CLIENTS.ioredis.single(server.port);
    try {
      const log = [];
      const a = adapt(client);
      const routed = {
        cluster: false,
        send: (args, key, readonly) => {
          log.push(`${args[0]} ${args[1]} ${readonly === true ? "replica allowed" : "master"}`);
          return a.send(args, key, readonly);
        },
        transaction: (key, commands) => a.transaction(key, commands),
        masters: async () => [routed],
      };
      const cell = new Cell(routed, { engine: "functions" });
      assert.equal((await cell.fwPeek("ro", 5, 60)).remaining, 5);
      assert.deepEqual(log, ["FCALL_RO fw_peek replica allowed", "FUNCTION LOAD master", "FCALL_RO fw_peek master"]);
    } finally {
      await close();
      server.stop();
    }
  });

  test("a library that cannot be loaded: LibraryMissingError with the load's error, once per call, no loop", async () => {
    const server = await startServer({ module: false });
    const admin = await CLIENTS.ioredis.single(server.port);
    const app = await CLIENTS.ioredis.single(server.port);
    try {
      await admin.client.call("ACL", "SETUSER", "app", "on", ">pw", "~*", "+@all", "-function");
      await app.client.call("AUTH", "app", "pw");
      const log = [];
      const cell = new Cell(counting(app.client, log), { engine: "functions" });
      for (let i = 0; i < 2; i++) {
        await assert.rejects(cell.throttle("k", { maxBurst: 1, countPerPeriod: 1, period: 1 }), (e) => {
          assert.ok(e instanceof LibraryMissingError && e instanceof EngineNotFoundError && e instanceof EngineError, String(e));
          assert.equal(e.reply, "ERR Function not found");
          assert.match(e.message, /the load failed: NOPERM/);
          assert.match(String(e.cause?.message), /^NOPERM/);
          return true;
        });
      }
      // Each call: the call, one load, one retry.
      const once = ["FCALL cl_throttle", "FUNCTION LOAD", "FCALL cl_throttle"];
      assert.deepEqual(log, [...once, ...once]);
      // Loaded by a user who may: the same object works again.
      await loadFunctions(admin.client);
      assert.equal((await cell.throttle("k", { maxBurst: 1, countPerPeriod: 1, period: 1 })).remaining, 1);
    } finally {
      await admin.close();
      await app.close();
      server.stop();
    }
  });

  if (process.env.CELL_NODE_CLUSTER !== "0") {
    describe("on a cluster", () => {
      let cluster;
      before(async () => (cluster = await startCluster({ module: false })));
      after(() => cluster.stop());
      for (const name of clientNames) {
        test(`FUNCTION FLUSH on one master, then calls on its keys succeed (${name})`, async () => {
          const { client, close } = await CLIENTS[name].cluster(cluster.ports);
          try {
            await loadFunctions(client);
            const cell = new Cell(client);
            // Keys on every master, the flushed one's included (its slots: 5461-10921).
            const keys = [];
            const onFlushed = [];
            for (let i = 0; onFlushed.length < 3; i++) {
              const k = `cl:${name}:${i}`;
              keys.push(k);
              const slot = Number(/^:(\d+)/.exec(await raw(cluster.ports[0], "CLUSTER", "KEYSLOT", k))?.[1]);
              if (slot >= 5461 && slot <= 10921) onFlushed.push(k);
            }
            for (const k of keys) await cell.fwIncr(k, 5, 60);
            assert.equal(await raw(cluster.ports[1], "FUNCTION", "FLUSH"), "+OK\r\n");
            for (const k of keys) assert.equal((await cell.fwIncr(k, 5, 60)).remaining, 3, k);
            for (const port of cluster.ports) assert.match(await raw(port, "FUNCTION", "LIST"), /redis_cell/, `port ${port}`);
          } finally {
            await close();
          }
        });
      }
    });
  }
});

test("a server without Functions: the twin's engine answers LibraryMissingError, and loads nothing", { skip: functions && "the server has Functions" }, async () => {
  const server = await startServer({ module: false });
  const { client, close } = await CLIENTS.ioredis.single(server.port);
  try {
    const log = [];
    await assert.rejects(new Cell(counting(client, log), { engine: "functions" }).fwIncr("k", 1, 1), (e) => {
      assert.ok(e instanceof LibraryMissingError, String(e));
      assert.match(e.reply, /^ERR unknown command [`']FCALL[`']/);
      assert.match(e.message, /the server has no Functions/);
      return true;
    });
    assert.deepEqual(log, ["FCALL fw_incr"]);
  } finally {
    await close();
    server.stop();
  }
});

describe("a server without the module", () => {
  for (const name of clientNames) {
    test(`the module's engine answers ModuleMissingError, not a bad-argument error; a detected module that goes away is detected again (${name})`, async () => {
      const server = await startServer({ module: false });
      const { client, close } = await CLIENTS[name].single(server.port);
      try {
        const isMissing = (e) => {
          assert.ok(e instanceof ModuleMissingError && e instanceof EngineNotFoundError, String(e));
          assert.ok(!(e instanceof RedisCellError));
          assert.match(e.reply, /^ERR unknown command [`']CL\.THROTTLE[`']/);
          assert.match(e.message, /the redis-cell module is not loaded/);
          return true;
        };
        await assert.rejects(new Cell(client, { engine: "module" }).throttle("k", { maxBurst: 1, countPerPeriod: 1, period: 1 }), isMissing);
        const storage = new RedisCellThrottlerStorage(client, { engine: "module" });
        await assert.rejects(storage.increment("k", 1000, 5, 0, "default"), (e) => e instanceof ModuleMissingError && /FW\.INCR/.test(e.message));
        // A detected module that goes away (a restart without loadmodule,
        // here a client moved to this server): ModuleMissingError once, then
        // detection again, which finds the twin where it is loaded.
        const withModule = await startServer();
        const other = await CLIENTS[name].single(withModule.port);
        try {
          let current = adapt(other.client);
          const moved = {
            cluster: false,
            send: (...a) => current.send(...a),
            transaction: (...a) => current.transaction(...a),
            masters: async () => [moved],
          };
          const cell = new Cell(moved);
          assert.equal(await cell.engine(), "module");
          current = adapt(client);
          await assert.rejects(cell.fwIncr("m", 5, 60), (e) => e instanceof ModuleMissingError && /^ERR unknown command [`']FW\.INCR[`']/.test(e.reply));
          if (functions) {
            await loadFunctions(client);
            assert.equal((await cell.fwIncr("m", 5, 60)).remaining, 4);
            assert.equal(await cell.engine(), "functions");
            await send(name, client, ["FUNCTION", "FLUSH"]);
          }
        } finally {
          await other.close();
          withModule.stop();
        }
        // Detection finds neither engine.
        await assert.rejects(new Cell(client).throttle("k", { maxBurst: 1, countPerPeriod: 1, period: 1 }), (e) => {
          assert.ok(e instanceof EngineNotFoundError && !(e instanceof ModuleMissingError), String(e));
          return true;
        });
      } finally {
        await close();
        server.stop();
      }
    });
  }
});

describe("error classes and a key of another limiter", () => {
  let servers;
  before(async () => (servers = await engines()));
  after(() => servers.forEach((s) => s.server.stop()));

  test("bad arguments, out of range, wrong type: their own classes, the server's text", async () => {
    for (const { engine, server } of servers) {
      const { client, close } = await CLIENTS.ioredis.single(server.port);
      try {
        const cell = new Cell(client);
        await assert.rejects(cell.throttle("e:k", { maxBurst: 1, countPerPeriod: 0, period: 1 }), (e) => {
          assert.ok(e instanceof ArgumentError && e instanceof RedisCellError, `${engine}: ${e}`);
          assert.equal(e.reply, "ERR invalid count_per_period: must be 1 or greater");
          return true;
        });
        await assert.rejects(cell.throttle("e:k", { maxBurst: 2 ** 62, countPerPeriod: 1, period: 2 ** 40 }), (e) => {
          assert.ok(e instanceof OutOfRangeError, `${engine}: ${e}`);
          return true;
        });
        await client.lpush("e:list", "x");
        await assert.rejects(cell.fwIncr("e:list", 1, 1), (e) => {
          assert.ok(e instanceof LimiterMismatchError && e instanceof WrongTypeError, `${engine}: ${e}`);
          assert.equal(e.reply, "WRONGTYPE Operation against a key holding the wrong kind of value");
          assert.equal(e.holds, "a list, which is no redis-cell state");
          return true;
        });
      } finally {
        await close();
      }
    }
  });

  for (const name of clientNames) {
    test(`switching limiters on a key names what it holds and the fix (${name})`, async () => {
      for (const { engine, server } of servers) {
        const { client, close } = await CLIENTS[name].single(server.port);
        try {
          const at = `${engine}, ${name}`;
          const fix =
            "One key serves one limiter: this one was written by another (another algorithm of a store, or another " +
            "limiter class, on the same prefix). Give each limiter its own key prefix, or delete the key to start it afresh.";
          // An Express store used with a fixed window, then a sliding one.
          const prefix = `mm:${name}:${engine}:`;
          await new RedisCellStore({ client, prefix, algorithm: "fixed" }).increment("ip");
          const sliding = new RedisCellStore({ client, prefix, algorithm: "sliding", limit: 5 });
          await assert.rejects(sliding.increment("ip"), (e) => {
            assert.ok(e instanceof LimiterMismatchError, `${at}: ${e}`);
            assert.equal(e.key, `${prefix}ip`);
            assert.equal(
              e.message,
              `redis-cell: the key '${prefix}ip' holds a counter (an integer: FW.INCR's fixed window, as RateLimiterCell, ` +
                `RateLimiterRedis and rate-limit-redis keep it), where SW.ALLOW keeps a sliding window. ${fix}`,
            );
            assert.equal(e.reply, "WRONGTYPE Operation against a key holding the wrong kind of value");
            return true;
          });
          // And back: the sliding window's key read as a counter.
          await new RedisCellStore({ client, prefix, algorithm: "sliding", limit: 5 }).increment("ip2");
          await assert.rejects(new RedisCellStore({ client, prefix }).increment("ip2"), (e) => {
            assert.ok(e instanceof LimiterMismatchError, at);
            assert.match(e.holds, engine === "module" ? /^a sliding window \(SW\.ALLOW, the module's cell-swin type\)$/ : /^an exact sliding window/);
            return true;
          });
          // RateLimiterCellGcra, then RateLimiterCell on the same prefix: the
          // server reads the time as a huge count; the store tells.
          const keyPrefix = `mm:${name}:${engine}:rlf`;
          await new RateLimiterCellGcra({ storeClient: client, keyPrefix, points: 5, duration: 10 }).consume("u");
          const counting = new RateLimiterCell({ storeClient: client, keyPrefix, points: 5, duration: 10 });
          for (const call of [() => counting.consume("u"), () => counting.get("u"), () => counting.reward("u")]) {
            await assert.rejects(call(), (e) => {
              assert.ok(e instanceof LimiterMismatchError, `${at}: ${e}`);
              assert.equal(
                e.message,
                `redis-cell: the key '${keyPrefix}:u' holds a GCRA state (CL.THROTTLE's time in nanoseconds, as ` +
                  `RateLimiterCellGcra and the "gcra" store keep it), where RateLimiterCell keeps a counter (FW.INCR). ${fix}`,
              );
              return true;
            });
          }
          // The NestJS storage's hits, a sliding window, found as a counter: only that key is named.
          const hits = `mm:${name}:${engine}:{t}:default:hits`;
          await send(name, client, ["SET", hits, "5"]);
          await assert.rejects(new RedisCellThrottlerStorage(client, { prefix: `mm:${name}:${engine}:` }).increment("t", 1000, 5, 0, "default"), (e) => {
            assert.ok(e instanceof LimiterMismatchError, `${at}: ${e}`);
            assert.equal(e.key, hits);
            assert.match(e.message, /holds a counter .*, where RedisCellThrottlerStorage keeps a sliding window in ':hits'/);
            return true;
          });
          // The GCRA variant on a sliding window's key.
          await new Cell(client).swAllow(`${keyPrefix}:w`, 5, 10);
          await assert.rejects(
            new RateLimiterCellGcra({ storeClient: client, keyPrefix, points: 5, duration: 10 }).consume("w"),
            (e) => e instanceof LimiterMismatchError && /where CL\.THROTTLE keeps a GCRA state\./.test(e.message),
          );
        } finally {
          await close();
        }
      }
    });
  }
});
