import type { ClientRateLimitInfo, IncrementResponse, Options, Store } from "express-rate-limit";
import {
  fromSendCommand,
  fromSendCommandCluster,
  type Client,
  type SendCommandClusterFn,
  type SendCommandFn,
} from "./adapter.js";
import { Cell, type Decision } from "./commands.js";
import { limiterMismatch, type EngineName } from "./engine.js";
import { WrongTypeError } from "./errors.js";
import { checkPolicyOption, countFor, policyOf, type PolicyChoice } from "./policy.js";
import { isTwinCountBeyond } from "./replies.js";

/**
 * How the store counts:
 * - `fixed` (default): rate-limit-redis's counter, an INCR string with a TTL
 *   (FW.INCR), every hit counted; its keys carry over from rate-limit-redis.
 * - `sliding`: the exact sliding window (SW.ALLOW) of `limit` per `windowMs`.
 * - `gcra`: GCRA (CL.THROTTLE), `limit` per `windowMs` with a burst of
 *   `limit`, refilling smoothly.
 * The last two refuse on the server and do not count refused hits.
 * All three give the server the limit when the store knows it (see
 * `limit`), so that INFO and CL.TOP show the refusals.
 */
export type Algorithm = "fixed" | "sliding" | "gcra";

export interface RedisCellStoreOptions {
  /** rate-limit-redis's option: `(...args) => client.call(...args)` or `client.sendCommand(args)`. */
  sendCommand?: SendCommandFn;
  /** rate-limit-redis's cluster option. */
  sendCommandCluster?: SendCommandClusterFn;
  /** Or a client (ioredis, node-redis v4/v5, single or cluster). */
  client?: Client;
  /** Prepended to every key; rate-limit-redis's default. */
  prefix?: string;
  /**
   * rate-limit-redis 4's option to restart the window at every hit. Only
   * `false` is accepted: a window that restarts at every hit never frees a
   * client that keeps sending; `algorithm: "sliding"` is the exact answer.
   */
  resetExpiryOnChange?: false;
  algorithm?: Algorithm;
  /**
   * The limit the server is given, when express-rate-limit's `limit` is a
   * function of the request: express-rate-limit asks that function only
   * after the store has counted the hit, so the store cannot know it. Needed
   * by `sliding`, `gcra` and `policy`; without it the `fixed` mode counts
   * with no limit (the server refuses nothing: INFO counts no refusal and
   * CL.TOP lists none of its keys; express-rate-limit still refuses).
   */
  limit?: number;
  /**
   * Live limits (module only): the CL.POLICY the calls go through, a name
   * or a function of the client's key (without the prefix) answering one,
   * or `undefined` for the store's own limit. While the policy exists its
   * limiter decides (its limit and window; a `fixed` store needs an `FW`
   * policy, `sliding` an exact `SW`, `gcra` a `GCRA`), and the store maps the
   * decision onto express-rate-limit's own limit (its `RateLimit-Remaining`
   * is the policy's); without it the store's own numbers apply.
   */
  policy?: PolicyChoice<ExpressPolicyCall>;
  engine?: EngineName;
}

/** What a store's policy function is given: the client's key, without the prefix. */
export interface ExpressPolicyCall {
  key: string;
}

/**
 * An unbounded limit for the counting mode when the store does not know the
 * limit (express-rate-limit's is a function): a counter, never refused by
 * the server, that express-rate-limit compares with its own limit. Kept
 * below 2^53, where JavaScript and Lua still compute exactly.
 */
export const UNBOUNDED = 2 ** 52;

/** A store for express-rate-limit, a drop-in for rate-limit-redis. */
export class RedisCellStore implements Store {
  readonly prefix: string;
  readonly localKeys = false;
  readonly algorithm: Algorithm;
  readonly cell: Cell;
  windowMs = 60_000;
  #limit: number | undefined;
  readonly #policy: PolicyChoice<ExpressPolicyCall> | undefined;

