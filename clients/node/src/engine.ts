import { adapt, type Adapter, type Client, type Reply } from "./adapter.js";
import { EngineError, RedisCellError } from "./errors.js";
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
  throw new EngineError(
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

/**
 * Sends redis-cell's commands through one engine, chosen once: given, or
 * detected at the first call (and kept).
 */
export class Engine {
  readonly adapter: Adapter;
  #engine: Promise<EngineName> | undefined;

  constructor(client: Client, engine?: EngineName) {
    this.adapter = adapt(client);
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
    const readonly = READ_ONLY.has(name);
    const numkeys = name === "CL.THROTTLEALL" ? [keys.length] : [];
    const engine = await this.engine();
    if (engine === "module") {
      return this.adapter.send([name, ...numkeys, ...keys, ...args], keys[0], readonly);
    }
    if (MODULE_ONLY.has(name)) {
      throw new EngineError(`redis-cell: ${name} is module-only: the Functions twin has no policies, SHADOW or CL.TOP`);
    }
    if (engine === "eval") {
      return EVAL_SCRIPT.run(this.adapter, keys, [name.toLowerCase(), ...args]);
    }
    return this.adapter.send(
      [readonly ? "FCALL_RO" : "FCALL", functionName(name), keys.length, ...keys, ...args],
      keys[0],
      readonly,
    );
  }
}
