import rlf from "rate-limiter-flexible";
import type { IRateLimiterStoreOptions } from "rate-limiter-flexible";
import type { Reply } from "./adapter.js";
import { Cell, type Decision } from "./commands.js";
import { limiterMismatch, type EngineName } from "./engine.js";
import { LimiterMismatchError, WrongTypeError } from "./errors.js";
import { checkPolicyOption, countFor, policyOf, type PolicyChoice } from "./policy.js";
import { isTwinCountBeyond } from "./replies.js";

/** RateLimiterRedis's options, the engine, and a policy. */
export interface RateLimiterCellOptions extends IRateLimiterStoreOptions {
  rejectIfRedisNotReady?: boolean;
  engine?: EngineName;
  /**
   * Live limits (module only): the CL.POLICY the calls go through, a name
   * or a function of the stored key (`keyPrefix:key`) answering one, or
   * `undefined` for the limiter's own `points` and `duration`. While the
   * policy exists its limiter decides (an `FW` policy for RateLimiterCell,
   * a `GCRA` one for RateLimiterCellGcra), and the limiter maps the
   * decision onto its own `points` (its `remainingPoints` is the
   * policy's); without it the limiter's own numbers apply.
   */
  policy?: PolicyChoice<RateLimiterPolicyCall>;
}

/** What a limiter's policy function is given: the key as stored, with the limiter's keyPrefix. */
export interface RateLimiterPolicyCall {
  key: string;
}

/**
 * The most points a key counts (exact as a double), and FW.INCR's limit
 * where `points` is none it takes (refunds, a limiter without integer points).
 */
const UNBOUNDED = 2 ** 52;

/** What the store methods hand to rate-limiter-flexible: [consumed points, ms before the next window]. */
type StoreResult = [number, number];

/** RateLimiterRedis's checks of the points, with its texts, so that both reject the same calls. */
function checkPoints(points: unknown): void {
  if (typeof points === "string") {
    if (!/^[1-9][0-9]*$/.test(points)) {
      throw new Error("Consuming string different than integer values is not supported by this package");
    }
  } else if (!Number.isInteger(points)) {
    throw new Error("Consuming decimal number of points is not supported by this package");
  }
}

const int = (r: Reply | undefined): number => Number(r);

/**
 * FW.INCR and FW.REFUND read the key as a count; with the limit UNBOUNDED,
 * a count at or above it is no counter of this store: a GCRA state (a time
 * in nanoseconds, 19 digits) written by RateLimiterCellGcra.
 */
async function notACounter(cell: Cell, rlKey: string, command: string): Promise<never> {
  const seen = new WrongTypeError(`WRONGTYPE key holds a value ${command} reads as a count of 2^52 or more, which no counter of RateLimiterCell reaches`);
  throw await limiterMismatch(cell.engineRef.adapter, "RateLimiterCell", [rlKey], seen, "a counter (FW.INCR)");
}

interface RedisInternals {
  _isRedisReady(rlKey: string, isReadonly: boolean): boolean;
  points: number;
}

/** The limiter's `points` as FW.INCR's limit, or undefined where it is none (not an integer from 0 to 2^52). */
function limitOf(points: number): number | undefined {
  return Number.isInteger(points) && points >= 0 && points < UNBOUNDED ? points : undefined;
}

/**
 * rate-limiter-flexible's RateLimiterRedis on redis-cell: the same options,
 * methods (inherited: consume, penalty, reward, block, get, set, delete,
 * getKey, insuranceLimiter, execEvenly, inMemoryBlockOnConsumed...) and
 * RateLimiterRes; the same state (an INCR counter with a TTL), written by
 * FW.INCR (module or Functions twin). One difference: a reward never takes
 * the count below 0 (FW.REFUND), where RateLimiterRedis stores negative
 * points that a later burst can spend. A key that holds another limiter's
 * state (RateLimiterCellGcra's time) is a LimiterMismatchError. FW.INCR
 * is given `points` as its limit and counts every point (COUNTALL), so that
 * the server's INFO and CL.TOP show the refusals.
 */
export class RateLimiterCell extends rlf.RateLimiterRedis {
  readonly #opts: RateLimiterCellOptions;
  #cell: Cell | undefined;
  readonly #policy: PolicyChoice<RateLimiterPolicyCall> | undefined;

