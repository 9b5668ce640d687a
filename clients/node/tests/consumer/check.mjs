// Run from a scratch project with redis-cell installed: ESM imports of every entry point.
import assert from "node:assert/strict";
import { Cell, EngineNotFoundError, LibraryMissingError, REDIS_CELL_LUA, RedisCellError, WrongTypeError } from "redis-cell";
import { RedisCellStore } from "redis-cell/express-rate-limit";
import { RedisCellThrottlerStorage } from "redis-cell/nestjs";
import { RateLimiterCell, RateLimiterCellGcra } from "redis-cell/rate-limiter-flexible";
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";

assert.ok(new LibraryMissingError("m") instanceof EngineNotFoundError);
assert.ok(new WrongTypeError("WRONGTYPE") instanceof RedisCellError);
for (const x of [Cell, RedisCellStore, RedisCellThrottlerStorage, RateLimiterCell, RateLimiterCellGcra]) assert.equal(typeof x, "function");
const require = createRequire(import.meta.url);
assert.equal(readFileSync(require.resolve("redis-cell/redis_cell.lua"), "utf8"), REDIS_CELL_LUA);
console.log("esm ok");
