import { adapt, type Adapter, type Client, type Reply } from "./adapter.js";
import {
  EngineError,
  EngineNotFoundError,
  LibraryMissingError,
  LimiterMismatchError,
  ModuleMissingError,
  ModuleOnlyError,
  RedisCellError,
  WrongTypeError,
} from "./errors.js";
import { FUNCTION_NOT_FOUND as FUNCTION_NOT_FOUND_TEXT } from "./replies.js";
import { REDIS_CELL_EVAL_LUA, REDIS_CELL_LUA } from "./generated/lua.js";
import { Script } from "./script.js";

/**
 * Where the commands run: the module's own commands, the Redis Functions
 * twin (functions/redis_cell.lua, library `redis_cell`) called by FCALL, or
 * the same twin as one EVAL script (functions/redis_cell_eval.lua) for
 * servers without Functions (Redis 6.2), chosen only explicitly.
 */
export type EngineName = "module" | "functions" | "eval";

/** The twin's EVAL script: its first argument is the command's name. */
const EVAL_SCRIPT = new Script(REDIS_CELL_EVAL_LUA);

/** The twin's library name, as FUNCTION LIST shows it. */
export const LIBRARY = "redis_cell";

/** The commands only the module has: the twin answers no such function. */
const MODULE_ONLY = new Set(["CL.POLICY", "CL.LIMIT", "CL.TOP"]);
/** Read-only commands: FCALL_RO, and a cluster may route them to a replica. */
const READ_ONLY = new Set(["CL.PEEK", "SW.PEEK", "FW.PEEK", "CC.PEEK"]);

/**
 * Finds the engine of a server: the module if `COMMAND INFO CL.THROTTLE`
 * knows the command, else the twin if its library is loaded, else an error
 * naming both ways out. It never loads anything: loading is `loadFunctions`.
 */
export async function detectEngine(client: Client): Promise<EngineName> {
  const a = adapt(client);
  let info: Reply;
  try {
    info = await a.send(["COMMAND", "INFO", "CL.THROTTLE"]);
  } catch (e) {
    if (e instanceof RedisCellError && e.code === "NOPERM") {
      throw new EngineError(
        `redis-cell: cannot detect the engine: ${e.reply}; set it explicitly ({ engine: "module" } or { engine: "functions" })`,
      );
    }
    throw e;
  }
  if (Array.isArray(info) && info[0] !== null && info[0] !== undefined) return "module";
  let libraries: Reply = [];
  try {
    libraries = await a.send(["FUNCTION", "LIST", "LIBRARYNAME", LIBRARY]);
  } catch (e) {
    // Servers before 7.0 have no FUNCTION: only the module can serve them.
    if (!(e instanceof RedisCellError)) throw e;
  }
  if (Array.isArray(libraries) && libraries.length > 0) return "functions";
  throw new EngineNotFoundError(
    "redis-cell: the server has neither the redis-cell module (no CL.THROTTLE command) " +
      `nor the Functions library '${LIBRARY}': load the module (loadmodule libredis_cell.so) ` +
      "or load the functions once with loadFunctions(client) (Redis 7.0+, Valkey), " +
      "or use the twin as an EVAL script ({ engine: \"eval\" }, Redis 6.2)",
  );
}

/**
 * Loads (or, with `replace`, replaces) the twin's library on the server, on
 * every master of a cluster. Answers the library's name.
 */
export async function loadFunctions(client: Client, options: { replace?: boolean } = {}): Promise<string> {
  const a = adapt(client);
  const args = ["FUNCTION", "LOAD", ...(options.replace === false ? [] : ["REPLACE"]), REDIS_CELL_LUA];
  for (const m of await a.masters()) await m.send(args);
  return LIBRARY;
}

/** The twin's function for a command: CL.THROTTLE -> cl_throttle. */
export function functionName(command: string): string {
  return command.toLowerCase().replace(".", "_");
}

/** The states a key can hold, in words, for the errors that name them. */
const HOLDS = {
  gcra: "a GCRA state (CL.THROTTLE's time in nanoseconds, as RateLimiterCellGcra and the \"gcra\" store keep it)",
  counter: "a counter (an integer: FW.INCR's fixed window, as RateLimiterCell, RateLimiterRedis and rate-limit-redis keep it)",
  moduleWindow: "a sliding window (SW.ALLOW, the module's cell-swin type)",
  moduleLeases: "concurrency leases (CC.ACQUIRE, the module's cell-conc type)",
  twinExact: "an exact sliding window (SW.ALLOW, as the Functions twin keeps it)",
  twinApprox: "an APPROX sliding window (SW.ALLOW APPROX, as the Functions twin keeps it)",
  twinLeases: "concurrency leases (CC.ACQUIRE, as the Functions twin keeps them)",
};