  constructor(opts: RateLimiterCellOptions) {
    super(opts);
    this.#opts = opts;
    this.#policy = checkPolicyOption(opts.policy, opts.engine, this.constructor.name);
  }

  /** The `POLICY name` option of a call on `rlKey`, if any. */
  protected live(rlKey: string): { policy?: string } {
    const policy = policyOf(this.#policy, { key: rlKey }, this.constructor.name);
    return policy === undefined ? {} : { policy };
  }

  /**
   * The client is wrapped at the first call, not here: as with
   * RateLimiterRedis, a client that is not ready (or not one at all) makes
   * the calls fail (`rejectIfRedisNotReady`, the client's own error), not
   * the constructor.
   */
  protected get cell(): Cell {
    this.#cell ??= new Cell(this.#opts.storeClient as object, this.#opts.engine === undefined ? {} : { engine: this.#opts.engine });
    return this.#cell;
  }

  protected ready(rlKey: string, isReadonly: boolean): void {
    if (!(this as unknown as RedisInternals)._isRedisReady(rlKey, isReadonly)) {
      throw new Error("Redis connection is not ready");
    }
  }

  /** Called by rate-limiter-flexible for consume, penalty, reward (negative points), block and set (forceExpire). */
  async _upsert(rlKey: string, points: number | string, msDuration: number, forceExpire = false): Promise<StoreResult> {
    checkPoints(points);
    this.ready(rlKey, false);
    const n = Number(points);
    const secDuration = Math.floor(msDuration / 1000);
    if (forceExpire) {
      const set = secDuration > 0 ? ["SET", rlKey, n, "EX", secDuration] : ["SET", rlKey, n];
      const [, ttl] = await this.cell.transaction(rlKey, [set, ["PTTL", rlKey]]);
      return [n, int(ttl)];
    }
    if (secDuration <= 0) {
      // No window: a counter that never expires, as RateLimiterRedis keeps it.
      const [consumed, ttl] = await this.cell.transaction(rlKey, [["INCRBY", rlKey, n], ["PTTL", rlKey]]);
      return [int(consumed), int(ttl)];
    }
    // RateLimiterRedis's key expires secDuration after the server's
    // current millisecond (SET ... EX). The module ends a new window at
    // now + window rounded up to a whole millisecond; a window 1 ms shorter
    // ends at that same instant, so the key's PTTL and msBeforeNext are
    // RateLimiterRedis's, never above the duration.
    const window = `${secDuration * 1000 - 1}ms`;
    if (Math.abs(n) > UNBOUNDED) {
      // Refused by FW.INCR as beyond its limit, which would read as a key of another limiter.
      throw new RangeError(`redis-cell: RateLimiterCell counts at most 2^52 points a key (FW.INCR's exact range), not ${n}`);
    }
    let d: Decision;
    const limit = limitOf((this as unknown as RedisInternals).points);
    if (n >= 0 && limit !== undefined) {
      // Every point counted, as RateLimiterRedis's INCRBY counts it; the
      // count is the limit less the remaining (below 0 when over).
      try {
        d = await this.cell.fwIncr(rlKey, limit, window, { quantity: n, ms: true, countAll: true, ...this.live(rlKey) });
      } catch (e) {
        if (isTwinCountBeyond(e)) return notACounter(this.cell, rlKey, "FW.INCR");
        throw e;
      }
      if (d.limit - d.remaining > UNBOUNDED) return notACounter(this.cell, rlKey, "FW.INCR");
      return [countFor(limit, d, 0), d.resetAfter];
    }
    if (n >= 0) {
      if (this.#policy !== undefined) {
        throw new TypeError(`redis-cell: ${this.constructor.name} with a policy needs points as an integer from 0 to 2^52`);
      }
      d = await this.cell.fwIncr(rlKey, UNBOUNDED, window, { quantity: n, ms: true });
      if (d.limited) return notACounter(this.cell, rlKey, "FW.INCR");
    } else {
      d = await this.cell.fwRefund(rlKey, UNBOUNDED, window, -n, { ms: true });
      if (d.remaining === 0) return notACounter(this.cell, rlKey, "FW.REFUND");
    }
    return [UNBOUNDED - d.remaining, d.resetAfter];
  }

  async _get(rlKey: string): Promise<StoreResult | null> {
    this.ready(rlKey, true);
    let value: Reply | undefined;
    let ttl: Reply | undefined;
    try {
      [value, ttl] = await this.cell.transaction(rlKey, [["GET", rlKey], ["PTTL", rlKey]]);
    } catch (e) {
      if (e instanceof WrongTypeError && !(e instanceof LimiterMismatchError)) {
        throw await limiterMismatch(this.cell.engineRef.adapter, "RateLimiterCell", [rlKey], e, "a counter (FW.INCR)");
      }
      throw e;
    }
    if (value === null || value === undefined) return null;
    const points = int(value);
    if (!(Math.abs(points) < UNBOUNDED)) return notACounter(this.cell, rlKey, "GET");
    return [points, int(ttl)];
  }

  async _delete(rlKey: string): Promise<boolean> {
    return int(await this.cell.send(["DEL", rlKey], rlKey)) > 0;
  }
}

/**
 * The GCRA variant (CL.THROTTLE): `points` per `duration` refilling
 * smoothly (one point every duration/points) with a burst of `points`,
 * instead of a window that empties at once. A refused consume takes
 * nothing; msBeforeNext is then when it can succeed, and otherwise when the
 * bucket is full again. reward gives points back (CL.REFUND); penalty takes
 * them only where they fit. A call's `customDuration` is its period (0 is
 * refused: a bucket that never refills is no GCRA). A GCRA key holds a
 * time, not a count: `block`, `set` and `blockDuration` are not offered.
 */
export class RateLimiterCellGcra extends RateLimiterCell {
  constructor(opts: RateLimiterCellOptions) {
    super(opts);
    if ((opts.blockDuration ?? 0) > 0) {
      throw new TypeError("redis-cell: RateLimiterCellGcra has no blockDuration: a GCRA key holds a time, not a count");
    }
    if (!(Number.isInteger(opts.points ?? 4) && (opts.points ?? 4) > 0 && (opts.duration ?? 1) > 0)) {
      throw new TypeError("redis-cell: RateLimiterCellGcra needs points >= 1 and duration > 0");
    }
  }

