/**
 * An error reply from the server (or from the Functions twin), with its
 * text exactly as the server sent it: `ERR invalid period: ...`,
 * `WRONGTYPE ...`. `code` is its first word.
 */
export class RedisCellError extends Error {
  readonly reply: string;
  readonly code: string;
  constructor(reply: string, options?: { cause?: unknown }) {
    super(reply, options);
    this.name = "RedisCellError";
    this.reply = reply;
    this.code = reply.split(" ", 1)[0] ?? "";
  }
}

/** The engine cannot be chosen or does not offer what was asked. */
export class EngineError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "EngineError";
  }
}

/**
 * Clients throw their own error classes (ioredis `ReplyError`, node-redis
 * `ErrorReply`); a server's error reply is recognised by its shape, an
 * upper-case code first, so that connection errors pass through untouched.
 */
export function asCellError(e: unknown): unknown {
  if (e instanceof RedisCellError) return e;
  if (e instanceof Error && /^[A-Z][A-Z_-]*(\s|$)/.test(e.message)) {
    for (let p: object | null = Object.getPrototypeOf(e); p !== null; p = Object.getPrototypeOf(p)) {
      const name = (p as { constructor?: { name?: string } }).constructor?.name;
      if (name === "ReplyError" || name === "ErrorReply") return new RedisCellError(e.message, { cause: e });
    }
  }
  return e;
}
