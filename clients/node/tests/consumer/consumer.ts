// A consumer's file: tsc --noEmit checks it against the installed package's types.
import { Cell, LibraryMissingError, LimiterMismatchError, RedisCellError, loadFunctions, type Decision } from "redis-cell";
import { RedisCellStore } from "redis-cell/express-rate-limit";
import { RedisCellThrottlerStorage } from "redis-cell/nestjs";
import { RateLimiterCell, RateLimiterCellGcra } from "redis-cell/rate-limiter-flexible";
import Redis from "ioredis";

const redis = new Redis();
const cell = new Cell(redis, { engine: "module" });
export async function check(): Promise<Decision> {
  await loadFunctions(redis);
  const d: Decision = await cell.throttle("k", { maxBurst: 1, countPerPeriod: 2, period: "1s" });
  const all = await cell.throttleAll(["{a}1", "{a}2"], [{ kind: "sw", limit: 2, window: 60 }, { kind: "fw", limit: 9, window: "day", tz: "+01:00" }]);
  const n: number = all.index;
  const lease = await cell.ccAcquire("jobs", 3, "30s");
  const id: string | null = lease.id;
  void n;
  void id;
  return d;
}
export const err = (e: unknown): string | undefined => (e instanceof RedisCellError ? e.reply : undefined);
export const holds = (e: unknown): string | undefined => (e instanceof LimiterMismatchError ? `${e.key}: ${e.holds}` : undefined);
export const lost = (e: unknown): string | undefined => (e instanceof LibraryMissingError ? e.reply : undefined);
export const store = new RedisCellStore({ sendCommand: (...args: string[]) => redis.call(args[0] ?? "", ...args.slice(1)) as never, algorithm: "sliding" });
export const storage = new RedisCellThrottlerStorage(redis);
export const limiter = new RateLimiterCell({ storeClient: redis, points: 5, duration: 1 });
export const gcra = new RateLimiterCellGcra({ storeClient: redis, points: 5, duration: 1 });
