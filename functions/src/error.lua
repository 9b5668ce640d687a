-- Every error the twin replies with: the module's texts (src/error.rs and
-- docs/grammar.md) word for word, and the few that only the twin has.

local E = {
  NOT_INTEGER = 'ERR value is not an integer or out of range',
  WRONG_TYPE = 'WRONGTYPE Operation against a key holding the wrong kind of value',
  NEGATIVE_MAX_BURST = 'ERR invalid max_burst: must be 0 or greater',
  COUNT_NOT_POSITIVE = 'ERR invalid count_per_period: must be 1 or greater',
  PERIOD_NOT_POSITIVE = 'ERR invalid period: must be greater than 0 seconds',
  NEGATIVE_QUANTITY = 'ERR invalid quantity: must be 0 or greater',
  RATE_TOO_HIGH = 'ERR invalid count_per_period: more than one request per nanosecond over period',
  OVERFLOW = 'ERR parameters out of range: their nanosecond arithmetic overflows 64 bits',
  INVALID_TAT = 'ERR key holds a string that is not a valid CL.THROTTLE state (an integer TAT in nanoseconds)',
  NEGATIVE_LIMIT = 'ERR invalid limit: must be 0 or greater',
  WINDOW_NOT_POSITIVE = 'ERR invalid window: must be greater than 0 seconds',
  INVALID_COUNTER = 'ERR key holds a string that is not a valid FW.INCR counter (an integer)',
  EXACT_KEY = 'ERR key holds an exact sliding window; APPROX needs a key of its own',
  APPROX_KEY = 'ERR key holds an APPROX sliding window; the exact log needs a key of its own',
  BAD_NUMKEYS = 'ERR invalid numkeys: must be a positive integer, with a key and a limiter for each',
  TOO_MANY_KEYS = 'ERR invalid numkeys: at most 100 limiters in one call',
  LIMITER_COUNT = 'ERR CL.THROTTLEALL needs exactly numkeys limiters, one for each key',
  UNKNOWN_LIMITER = 'ERR unknown limiter: expected GCRA, SW or FW',
  KEY_TWICE = 'ERR a key is named twice: each limiter needs a key of its own',
  MAXWAIT_MISSING = 'ERR CL.RESERVE needs MAXWAIT seconds: the longest the caller will wait for its slot',
  NEGATIVE_MAXWAIT = 'ERR invalid MAXWAIT: must be 0 or greater',
  BAD_TZ = 'ERR invalid TZ: expected a time zone name such as Europe/Berlin, or an offset from -12:00 to +14:00 such as +09:00',
  TZ_WITHOUT_CALENDAR = 'ERR TZ needs a calendar window: minute, hour, day, week, month or year',
  LEASE_NOT_POSITIVE = 'ERR invalid lease: must be greater than 0 seconds',
  ID_TOO_LONG = 'ERR invalid ID: at most 1024 bytes',
  INTERNAL = 'ERR internal error in redis-cell; the command was not applied',
  -- Only the twin's.
  NAMED_ZONE = 'ERR invalid TZ: named time zones are module-only; the functions take an offset from -12:00 to +14:00, such as +09:00',
  BIG_LIMIT = 'ERR limit out of the functions\' range: limits above 2^53 are module-only (Lua replies integers as doubles)',
  BIG_COUNT = 'ERR count out of the functions\' range: a COUNTALL count above 2^53 is module-only (Lua replies integers as doubles)',
  RANGE = 'ERR parameters out of the functions\' range: this call\'s arithmetic exceeds 9e24 ns; use the module',
  MODULE_WINDOW = 'WRONGTYPE key holds the module\'s sliding window (cell-swin); the functions keep their own: delete or rename the key',
  MODULE_LEASES = 'WRONGTYPE key holds the module\'s leases (cell-conc); the functions keep their own: delete or rename the key',
  -- Sizes the functions cannot serve within a few milliseconds: every call
  -- reads and rewrites the whole log or lease string, so its cost grows
  -- with the state, and a Lua call blocks the server while it runs.
  BIG_LOG = 'ERR limit out of the functions\' range: an exact window logs at most 10000 requests (use APPROX, or the module)',
  BIG_LEASES = 'ERR limit out of the functions\' range: at most 1000 leases per key (use the module)',
  LONG_ID = 'ERR invalid ID: the functions take at most 128 bytes (the module 1024)',
  LOG_TOO_BIG = 'ERR key holds an exact window of more than 10000 requests, more than the functions serve: delete the key or let it expire',
  TOO_MANY_LEASES = 'ERR key holds more leases than the functions serve (1000, with ids of at most 128 bytes): delete the key or let the leases expire',
}

-- The server's wrong-arity text, naming the module's command.
local function wrong_arity(name)
  return 'ERR wrong number of arguments for \'' .. name .. '\' command'
end

-- "ERR invalid period: expected seconds or ..." for the argument `what`.
local function bad_duration(what)
  return 'ERR invalid ' .. what .. ': expected seconds or a number with a unit: ms, s, m, h or d'
end