/** The kind of state a key holds, as limiterMismatch compares it with what a key should hold. */
export type StateKind = "gcra" | "counter" | "window" | "leases" | "other";

/** What a command keeps in its key, for the same errors. */
function keeps(command: string): string {
  if (/^CL\.(THROTTLE|PEEK|RESERVE|REFUND)$/.test(command)) return "a GCRA state";
  if (command.startsWith("SW.")) return "a sliding window";
  if (command.startsWith("FW.")) return "a fixed window counter";
  if (command.startsWith("CC.")) return "concurrency leases";
  return "its own limiter's state";
}

/**
 * What a key holds: its kind and in words (null when it holds nothing),
 * from its type and, for a string, its first bytes. A TAT in nanoseconds
 * has 19 digits; a counter stays far below 2^52 (16 digits), which no store
 * reaches.
 */
export async function describeKey(a: Adapter, key: string): Promise<{ kind: StateKind; words: string } | null> {
  const type = String(await a.send(["TYPE", key], key, true));
  switch (type) {
    case "none":
      return null;
    case "cell-swin":
      return { kind: "window", words: HOLDS.moduleWindow };
    case "cell-conc":
      return { kind: "leases", words: HOLDS.moduleLeases };
    case "string":
      break;
    default:
      return { kind: "other", words: `a ${type}, which is no redis-cell state` };
  }
  const head = await a.send(["GETRANGE", key, 0, 23], key, true);
  const v = Buffer.isBuffer(head) ? head.toString("latin1") : String(head ?? "");
  if (v.startsWith("\0SWE")) return { kind: "window", words: HOLDS.twinExact };
  if (v.startsWith("\0SWA")) return { kind: "window", words: HOLDS.twinApprox };
  if (v.startsWith("\0CCL")) return { kind: "leases", words: HOLDS.twinLeases };
  if (/^-?[0-9]+$/.test(v)) return v.length >= 17 ? { kind: "gcra", words: HOLDS.gcra } : { kind: "counter", words: HOLDS.counter };
  return { kind: "other", words: "a string that is no redis-cell state" };
}

/**
 * The error for a key that another limiter wrote, naming what it holds;
 * `cause` (the server's error) when the keys cannot be read or hold
 * nothing any more. `expects` says in words what the caller keeps there;
 * `fits`, for a call of several keys, the kind each key may hold, so that
 * only the keys of another kind are named.
 */
export async function limiterMismatch(
  a: Adapter,
  command: string,
  keys: readonly string[],
  cause: RedisCellError,
  expects: string = keeps(command),
  fits?: readonly StateKind[],
): Promise<RedisCellError> {
  let found: [string, { kind: StateKind; words: string }][];
  try {
    const all = await Promise.all(keys.map(async (k) => [k, await describeKey(a, k)] as const));
    found = all.filter((x): x is [string, { kind: StateKind; words: string }] => x[1] !== null);
  } catch {
    return cause;
  }
  if (fits !== undefined) {
    const wrong = found.filter(([k, d]) => fits[keys.indexOf(k)] !== d.kind);
    if (wrong.length > 0) found = wrong;
  }
  const first = found[0];
  if (first === undefined) return cause;
  const fix =
    "One key serves one limiter: this one was written by another (another algorithm of a store, or another limiter " +
    "class, on the same prefix). Give each limiter its own key prefix, or delete the key to start it afresh.";
  const message =
    found.length === 1
      ? `redis-cell: the key '${first[0]}' holds ${first[1].words}, where ${command} keeps ${expects}. ${fix}`
      : `redis-cell: ${command}'s keys hold ${found.map(([k, d]) => `'${k}': ${d.words}`).join("; ")}. ${fix}`;
  return new LimiterMismatchError(first[0], first[1].words, message, cause.reply, { cause });
}

/**
 * Sends redis-cell's commands through one engine, chosen once: given, or
 * detected at the first call (and kept until the module turns out to be
 * gone). On the Functions twin, a library the server lost (`FUNCTION
 * FLUSH`, a restart without persistence) is loaded again (`FUNCTION LOAD
 * REPLACE`, on every master) and the call retried, once.
 */
export class Engine {
  readonly adapter: Adapter;
  #engine: Promise<EngineName> | undefined;
  readonly #given: boolean;
  #reloading: Promise<void> | undefined;

  constructor(client: Client, engine?: EngineName) {
    this.adapter = adapt(client);
    this.#given = engine !== undefined;
    if (engine !== undefined) {
      if (engine !== "module" && engine !== "functions" && engine !== "eval") {
        throw new TypeError(
          `redis-cell: engine must be "module", "functions" or "eval", not ${JSON.stringify(engine)}`,
        );
      }
      this.#engine = Promise.resolve(engine);
    }
  }

