export { Cell, decision, limiterWords } from "./commands.js";
export type {
  AllDecision,
  CalendarUnit,
  CountAll,
  Decision,
  Duration,
  GcraParams,
  LeaseDecision,
  Limiter,
  Live,
  PolicyInfo,
  Shadowed,
  TopEntry,
  Unit,
} from "./commands.js";
export type { PolicyChoice } from "./policy.js";
export { Engine, LIBRARY, describeKey, detectEngine, functionName, loadFunctions } from "./engine.js";
export type { EngineName, StateKind } from "./engine.js";
export { adapt, fromSendCommand, fromSendCommandCluster } from "./adapter.js";
export type { Adapter, Client, Reply, SendCommandClusterFn, SendCommandFn } from "./adapter.js";
export * from "./errors.js";
export { REDIS_CELL_LUA } from "./generated/lua.js";
