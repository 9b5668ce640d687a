import type { Client, Reply } from "./adapter.js";
import { Engine, type EngineName } from "./engine.js";
import { checkPolicyName, policyOnTwin } from "./policy.js";

/** A duration: a number of seconds (as redis-cell takes it) or a string with a unit: "500ms", "1.5s", "15m", "1h", "1d". */
export type Duration = number | string;
/** A calendar window of FW.INCR (local midnight to midnight in TZ, ...). */
export type CalendarUnit = "minute" | "hour" | "day" | "week" | "month" | "year";

/** The five integers every limiter answers. Durations are seconds, or milliseconds with `ms: true`. */
export interface Decision {
  limited: boolean;
  limit: number;
  remaining: number;
  /** When a retry can succeed (-1 if allowed, or if the request can never fit). */
  retryAfter: number;
  /** When the limiter is back to full. */
  resetAfter: number;
}

/** CL.THROTTLEALL: the binding limiter's decision and its 1-based index among the limiters. */
export interface AllDecision extends Decision {
  index: number;
}

/** CC.ACQUIRE: the decision and the lease id (null when refused). */
export interface LeaseDecision extends Decision {
  id: string | null;
}

export interface GcraParams {
  maxBurst: number;
  countPerPeriod: number;
  period: Duration;
}

/** A limiter of CL.THROTTLEALL and CL.POLICY SET. */
export type Limiter =
  | ({ kind: "gcra" } & GcraParams)
  | { kind: "sw"; limit: number; window: Duration; approx?: boolean }
  | { kind: "fw"; limit: number; window: Duration; align?: boolean; countAll?: boolean }
  | { kind: "fw"; limit: number; window: CalendarUnit; tz?: string; countAll?: boolean }
  | { kind: "policy"; name: string };

export interface Unit {
  /** Durations in the reply in milliseconds (the MS flag). */
  ms?: boolean;
}
export interface Shadowed extends Unit {
  /** Answer refusals as allowed, counting them (module only). */
  shadow?: boolean;
}
/**
 * `POLICY name` (module only): when the CL.POLICY `name` exists the call is
 * CL.LIMIT on it (its limiter, counters, CL.TOP and trial), with the call's
 * quantity, MS, SHADOW and COUNTALL; when it does not, the call runs with
 * its own parameters.
 */
export interface Live {
  policy?: string;
}
/** FW's COUNTALL: every hit counted as INCRBY counts it, refused or not; `remaining` goes below 0 when over. */
export interface CountAll {
  countAll?: boolean;
}

export interface PolicyInfo {
  limiter: string;
  shadow: boolean;
  calls: number;
  allowed: number;
  refused: number;
  shadowRefused: number;
  errors: number;
}

export interface TopEntry {
  key: string;
  count: number;
  error: number;
  shadow: number;
}

const num = (r: Reply | undefined): number => {
  if (typeof r === "number") return r;
  if (typeof r === "string") return Number(r);
  throw new TypeError(`redis-cell: expected an integer in the reply, got ${JSON.stringify(r)}`);
};
const str = (r: Reply | undefined): string => (Buffer.isBuffer(r) ? r.toString() : String(r));

function list(r: Reply, at_least: number): Reply[] {
  if (!Array.isArray(r) || r.length < at_least) {
    throw new TypeError(`redis-cell: expected an array of ${at_least} in the reply, got ${JSON.stringify(r)}`);
  }
  return r;
}

/** Reads the five integers. */
export function decision(r: Reply): Decision {
  const a = list(r, 5);
  return { limited: num(a[0]) === 1, limit: num(a[1]), remaining: num(a[2]), retryAfter: num(a[3]), resetAfter: num(a[4]) };
}

function flags(o: Shadowed | undefined): string[] {
  const out: string[] = [];
  if (o?.ms) out.push("MS");
  if (o?.shadow) out.push("SHADOW");
  return out;
}

const dur = (d: Duration): string => String(d);

