import type { EngineName } from "./engine.js";
import { ModuleOnlyError } from "./errors.js";

/** CL.POLICY's names: 1 to 64 bytes of letters, digits, `_`, `.` and `-`. */
const NAME = /^[A-Za-z0-9_.-]{1,64}$/;

/**
 * Which CL.POLICY a call of a store goes through: one name for every call,
 * or a function of the call answering a name, or `undefined` for none (the
 * app's own numbers). A call through a policy sends its usual command plus
 * `POLICY name`: the module applies the policy when it exists and the
 * call's own parameters when it does not (module only).
 */
export type PolicyChoice<Call> = string | ((call: Call) => string | undefined);

/** A policy name as CL.POLICY takes it, or a TypeError saying why not. */
export function checkPolicyName(name: unknown, where: string): string {
  if (typeof name !== "string" || !NAME.test(name)) {
    throw new TypeError(
      `redis-cell: ${where}: a policy name is 1 to 64 letters, digits, '_', '.' and '-' (as CL.POLICY takes it), not ${JSON.stringify(name)}`,
    );
  }
  return name;
}

/** The error for a policy on the Functions twin, which has none. */
export function policyOnTwin(where: string, engine: EngineName): ModuleOnlyError {
  return new ModuleOnlyError(
    `redis-cell: ${where}: a policy needs the module's engine; the ${engine === "eval" ? "EVAL" : "Functions"} twin has no ` +
      "policies (CL.POLICY): drop the policy option, or load the module",
  );
}

/**
 * Checks a store's policy option at construction: a name (checked) or a
 * function (its answers are checked at each call), and never with the
 * twin's engine given.
 */
export function checkPolicyOption<Call>(
  choice: PolicyChoice<Call> | undefined,
  engine: EngineName | undefined,
  where: string,
): PolicyChoice<Call> | undefined {
  if (choice === undefined) return undefined;
  if (typeof choice === "string") checkPolicyName(choice, where);
  else if (typeof choice !== "function") {
    throw new TypeError(`redis-cell: ${where}: policy must be a name or a function answering one, not ${JSON.stringify(choice)}`);
  }
  if (engine !== undefined && engine !== "module") throw policyOnTwin(where, engine);
  return choice;
}

/** The policy of one call, checked (a function's answer included). */
export function policyOf<Call>(choice: PolicyChoice<Call> | undefined, call: Call, where: string): string | undefined {
  if (choice === undefined) return undefined;
  const name = typeof choice === "string" ? choice : choice(call);
  return name === undefined ? undefined : checkPolicyName(name, where);
}

/**
 * The count a counting library compares with its own limit, from the
 * server's decision under the limit it was given, or under a policy's: the
 * server's remaining read against the app's limit, so that the library
 * refuses exactly when the server said limited. Without a policy (or with
 * one of the app's limit) it is the count itself.
 */
export function countFor(appLimit: number, d: { limited: boolean; remaining: number }, floor: number): number {
  const hits = appLimit - d.remaining;
  return d.limited ? Math.max(hits, appLimit + 1) : Math.min(Math.max(hits, floor), appLimit);
}
