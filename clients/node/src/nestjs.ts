import type { ThrottlerStorage } from "@nestjs/throttler";
import type { Client, Reply } from "./adapter.js";
import { Engine, limiterMismatch, type EngineName } from "./engine.js";
import { LimiterMismatchError, ModuleMissingError, RedisCellError, WrongTypeError } from "./errors.js";
import { THROTTLER_MODULE_LUA, THROTTLER_TWIN_LUA } from "./generated/lua.js";
import { checkPolicyName, checkPolicyOption, policyOf, policyOnTwin, type PolicyChoice } from "./policy.js";
import { Script } from "./script.js";

/** What ThrottlerStorage.increment answers. */
export interface ThrottlerStorageRecord {
  totalHits: number;
  timeToExpire: number;
  isBlocked: boolean;
  timeToBlockExpire: number;
}

/** What a storage's policy function is given: increment's arguments. */
export interface ThrottlerPolicyCall {
  /** The guard's key (it names the throttler and the route's tracker). */
  key: string;
  throttlerName: string;
  limit: number;
  ttl: number;
}

export interface RedisCellThrottlerStorageOptions {
  /** Prepended to the keys (default `throttler:`). */
  prefix?: string;
  engine?: EngineName;
  /**
   * Live limits (module only): the CL.POLICY the hits' decisions go
   * through: a name for every throttler, an object mapping throttler names
   * to policy names (`{ default: "api", login: "login" }`; a throttler not
   * named has none), or a function of the call. While the policy exists its
   * limiter (an exact `SW` one) decides whether a hit is over the limit,
   * which then blocks as @nestjs/throttler's own limit does; without it the
   * throttler's own `limit` and `ttl` apply.
   */
  policy?: PolicyChoice<ThrottlerPolicyCall> | Readonly<Record<string, string>>;
}

/** A policy option as a PolicyChoice: an object of throttler names becomes a lookup. */
function policyChoice(
  policy: RedisCellThrottlerStorageOptions["policy"],
  engine: EngineName | undefined,
): PolicyChoice<ThrottlerPolicyCall> | undefined {
  if (typeof policy !== "object" || policy === null) return checkPolicyOption(policy, engine, "RedisCellThrottlerStorage");
  const names = new Map<string, string>();
  for (const [throttler, name] of Object.entries(policy)) {
    names.set(throttler, checkPolicyName(name, `RedisCellThrottlerStorage, throttler '${throttler}'`));
  }
  return checkPolicyOption((call: ThrottlerPolicyCall) => names.get(call.throttlerName), engine, "RedisCellThrottlerStorage");
}

const onModule = new Script(THROTTLER_MODULE_LUA);
/** A script's call of a command the server does not have (Redis 6.2 to 8, Valkey). */
const UNKNOWN_IN_SCRIPT = /Unknown (Redis )?command called from (Lua )?script/;
const onTwin = new Script(THROTTLER_TWIN_LUA);

/**
 * A storage for @nestjs/throttler that answers as its in-memory
 * ThrottlerStorageService does (hits live `ttl` each, a record window of
 * `ttl` renewed when it ends, a block of `blockDuration` once over the
 * limit, cleared with its hits when it ends), shared by every instance on
 * one server, in one round trip per call (a script on redis-cell's exact
 * sliding window and fixed window). On the module, every hit it refuses
 * is also refused by the server at the throttler's limit, so that INFO
 * (`sw_allow_limited`) and CL.TOP count it.
 */
export class RedisCellThrottlerStorage implements ThrottlerStorage {
  readonly prefix: string;
  readonly #e: Engine;
  readonly #policy: PolicyChoice<ThrottlerPolicyCall> | undefined;

  constructor(client: Client, options: RedisCellThrottlerStorageOptions = {}) {
    this.#e = new Engine(client, options.engine);
    this.prefix = options.prefix ?? "throttler:";
    this.#policy = policyChoice(options.policy, options.engine);
  }

  async increment(key: string, ttl: number, limit: number, blockDuration: number, throttlerName: string): Promise<ThrottlerStorageRecord> {
    // One hash tag: the three keys share a slot in a cluster. The guard's
    // key already names the throttler; the name is kept for custom keys.
    const base = `${this.prefix}{${key}}:${throttlerName}`;
    const engine = await this.#e.engine();
    const keys = [`${base}:hits`, `${base}:window`, `${base}:block`];
    const policy = policyOf(this.#policy, { key, throttlerName, limit, ttl }, "RedisCellThrottlerStorage");
    if (policy !== undefined && engine !== "module") throw policyOnTwin("RedisCellThrottlerStorage", engine);
    let r: Reply;
    try {
      r = await (engine === "module" ? onModule : onTwin).run(this.#e.adapter, keys, [
        Math.max(1, Math.ceil(ttl)),
        limit,
        Math.ceil(blockDuration),
        policy ?? "",
      ]);
    } catch (e) {
      // The script calls the module's commands: the server names none of them when they are unknown.
      if (engine === "module" && e instanceof RedisCellError && UNKNOWN_IN_SCRIPT.test(e.reply)) {
        throw new ModuleMissingError(
          "redis-cell: the server does not know the module's commands (FW.INCR, SW.ALLOW): the redis-cell module is " +
            "not loaded (loadmodule libredis_cell.so), or was unloaded; or use the Functions twin ({ engine: \"functions\" })",
          { cause: e, reply: e.reply },
        );
      }
      if (e instanceof WrongTypeError && !(e instanceof LimiterMismatchError)) {
        // The hits are a sliding window, the record's window a counter, the block an integer.
        throw await limiterMismatch(this.#e.adapter, "RedisCellThrottlerStorage", keys, e, "a sliding window in ':hits' and counters in ':window' and ':block'", [
          "window",
          "counter",
          "counter",
        ]);
      }
      throw e;
    }
    const a = r as Reply[];
    return {
      totalHits: Number(a[0]),
      timeToExpire: Number(a[1]),
      isBlocked: Number(a[2]) === 1,
      timeToBlockExpire: Number(a[3]),
    };
  }
}

export default RedisCellThrottlerStorage;

// The error classes, so that code using only this entry point can tell the failures apart.
export * from "./errors.js";
