// What an operator reads from the server (as with redis-cli): INFO's
// counters, CL.TOP, and the policies they set, on a connection of its own.
import assert from "node:assert/strict";
import { CLIENTS } from "./clients.mjs";

/** An operator's connection to a server of the module (ioredis). */
export async function operator(port) {
  const { client, close } = await CLIENTS.ioredis.single(port);
  return {
    close,
    /** `INFO redis-cell`'s counter `name` (`fw_incr_limited`), as a number. */
    async counter(name) {
      const info = await client.info("redis-cell");
      const m = new RegExp(`^redis-cell_${name}:(\\d+)\\r?$`, "m").exec(info);
      assert.ok(m, `INFO redis-cell has no ${name}: ${info}`);
      return Number(m[1]);
    },
    /** CL.TOP's entry for `key` ([key, count, error, shadow]), or undefined; with `policy` (and `trial`) from that summary. */
    async top(key, { policy, trial = false } = {}) {
      const args = ["COUNT", "1024", ...(policy ? ["POLICY", policy] : []), ...(trial ? ["TRIAL"] : [])];
      const entries = await client.call("CL.TOP", ...args);
      return entries.find((e) => String(e[0]) === key);
    },
    /** `CL.POLICY word...`. */
    policy: (...words) => client.call("CL.POLICY", ...words.map(String)),
    /** A key's value and PTTL. */
    async state(key) {
      const [value, pttl] = await Promise.all([client.get(key), client.pttl(key)]);
      return { value, pttl };
    },
    client,
  };
}

/**
 * Runs `body` and answers how much INFO's counter `name` grew meanwhile
 * (the calls of one test file run one at a time on its own server).
 */
export async function delta(op, name, body) {
  const before = await op.counter(name);
  await body();
  return (await op.counter(name)) - before;
}

/**
 * Two keys' values are equal and their PTTLs those of one window opened
 * twice, the second time `gap` ms after the first (the two stores are hit
 * one after the other): both within the window, apart by at most the gap
 * and `slack` ms of reading them.
 */
export function sameState(ours, theirs, windowMs, at, gap, slack = 500) {
  assert.equal(ours.value, theirs.value, `${at}: the stored value`);
  for (const s of [ours, theirs]) assert.ok(s.pttl > windowMs - 5000 && s.pttl <= windowMs, `${at}: PTTL ${s.pttl} of ${windowMs}`);
  assert.ok(Math.abs(ours.pttl - theirs.pttl) <= gap + slack, `${at}: PTTL ${ours.pttl} vs ${theirs.pttl}, opened ${gap} ms apart`);
}
