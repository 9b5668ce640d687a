/**
 * The package ships two builds (ESM and CommonJS), so an application can
 * hold two copies of each class: its own code imports one while a
 * dependency (a NestJS app compiled to CommonJS) requires the other.
 * `instanceof` is answered by the class's name along the value's prototype
 * chain, among the package's own classes (those carrying this mark), so that
 * it holds across both copies, as it does within one.
 */
const BRAND = Symbol.for("redis-cell.error-class");

function isInstance(of: unknown, value: unknown): boolean {
  if (typeof of !== "function") return false;
  if (Function.prototype[Symbol.hasInstance].call(of, value)) return true;
  if (typeof value !== "object" || value === null) return false;
  for (let p: object | null = Object.getPrototypeOf(value); p !== null; p = Object.getPrototypeOf(p)) {
    if (!Object.prototype.hasOwnProperty.call(p, "constructor")) continue;
    const c: unknown = (p as { constructor: unknown }).constructor;
    if (typeof c === "function" && BRAND in c && c.name === of.name) return true;
  }
  return false;
}

/**
 * An error reply from the server (or from the Functions twin), with its
 * text exactly as the server sent it: `ERR invalid period: ...`,
 * `WRONGTYPE ...`. `code` is its first word. Replies redis-cell knows are
 * raised as the subclasses below; any other (`NOPERM`, `READONLY`, `OOM`...)
 * as this class.
 */
export class RedisCellError extends Error {
  readonly reply: string;
  readonly code: string;
  constructor(reply: string, options?: { cause?: unknown; message?: string }) {
    super(options?.message ?? reply, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = "RedisCellError";
    this.reply = reply;
    this.code = reply.split(" ", 1)[0] ?? "";
  }

  static override [Symbol.hasInstance](value: unknown): boolean {
    return isInstance(this, value);
  }
}
Object.defineProperty(RedisCellError, BRAND, { value: true });

/** The server refused the call's arguments (`ERR invalid ...`, `ERR unknown option ...`, a wrong arity). */
export class ArgumentError extends RedisCellError {
  constructor(reply: string, options?: { cause?: unknown }) {
    super(reply, options);
    this.name = "ArgumentError";
  }
}

/** Parameters the engine cannot compute with (`ERR parameters out of range ...`). */
export class OutOfRangeError extends RedisCellError {
  constructor(reply: string, options?: { cause?: unknown }) {
    super(reply, options);
    this.name = "OutOfRangeError";
  }
}

/**
 * The key holds another kind of value than the command reads (`WRONGTYPE
 * ...`, or `ERR key holds ...` for a string that is no state of this
 * limiter).
 */
export class WrongTypeError extends RedisCellError {
  constructor(reply: string, options?: { cause?: unknown; message?: string }) {
    super(reply, options);
    this.name = "WrongTypeError";
  }
}

/**
 * A key written by one limiter and read by another (a store switched from
 * its fixed window to its sliding one, RateLimiterCell and
 * RateLimiterCellGcra on one prefix...). `message` names what the key holds
 * and the way out; `reply` is the server's own text (or, where the server
 * read the value as a number and answered, a description of the value).
 */
export class LimiterMismatchError extends WrongTypeError {
  /** The key whose state belongs to another limiter. */
  readonly key: string;
  /** What the key holds, in words ("a GCRA state (CL.THROTTLE) ..."). */
  readonly holds: string;
  constructor(key: string, holds: string, message: string, reply: string, options?: { cause?: unknown }) {
    super(reply, { ...options, message });
    this.name = "LimiterMismatchError";
    this.key = key;
    this.holds = holds;
  }
}

/** The engine cannot be chosen or does not offer what was asked. */
export class EngineError extends Error {
  /** The server's reply that showed it, when there was one. */
  readonly reply: string | undefined;
  constructor(message: string, options?: { cause?: unknown; reply?: string }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = "EngineError";
    this.reply = options?.reply;
  }

