// The public error classes, and nothing else: every entry point re-exports
// this module whole, so that code using only one entry point can tell the
// failures apart. Replies become these classes in replies.ts.
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