/** The words of COUNTALL and POLICY, after a command's own. */
function live(o: Live & CountAll): string[] {
  return [...(o.countAll ? ["COUNTALL"] : []), ...(o.policy !== undefined ? ["POLICY", checkPolicyName(o.policy, "POLICY")] : [])];
}

/** The words of a limiter, as CL.THROTTLEALL and CL.POLICY SET read them. */
export function limiterWords(l: Limiter): string[] {
  switch (l.kind) {
    case "gcra":
      return ["GCRA", String(l.maxBurst), String(l.countPerPeriod), dur(l.period)];
    case "sw":
      return ["SW", String(l.limit), dur(l.window), ...(l.approx ? ["APPROX"] : [])];
    case "fw": {
      const words = ["FW", String(l.limit), dur(l.window)];
      if ("align" in l && l.align) words.push("ALIGN");
      if ("tz" in l && l.tz !== undefined) words.push("TZ", l.tz);
      if (l.countAll) words.push("COUNTALL");
      return words;
    }
    case "policy":
      return ["POLICY", l.name];
  }
}

const gcra = (p: GcraParams): string[] => [String(p.maxBurst), String(p.countPerPeriod), dur(p.period)];
/** FW's window options: ALIGN for a duration, TZ for a calendar unit. */
const fwOptions = (o: { align?: boolean; tz?: string }): string[] => [
  ...(o.align ? ["ALIGN"] : []),
  ...(o.tz !== undefined ? ["TZ", o.tz] : []),
];

/**
 * redis-cell's commands, typed, on either engine: `new Cell(client)` with an
 * ioredis or node-redis client (or cluster). The engine is detected at the
 * first call unless given (`{ engine: "functions" }` for an ACL user without
 * `COMMAND`).
 */
export class Cell {
  readonly #e: Engine;

  constructor(client: Client, options: { engine?: EngineName } = {}) {
    this.#e = new Engine(client, options.engine);
  }

  /** The engine in use. */
  engine(): Promise<EngineName> {
    return this.#e.engine();
  }

  /** Any command by name, as for the module (`call("CL.THROTTLE", ["k"], [15, 30, 60])`). */
  call(command: string, keys: readonly string[], args: readonly (string | number)[] = []): Promise<Reply> {
    return this.#e.call(command, keys, args);
  }

  /** A plain Redis command (DEL, GET...), engine aside, routed by `key` in a cluster. */
  send(args: readonly (string | number)[], key?: string, readonly?: boolean): Promise<Reply> {
    return this.#e.adapter.send(args, key, readonly);
  }

  /** A few plain commands as one MULTI/EXEC on the node of `key`. */
  transaction(key: string, commands: readonly (readonly (string | number)[])[]): Promise<Reply[]> {
    return this.#e.adapter.transaction(key, commands);
  }