  static override [Symbol.hasInstance](value: unknown): boolean {
    return isInstance(this, value);
  }
}
Object.defineProperty(EngineError, BRAND, { value: true });

/** A command the Functions twin does not have (policies, `SHADOW`, `CL.TOP`). */
export class ModuleOnlyError extends EngineError {
  constructor(message: string, options?: { cause?: unknown; reply?: string }) {
    super(message, options);
    this.name = "ModuleOnlyError";
  }
}

/**
 * The server has not (or no longer has) the engine in use: neither the
 * module nor the twin's library at detection, or one of the two subclasses.
 */
export class EngineNotFoundError extends EngineError {
  constructor(message: string, options?: { cause?: unknown; reply?: string }) {
    super(message, options);
    this.name = "EngineNotFoundError";
  }
}

/** The module's commands are unknown to the server (`ERR unknown command 'CL.THROTTLE'`): not loaded, or unloaded. */
export class ModuleMissingError extends EngineNotFoundError {
  constructor(message: string, options?: { cause?: unknown; reply?: string }) {
    super(message, options);
    this.name = "ModuleMissingError";
  }
}

/**
 * The twin's library is missing (`ERR Function not found`: a `FUNCTION
 * FLUSH`, a restart without persistence) and loading it again failed, or
 * did not bring the function back; `cause` is the load's error.
 */
export class LibraryMissingError extends EngineNotFoundError {
  constructor(message: string, options?: { cause?: unknown; reply?: string }) {
    super(message, options);
    this.name = "LibraryMissingError";
  }
}

/** The module's command names, as an unknown-command reply quotes them. */
const MODULE_COMMAND = /^ERR unknown command [`']((?:CL|SW|FW|CC)\.[A-Za-z]+|GCRA)[`']/;
/** The module's (and the twin's) texts for a string that is not the command's state. */
const STATE_OF_ANOTHER_KIND = /^ERR key holds (a string that is not a valid|an exact sliding window;|an APPROX sliding window;)/;
/** Redis 6.2 has no Functions: FCALL itself is unknown there. */
const NO_FCALL = /^ERR unknown command [`']FCALL(_RO)?[`']/;
/** Functions' reply when the library (or one of its functions) is not loaded, on every server with Functions. */
export const FUNCTION_NOT_FOUND = "ERR Function not found";

/** Redis 6.2 wraps the error of a command a script called in its own text; later servers keep the error's code first. */
const SCRIPT_ERROR_6_2 = /^ERR Error running script \(call to f_[0-9a-f]+\): @user_script:\d+: /;

/** A server's error text as its class (for a script's error, by the error inside). */
export function fromReply(reply: string, cause?: unknown): RedisCellError | EngineError {
  const options = cause === undefined ? {} : { cause };
  const inner = reply.replace(SCRIPT_ERROR_6_2, "");
  if (inner !== reply && (inner.startsWith("WRONGTYPE") || STATE_OF_ANOTHER_KIND.test(inner))) return new WrongTypeError(reply, options);
  if (reply.startsWith(FUNCTION_NOT_FOUND)) {
    return new LibraryMissingError(`redis-cell: the Functions library 'redis_cell' is not loaded on the server (${reply})`, {
      ...options,
      reply,
    });
  }
  if (NO_FCALL.test(reply)) {
    return new LibraryMissingError(
      "redis-cell: the server has no Functions (FCALL is unknown: Redis before 7.0), so the twin's library cannot be " +
        "loaded there: use the twin as an EVAL script ({ engine: \"eval\" }), or the module",
      { ...options, reply },
    );
  }
  const unknown = MODULE_COMMAND.exec(reply);
  if (unknown) {
    return new ModuleMissingError(
      `redis-cell: the server does not know ${unknown[1] ?? "the command"}: the redis-cell module is not loaded ` +
        "(loadmodule libredis_cell.so), or was unloaded; or use the Functions twin (loadFunctions, { engine: \"functions\" })",
      { ...options, reply },
    );
  }
  if (reply.startsWith("WRONGTYPE") || STATE_OF_ANOTHER_KIND.test(reply)) return new WrongTypeError(reply, options);
  if (/range/.test(reply) && /out of|overflows/.test(reply)) return new OutOfRangeError(reply, options);
  if (reply.startsWith("ERR ")) return new ArgumentError(reply, options);
  return new RedisCellError(reply, options);
}

/**
 * Clients throw their own error classes (ioredis `ReplyError`, node-redis
 * `ErrorReply`); a server's error reply is recognised by its shape, an
 * upper-case code first, so that connection errors pass through untouched.
 */
export function asCellError(e: unknown): unknown {
  if (e instanceof RedisCellError || e instanceof EngineError) return e;
  if (e instanceof Error && /^[A-Z][A-Z_-]*(\s|$)/.test(e.message)) {
    for (let p: object | null = Object.getPrototypeOf(e); p !== null; p = Object.getPrototypeOf(p)) {
      const name = (p as { constructor?: { name?: string } }).constructor?.name;
      if (name === "ReplyError" || name === "ErrorReply") return fromReply(e.message, e);
    }
  }
  return e;
}
