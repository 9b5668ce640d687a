// The public error classes, once: every entry point re-exports them, so that
// code using only one entry point can tell the failures apart.
export {
  ArgumentError,
  EngineError,
  EngineNotFoundError,
  LibraryMissingError,
  LimiterMismatchError,
  ModuleMissingError,
  ModuleOnlyError,
  OutOfRangeError,
  RedisCellError,
  WrongTypeError,
} from "./errors.js";