  /**
   * A limiter command of one key with its COUNTALL and POLICY words; a
   * policy on the twin, which has none, is a ModuleOnlyError before
   * anything is sent.
   */
  async #live(command: string, key: string, args: readonly string[], o: Live & CountAll): Promise<Reply> {
    const words = live(o);
    if (o.policy !== undefined) {
      const engine = await this.#e.engine();
      if (engine !== "module") throw policyOnTwin(`${command} POLICY ${o.policy}`, engine);
    }
    return this.call(command, [key], [...args, ...words]);
  }

  /** The adapter and engine, for the stores. */
  get engineRef(): Engine {
    return this.#e;
  }

  /** CL.THROTTLE: GCRA, redis-cell compatible. */
  async throttle(key: string, p: GcraParams, o: Shadowed & Live & { quantity?: number } = {}): Promise<Decision> {
    return decision(await this.#live("CL.THROTTLE", key, [...gcra(p), String(o.quantity ?? 1), ...flags(o)], o));
  }

  /** CL.PEEK: what CL.THROTTLE would answer with quantity 0, writing nothing. */
  async peek(key: string, p: GcraParams, o: Unit & Live = {}): Promise<Decision> {
    return decision(await this.#live("CL.PEEK", key, [...gcra(p), ...flags(o)], o));
  }

  /** CL.RESERVE: takes the next slot if it comes within `maxWait`; `retryAfter` is then the wait. */
  async reserve(key: string, p: GcraParams, o: Unit & { quantity?: number; maxWait: Duration }): Promise<Decision> {
    return decision(
      await this.call("CL.RESERVE", [key], [...gcra(p), String(o.quantity ?? 1), "MAXWAIT", dur(o.maxWait), ...flags(o)]),
    );
  }

  /** CL.REFUND: gives back up to `quantity` (never beyond full). */
  async refund(key: string, p: GcraParams, quantity: number, o: Unit = {}): Promise<Decision> {
    return decision(await this.call("CL.REFUND", [key], [...gcra(p), String(quantity), ...flags(o)]));
  }

  /** CL.THROTTLEALL: one key per limiter, all-or-nothing. In a cluster the keys must share a slot ({tag}). */
  async throttleAll(
    keys: readonly string[],
    limiters: readonly Limiter[],
    o: Shadowed & { quantity?: number } = {},
  ): Promise<AllDecision> {
    if (keys.length !== limiters.length) {
      throw new TypeError(`redis-cell: throttleAll needs one key per limiter (${keys.length} keys, ${limiters.length} limiters)`);
    }
    const args = [...limiters.flatMap(limiterWords), ...(o.quantity !== undefined ? ["QUANTITY", String(o.quantity)] : []), ...flags(o)];
    const r = await this.call("CL.THROTTLEALL", keys, args);
    return { ...decision(r), index: num(list(r, 6)[5]) };
  }

  /** SW.ALLOW: exact sliding window (or, with approx, the sliding window counter). */
  async swAllow(
    key: string,
    limit: number,
    window: Duration,
    o: Shadowed & Live & { quantity?: number; approx?: boolean } = {},
  ): Promise<Decision> {
    const args = [String(limit), dur(window), String(o.quantity ?? 1), ...(o.approx ? ["APPROX"] : []), ...flags(o)];
    return decision(await this.#live("SW.ALLOW", key, args, o));
  }

  async swPeek(key: string, limit: number, window: Duration, o: Unit & Live & { approx?: boolean } = {}): Promise<Decision> {
    return decision(await this.#live("SW.PEEK", key, [String(limit), dur(window), ...(o.approx ? ["APPROX"] : []), ...flags(o)], o));
  }

  /** SW.REFUND: gives back up to `quantity`, newest requests first. */
  async swRefund(key: string, limit: number, window: Duration, quantity: number, o: Unit & { approx?: boolean } = {}): Promise<Decision> {
    const args = [String(limit), dur(window), String(quantity), ...(o.approx ? ["APPROX"] : []), ...flags(o)];
    return decision(await this.call("SW.REFUND", [key], args));
  }

  /** FW.INCR: a fixed window (a duration, optionally aligned) or a calendar unit in a time zone. */
  async fwIncr(
    key: string,
    limit: number,
    window: Duration | CalendarUnit,
    o: Shadowed & Live & CountAll & { quantity?: number; align?: boolean; tz?: string } = {},
  ): Promise<Decision> {
    const args = [String(limit), dur(window), ...fwOptions(o), String(o.quantity ?? 1), ...flags(o)];
    return decision(await this.#live("FW.INCR", key, args, o));
  }

  async fwPeek(
    key: string,
    limit: number,
    window: Duration | CalendarUnit,
    o: Unit & Live & CountAll & { align?: boolean; tz?: string } = {},
  ): Promise<Decision> {
    return decision(await this.#live("FW.PEEK", key, [String(limit), dur(window), ...fwOptions(o), ...flags(o)], o));
  }

  /** FW.REFUND: gives back up to `quantity` (never below 0, the window's end kept). */
  async fwRefund(
    key: string,
    limit: number,
    window: Duration | CalendarUnit,
    quantity: number,
    o: Unit & { align?: boolean; tz?: string } = {},
  ): Promise<Decision> {
    const args = [String(limit), dur(window), String(quantity), ...fwOptions(o), ...flags(o)];
    return decision(await this.call("FW.REFUND", [key], args));
  }

  /** CC.ACQUIRE: one of `limit` concurrent leases, expiring after `lease` unless renewed. */
  async ccAcquire(key: string, limit: number, lease: Duration, o: Unit & { id?: string } = {}): Promise<LeaseDecision> {
    const args = [String(limit), dur(lease), ...(o.id !== undefined ? ["ID", o.id] : []), ...flags(o)];
    const r = await this.call("CC.ACQUIRE", [key], args);
    const id = list(r, 6)[5];
    return { ...decision(r), id: id === null || id === undefined ? null : str(id) };
  }

  /** CC.RELEASE: true if the id held a lease. */
  async ccRelease(key: string, id: string): Promise<boolean> {
    return num(await this.call("CC.RELEASE", [key], [id])) === 1;
  }

  /** CC.RENEW: true if the id held a lease (now extended), false if the slot is lost. */
  async ccRenew(key: string, id: string, lease: Duration): Promise<boolean> {
    return num(await this.call("CC.RENEW", [key], [id, dur(lease)])) === 1;
  }

  async ccPeek(key: string, limit: number, o: Unit = {}): Promise<Decision> {
    return decision(await this.call("CC.PEEK", [key], [String(limit), ...flags(o)]));
  }

  /** CL.LIMIT: applies a named policy (module only). */
  async limit(key: string, policy: string, o: Shadowed & { quantity?: number } = {}): Promise<Decision> {
    return decision(await this.call("CL.LIMIT", [key], [policy, String(o.quantity ?? 1), ...flags(o)]));
  }

  /** CL.POLICY SET (module only). */
  async policySet(name: string, limiter: Exclude<Limiter, { kind: "policy" }>, o: { shadow?: boolean } = {}): Promise<void> {
    await this.call("CL.POLICY", [], ["SET", name, ...limiterWords(limiter), ...(o.shadow ? ["SHADOW"] : [])]);
  }

  /** CL.POLICY GET (an unknown name is the server's error). */
  async policyGet(name: string): Promise<PolicyInfo> {
    const a = list(await this.call("CL.POLICY", [], ["GET", name]), 0);
    const f = new Map<string, Reply>();
    for (let i = 0; i + 1 < a.length; i += 2) f.set(str(a[i]), a[i + 1] ?? null);
    return {
      limiter: str(f.get("limiter")),
      shadow: num(f.get("shadow")) === 1,
      calls: num(f.get("calls")),
      allowed: num(f.get("allowed")),
      refused: num(f.get("refused")),
      shadowRefused: num(f.get("shadow_refused")),
      errors: num(f.get("errors")),
    };
  }

  /** CL.POLICY DEL: true if there was one. */
  async policyDel(name: string): Promise<boolean> {
    return num(await this.call("CL.POLICY", [], ["DEL", name])) === 1;
  }

  async policyList(): Promise<string[]> {
    return list(await this.call("CL.POLICY", [], ["LIST"]), 0).map(str);
  }

  /** CL.TOP: the keys refused most often (module only). */
  async top(o: { count?: number; policy?: string; reset?: boolean } = {}): Promise<TopEntry[]> {
    const args = [
      ...(o.count !== undefined ? ["COUNT", String(o.count)] : []),
      ...(o.policy !== undefined ? ["POLICY", o.policy] : []),
      ...(o.reset ? ["RESET"] : []),
    ];
    return list(await this.call("CL.TOP", [], args), 0).map((e) => {
      const a = list(e, 4);
      return { key: str(a[0]), count: num(a[1]), error: num(a[2]), shadow: num(a[3]) };
    });
  }
}
