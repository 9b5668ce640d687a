// A server's error reply as the package's error class (errors.ts). The
// clients throw their own classes; the adapter passes every error through
// asCellError.
import {
  ArgumentError,
  EngineError,
  LibraryMissingError,
  ModuleMissingError,
  OutOfRangeError,
  RedisCellError,
  WrongTypeError,
} from "./errors.js";

/** The module's command names, as an unknown-command reply quotes them. */
const MODULE_COMMAND = /^ERR unknown command [`']((?:CL|SW|FW|CC)\.[A-Za-z]+|GCRA)[`']/;
/** The module's (and the twin's) texts for a string that is not the command's state. */
const STATE_OF_ANOTHER_KIND = /^ERR key holds (a string that is not a valid|an exact sliding window;|an APPROX sliding window;)/;
/** Redis 6.2 has no Functions: FCALL itself is unknown there. */
const NO_FCALL = /^ERR unknown command [`']FCALL(_RO)?[`']/;
/** Functions' reply when the library (or one of its functions) is not loaded, on every server with Functions. */
export const FUNCTION_NOT_FOUND = "ERR Function not found";

/** The twin's reply to a COUNTALL count beyond 2^53, which only the module computes. */
const TWIN_COUNT_BEYOND = /^ERR count out of the functions' range/;

/**
 * Whether an error is the twin's refusal of a COUNTALL count beyond 2^53:
 * for a store whose counters stay below 2^52, a key holding another
 * limiter's state (a GCRA time in nanoseconds), where the module counts on.
 */
export function isTwinCountBeyond(e: unknown): boolean {
  return e instanceof RedisCellError && TWIN_COUNT_BEYOND.test(e.reply);
}

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