  /** The GCRA of `points` per `msDuration` (the limiter's duration, or a call's customDuration). */
  #params(msDuration: number = this.msDuration) {
    const points = (this as unknown as RedisInternals).points;
    return { maxBurst: points - 1, countPerPeriod: points, period: `${msDuration}ms` };
  }

  override async _upsert(rlKey: string, points: number | string, msDuration: number, forceExpire = false): Promise<StoreResult> {
    checkPoints(points);
    this.ready(rlKey, false);
    if (forceExpire) {
      throw new TypeError("redis-cell: RateLimiterCellGcra offers no block or set: a GCRA key holds a time, not a count");
    }
    if (!(msDuration > 0)) {
      throw new TypeError(
        "redis-cell: RateLimiterCellGcra needs a customDuration above 0: a GCRA key refills over its duration, and one that never refills is no GCRA",
      );
    }
    const n = Number(points);
    const p = this.#params(msDuration);
    if (n < 0) {
      const d = await this.cell.refund(rlKey, p, -n, { ms: true });
      return [p.countPerPeriod - d.remaining, d.resetAfter];
    }
    const d = await this.cell.throttle(rlKey, p, { quantity: n, ms: true, ...this.live(rlKey) });
    if (d.limited) return [p.countPerPeriod + Math.max(n, 1), d.retryAfter];
    return [countFor(p.countPerPeriod, d, 0), d.resetAfter];
  }

  override async _get(rlKey: string): Promise<StoreResult | null> {
    this.ready(rlKey, true);
    const p = this.#params();
    const d = await this.cell.peek(rlKey, p, { ms: true });
    if (d.remaining >= p.countPerPeriod) return null;
    return [p.countPerPeriod - d.remaining, d.resetAfter];
  }
}

export { RateLimiterRes } from "rate-limiter-flexible";

// The error classes, so that code using only this entry point can tell the failures apart.
export * from "./errors.js";
