// The error classes as an application sees them, without a server: every
// entry point exports them, and an error made by one build (CommonJS, as a
// NestJS app compiles to) is an instance of the other build's class (ESM,
// as the application's own code imports it).
import assert from "node:assert/strict";
import { createRequire } from "node:module";
import { test } from "node:test";
import * as esm from "../dist/esm/index.js";

const require = createRequire(import.meta.url);
const cjs = require("../dist/cjs/index.js");

const NAMES = [
  "RedisCellError",
  "ArgumentError",
  "OutOfRangeError",
  "WrongTypeError",
  "LimiterMismatchError",
  "EngineError",
  "ModuleOnlyError",
  "EngineNotFoundError",
  "ModuleMissingError",
  "LibraryMissingError",
];

/** One instance of each class, made by a build. */
function make(build) {
  const cause = new Error("the client's error");
  return {
    RedisCellError: new build.RedisCellError("NOPERM no", { cause }),
    ArgumentError: new build.ArgumentError("ERR invalid period", { cause }),
    OutOfRangeError: new build.OutOfRangeError("ERR parameters out of range", { cause }),
    WrongTypeError: new build.WrongTypeError("WRONGTYPE x", { cause }),
    LimiterMismatchError: new build.LimiterMismatchError("k", "a counter", "redis-cell: ...", "WRONGTYPE x", { cause }),
    EngineError: new build.EngineError("m", { cause }),
    ModuleOnlyError: new build.ModuleOnlyError("m", { cause }),
    EngineNotFoundError: new build.EngineNotFoundError("m", { cause }),
    ModuleMissingError: new build.ModuleMissingError("m", { cause, reply: "ERR unknown command 'CL.THROTTLE'" }),
    LibraryMissingError: new build.LibraryMissingError("m", { cause, reply: "ERR Function not found" }),
  };
}

const PARENT = {
  ArgumentError: "RedisCellError",
  OutOfRangeError: "RedisCellError",
  WrongTypeError: "RedisCellError",
  LimiterMismatchError: "WrongTypeError",
  ModuleOnlyError: "EngineError",
  EngineNotFoundError: "EngineError",
  ModuleMissingError: "EngineNotFoundError",
  LibraryMissingError: "EngineNotFoundError",
};
const ancestors = (name) => (name in PARENT ? [name, ...ancestors(PARENT[name])] : [name]);

test("every entry point exports every error class, the same class as the main one", async () => {
  for (const entry of ["express-rate-limit", "nestjs", "rate-limiter-flexible"]) {
    const m = await import(`../dist/esm/${entry}.js`);
    const c = require(`../dist/cjs/${entry}.js`);
    for (const name of NAMES) {
      assert.equal(m[name], esm[name], `ESM ${entry} ${name}`);
      assert.equal(c[name], cjs[name], `CJS ${entry} ${name}`);
    }
  }
});

test("instanceof holds within and across the ESM and CommonJS builds, by the class's own hierarchy", () => {
  assert.notEqual(esm.RedisCellError, cjs.RedisCellError, "two builds, two copies of each class");
  for (const [maker, made] of [["esm", make(esm)], ["cjs", make(cjs)]]) {
    for (const name of NAMES) {
      const e = made[name];
      assert.equal(e.name, name);
      assert.equal(e.cause?.message, "the client's error", `${maker} ${name} keeps its cause`);
      assert.ok(e instanceof Error);
      for (const build of [esm, cjs]) {
        for (const other of NAMES) {
          const expected = ancestors(name).includes(other);
          assert.equal(e instanceof build[other], expected, `${maker}'s ${name} instanceof ${build === esm ? "esm" : "cjs"}'s ${other}`);
        }
      }
    }
  }
  // Not ours: a plain error, a look-alike, values that are no objects.
  const lookalike = Object.assign(new Error("WRONGTYPE"), { name: "WrongTypeError" });
  for (const v of [new Error("x"), lookalike, null, undefined, "WrongTypeError", 1]) {
    assert.equal(v instanceof esm.WrongTypeError, false);
    assert.equal(v instanceof cjs.RedisCellError, false);
  }
  class Sub extends cjs.WrongTypeError {}
  assert.ok(new Sub("WRONGTYPE") instanceof esm.WrongTypeError, "an application's subclass, across builds");
  assert.equal(new cjs.WrongTypeError("WRONGTYPE") instanceof Sub, false);
});