  constructor(options: RedisCellStoreOptions) {
    if (typeof options !== "object" || options === null) {
      throw new TypeError("redis-cell: RedisCellStore needs an options object");
    }
    if ((options as { resetExpiryOnChange?: unknown }).resetExpiryOnChange === true) {
      throw new TypeError(
        "redis-cell: resetExpiryOnChange: true is not offered (a window restarted by every hit never frees a client " +
          'that keeps sending); use algorithm: "sliding" for an exact window that moves with each request',
      );
    }
    const given = [options.sendCommand, options.sendCommandCluster, options.client].filter((x) => x !== undefined);
    if (given.length !== 1) {
      throw new TypeError("redis-cell: RedisCellStore needs exactly one of sendCommand, sendCommandCluster or client");
    }
    const client =
      options.client ??
      (options.sendCommand ? fromSendCommand(options.sendCommand) : fromSendCommandCluster(options.sendCommandCluster as SendCommandClusterFn));
    this.cell = new Cell(client, options.engine === undefined ? {} : { engine: options.engine });
    this.prefix = options.prefix ?? "rl:";
    this.algorithm = options.algorithm ?? "fixed";
    if (!["fixed", "sliding", "gcra"].includes(this.algorithm)) {
      throw new TypeError(`redis-cell: algorithm must be "fixed", "sliding" or "gcra", not ${JSON.stringify(this.algorithm)}`);
    }
    this.#limit = options.limit;
    this.#policy = checkPolicyOption(options.policy, options.engine, "RedisCellStore");
  }

  /** Called by express-rate-limit (not awaited): takes windowMs and, where needed, the limit. */
  init(options: Options): void {
    this.windowMs = options.windowMs;
    const limit = options.limit as unknown;
    if (this.#limit === undefined && typeof limit === "number") this.#limit = limit;
    if (this.algorithm !== "fixed" && !(Number.isInteger(this.#limit) && (this.#limit as number) > 0)) {
      throw new TypeError(
        `redis-cell: algorithm "${this.algorithm}" needs the limit as a positive integer: ` +
          "give express-rate-limit a number as limit, or the store a limit option",
      );
    }
    this.#countingLimit();
  }

  /**
   * The "fixed" mode's limit for the server: express-rate-limit's (or the
   * store's) when known, else none (UNBOUNDED); a policy needs it, to map
   * the policy's decision onto express-rate-limit's limit.
   */
  #countingLimit(): number | undefined {
    const limit = this.#limit;
    if (limit !== undefined && !(Number.isInteger(limit) && limit >= 0 && limit < UNBOUNDED)) {
      throw new TypeError(`redis-cell: the limit must be an integer from 0 to 2^52, not ${JSON.stringify(limit)}`);
    }
    if (limit === undefined && this.#policy !== undefined) {
      throw new TypeError(
        "redis-cell: RedisCellStore with a policy needs the limit as a number: express-rate-limit's limit is a function, " +
          "which it asks only after the store has counted; give the store a limit option",
      );
    }
    return limit;
  }

  #key(key: string): string {
    return `${this.prefix}${key}`;
  }

  get #window(): string {
    return `${this.windowMs}ms`;
  }