  /** The engine in use (detected at the first call when not given). */
  engine(): Promise<EngineName> {
    if (this.#engine === undefined) {
      const p = detectEngine(this.adapter);
      // A failed detection is not kept: the next call tries again (the
      // functions may have been loaded since).
      p.catch(() => {
        if (this.#engine === p) this.#engine = undefined;
      });
      this.#engine = p;
    }
    return this.#engine;
  }

  /**
   * Sends `command keys... args...` (`CL.THROTTLEALL`'s numkeys is added
   * here from `keys`) to the module, or as FCALL to the twin.
   */
  async call(command: string, keys: readonly string[], args: readonly (string | number)[]): Promise<Reply> {
    const name = command.toUpperCase();
    const engine = await this.engine();
    try {
      return await this.#send(engine, name, keys, args);
    } catch (e) {
      if (engine === "functions" && e instanceof LibraryMissingError && e.reply?.startsWith(FUNCTION_NOT_FOUND_TEXT)) {
        return this.#reloadAndRetry(name, keys, args, e);
      }
      throw await this.#explain(engine, name, keys, e);
    }
  }

  /** A call's error as the caller should see it. */
  async #explain(engine: EngineName, name: string, keys: readonly string[], e: unknown): Promise<unknown> {
    if (e instanceof ModuleMissingError && engine === "module" && !this.#given) {
      // The module was unloaded: the next call detects again (the twin may be there).
      this.#engine = undefined;
    }
    if (e instanceof WrongTypeError && !(e instanceof LimiterMismatchError)) {
      return limiterMismatch(this.adapter, name, keys, e);
    }
    return e;
  }

  async #reloadAndRetry(
    name: string,
    keys: readonly string[],
    args: readonly (string | number)[],
    missing: LibraryMissingError,
  ): Promise<Reply> {
    let loadError: unknown;
    try {
      await this.reload();
    } catch (e) {
      loadError = e;
    }
    try {
      // Another client may have loaded it meanwhile: the retry tells. It goes
      // to the master the library was loaded on, not to a replica that may
      // not have received the load yet.
      return await this.#send("functions", name, keys, args, true);
    } catch (e) {
      if (!(e instanceof LibraryMissingError)) throw await this.#explain("functions", name, keys, e);
      const why = loadError === undefined ? "the function is still not found after the load" : `the load failed: ${String((loadError as Error).message ?? loadError)}`;
      throw new LibraryMissingError(
        `redis-cell: the Functions library '${LIBRARY}' is missing on the server (${missing.reply ?? "ERR Function not found"}) ` +
          `and loading it again did not bring it back (${why}): load it with a user allowed FUNCTION LOAD ` +
          "(loadFunctions(client)), or use the module",
        { cause: loadError ?? e, reply: e.reply ?? FUNCTION_NOT_FOUND_TEXT },
      );
    }
  }

  /**
   * Loads the twin's library again on every master (REPLACE: two clients
   * doing it at once both succeed). Calls that fail at once share one load.
   */
  reload(): Promise<void> {
    if (this.#reloading === undefined) {
      const p = (async () => {
        const masters = await this.adapter.masters();
        const args = ["FUNCTION", "LOAD", "REPLACE", REDIS_CELL_LUA];
        const results = await Promise.allSettled(masters.map((m) => m.send(args)));
        const failed = results.find((r): r is PromiseRejectedResult => r.status === "rejected");
        if (failed) throw failed.reason;
      })();
      this.#reloading = p;
      p.then(
        () => (this.#reloading = undefined),
        () => (this.#reloading = undefined),
      );
    }
    return this.#reloading;
  }

  #send(engine: EngineName, name: string, keys: readonly string[], args: readonly (string | number)[], onMaster = false): Promise<Reply> {
    const readonly = READ_ONLY.has(name);
    const numkeys = name === "CL.THROTTLEALL" ? [keys.length] : [];
    if (engine === "module") {
      return this.adapter.send([name, ...numkeys, ...keys, ...args], keys[0], readonly);
    }
    if (MODULE_ONLY.has(name)) {
      return Promise.reject(
        new ModuleOnlyError(`redis-cell: ${name} is module-only: the Functions twin has no policies, SHADOW or CL.TOP`),
      );
    }
    if (engine === "eval") {
      return EVAL_SCRIPT.run(this.adapter, keys, [name.toLowerCase(), ...args]);
    }
    return this.adapter.send(
      [readonly ? "FCALL_RO" : "FCALL", functionName(name), keys.length, ...keys, ...args],
      keys[0],
      readonly && !onMaster,
    );
  }
}
