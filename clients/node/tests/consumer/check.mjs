// Run from a scratch project with redis-cell installed: ESM imports of every entry point.
import assert from "node:assert/strict";
import { Cell, REDIS_CELL_LUA } from "redis-cell";
import { RedisCellStore } from "redis-cell/express-rate-limit";
import { RedisCellThrottlerStorage } from "redis-cell/nestjs";
import { RateLimiterCell, RateLimiterCellGcra } from "redis-cell/rate-limiter-flexible";
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";

for (const x of [Cell, RedisCellStore, RedisCellThrottlerStorage, RateLimiterCell, RateLimiterCellGcra]) assert.equal(typeof x, "function");
const require = createRequire(import.meta.url);
assert.equal(readFileSync(require.resolve("redis-cell/redis_cell.lua"), "utf8"), REDIS_CELL_LUA);
console.log("esm ok");
