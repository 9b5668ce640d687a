import { createHash } from "node:crypto";
import type { Adapter, Reply } from "./adapter.js";
import { RedisCellError } from "./errors.js";

/** A Lua script run by EVALSHA, sent whole (EVAL) once per server that lacks it. */
export class Script {
  readonly sha: string;
  constructor(readonly source: string) {
    this.sha = createHash("sha1").update(source).digest("hex");
  }

  async run(a: Adapter, keys: readonly string[], args: readonly (string | number)[]): Promise<Reply> {
    const rest = [keys.length, ...keys, ...args];
    try {
      return await a.send(["EVALSHA", this.sha, ...rest], keys[0]);
    } catch (e) {
      if (!(e instanceof RedisCellError && e.code === "NOSCRIPT")) throw e;
      return a.send(["EVAL", this.source, ...rest], keys[0]);
    }
  }
}