  /**
   * The "fixed" mode's window: rate-limit-redis's key expires windowMs after
   * the server's current millisecond (PEXPIRE). The module ends a new window
   * at now + window rounded up to a whole millisecond, one later; a window
   * 1 ms shorter ends with rate-limit-redis's (or 1 ms before it when the
   * call falls exactly on a millisecond), so the keys of both stores live
   * alike.
   */
  get #fixedWindow(): string {
    return this.windowMs > 1 ? `${this.windowMs - 1}ms` : this.#window;
  }

  get #gcra() {
    const limit = this.#requireLimit();
    return { maxBurst: limit - 1, countPerPeriod: limit, period: this.#window };
  }

  #requireLimit(): number {
    if (this.#limit === undefined) throw new TypeError(`redis-cell: algorithm "${this.algorithm}" needs a limit`);
    return this.#limit;
  }

  #info(d: Decision, counted: number, policy?: string): ClientRateLimitInfo {
    const ms = d.limited && d.retryAfter >= 0 ? d.retryAfter : d.resetAfter;
    return { totalHits: counted, resetTime: this.#resetTime(ms, policy === undefined ? this.windowMs : Infinity) };
  }

  /**
   * The server rounds a window's end up to its millisecond expiry, so a new
   * window can answer windowMs + 1: never announce more than the window
   * (the store's own; a policy's window is the policy's).
   */
  #resetTime(ms: number, window = this.windowMs): Date {
    return new Date(Date.now() + Math.min(Math.max(ms, 0), window));
  }

  /**
   * The counting mode never reaches UNBOUNDED: a key that FW.INCR reads as
   * that many hits holds a GCRA state (a time in nanoseconds), the "gcra"
   * mode's.
   */
  async #notACounter(key: string, command: string): Promise<never> {
    const seen = new WrongTypeError(`WRONGTYPE key holds a value ${command} reads as a count of 2^52 or more, which no counter of the store reaches`);
    throw await limiterMismatch(this.cell.engineRef.adapter, 'the "fixed" store', [key], seen, "a counter (FW.INCR)");
  }

  async increment(key: string): Promise<IncrementResponse> {
    const k = this.#key(key);
    const policy = policyOf(this.#policy, { key }, "RedisCellStore");
    const live = policy === undefined ? {} : { policy };
    switch (this.algorithm) {
      case "fixed": {
        const limit = this.#countingLimit();
        if (limit === undefined) {
          const d = await this.cell.fwIncr(k, UNBOUNDED, this.#fixedWindow, { ms: true });
          if (d.limited) return this.#notACounter(k, "FW.INCR");
          return this.#info(d, UNBOUNDED - d.remaining);
        }
        // COUNTALL: every hit counted, as rate-limit-redis's INCR counts
        // it; the server knows the limit, so its INFO and CL.TOP show the
        // refusals, and the count is the limit less the remaining.
        let d: Decision;
        try {
          d = await this.cell.fwIncr(k, limit, this.#fixedWindow, { ms: true, countAll: true, ...live });
        } catch (e) {
          if (isTwinCountBeyond(e)) return this.#notACounter(k, "FW.INCR");
          throw e;
        }
        if (d.limit - d.remaining > UNBOUNDED) return this.#notACounter(k, "FW.INCR");
        return this.#info(d, countFor(limit, d, 1), policy);
      }
      case "sliding": {
        const limit = this.#requireLimit();
        const d = await this.cell.swAllow(k, limit, this.#window, { ms: true, ...live });
        // A refusal is not recorded: express-rate-limit sees one over its limit.
        return this.#info(d, countFor(limit, d, 1), policy);
      }
      case "gcra": {
        const limit = this.#requireLimit();
        const d = await this.cell.throttle(k, this.#gcra, { ms: true, ...live });
        return this.#info(d, countFor(limit, d, 1), policy);
      }
    }
  }

  /** Gives one hit back: never below zero, the window's end kept. */
  async decrement(key: string): Promise<void> {
    const k = this.#key(key);
    switch (this.algorithm) {
      case "fixed":
        await this.cell.fwRefund(k, UNBOUNDED, this.#fixedWindow, 1, { ms: true });
        return;
      case "sliding":
        await this.cell.swRefund(k, this.#requireLimit(), this.#window, 1, { ms: true });
        return;
      case "gcra":
        await this.cell.refund(k, this.#gcra, 1, { ms: true });
        return;
    }
  }

  /** The hits and reset time of a key, or undefined when it has none. */
  async get(key: string): Promise<ClientRateLimitInfo | undefined> {
    const k = this.#key(key);
    let d: Decision;
    let hits: number;
    switch (this.algorithm) {
      case "fixed":
        d = await this.cell.fwPeek(k, UNBOUNDED, this.#fixedWindow, { ms: true });
        if (d.remaining === 0) return this.#notACounter(k, "FW.PEEK");
        hits = UNBOUNDED - d.remaining;
        break;
      case "sliding": {
        const limit = this.#requireLimit();
        d = await this.cell.swPeek(k, limit, this.#window, { ms: true });
        hits = limit - d.remaining;
        break;
      }
      case "gcra": {
        const limit = this.#requireLimit();
        d = await this.cell.peek(k, this.#gcra, { ms: true });
        hits = limit - d.remaining;
        break;
      }
    }
    if (hits <= 0) return undefined;
    return { totalHits: hits, resetTime: this.#resetTime(d.resetAfter) };
  }

  async resetKey(key: string): Promise<void> {
    const k = this.#key(key);
    await this.cell.send(["DEL", k], k);
  }
}

export default RedisCellStore;

// The error classes, so that code using only this entry point can tell the failures apart.
export * from "./errors.js";
