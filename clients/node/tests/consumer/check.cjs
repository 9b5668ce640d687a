// The same in CommonJS: require of every entry point.
const assert = require("node:assert/strict");
const cell = require("redis-cell");
const { Cell, REDIS_CELL_LUA } = cell;
const { RedisCellStore } = require("redis-cell/express-rate-limit");
const { RedisCellThrottlerStorage } = require("redis-cell/nestjs");
const { RateLimiterCell, RateLimiterCellGcra } = require("redis-cell/rate-limiter-flexible");
const { RateLimiterRedis } = require("rate-limiter-flexible");

for (const x of [Cell, RedisCellStore, RedisCellThrottlerStorage, RateLimiterCell, RateLimiterCellGcra]) assert.equal(typeof x, "function");
assert.ok(REDIS_CELL_LUA.includes("register_function"));
// The error classes, one hierarchy in both builds.
assert.ok(new cell.LimiterMismatchError("k", "x", "m", "WRONGTYPE") instanceof cell.WrongTypeError);
assert.ok(new cell.WrongTypeError("WRONGTYPE") instanceof cell.RedisCellError);
assert.ok(new cell.LibraryMissingError("m") instanceof cell.EngineNotFoundError);
assert.ok(new cell.ModuleMissingError("m") instanceof cell.EngineError);
for (const c of ["ArgumentError", "OutOfRangeError", "ModuleOnlyError"]) assert.equal(typeof cell[c], "function", c);
const Redis = require("ioredis");
const client = new Redis({ lazyConnect: true });
const limiter = new RateLimiterCell({ storeClient: client, points: 1, duration: 1 });
// Installed from a tarball, the package extends the application's own
// rate-limiter-flexible; a folder install is a symlink that resolves it from
// the folder's node_modules when that has one (a development checkout).
if (process.env.SAME_CLASS === "1") assert.ok(limiter instanceof RateLimiterRedis);
client.disconnect();
console.log("cjs ok");
