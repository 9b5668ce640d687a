-- @nestjs/throttler's increment, as its in-memory ThrottlerStorageService
-- answers it, in one atomic call. `cell(name, key, args)` runs one of
-- redis-cell's commands: the module's (redis.call) or the twin's (its EVAL
-- script's entry points, which this file is appended to).
--
-- KEYS: the hits (an exact sliding window log: each hit lives ttl), the
-- record's window (a fixed window of ttl from its first hit, renewed at the
-- first call after it ends), the block (its end in ms, kept past what it
-- affects, so that the first call after it clears the hits from before it).
-- Numbers given to SET are written by Redis as integers (%.17g).
-- ARGV: ttl ms, limit, block duration ms, and a CL.POLICY name or ''
-- (module only: the hits' decisions go through it while it exists).
-- Answers {totalHits, timeToExpire, isBlocked, timeToBlockExpire}.
local ttl, limit, block = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local policy = ARGV[4] or ''
-- The decision of a hit by the server, at the limit (or the policy's):
-- where it refuses, INFO and CL.TOP count it.
local function decide(args)
  if policy ~= '' then
    args[#args + 1] = 'POLICY'
    args[#args + 1] = policy
  end
  return cell('SW.ALLOW', KEYS[1], args)
end
-- The hits an allowed decision leaves, read against the app's limit (a
-- policy's limit can differ).
local function allowed_hits(a) return math.max(1, math.min(limit, limit - a[3])) end
-- A counter's limit the server never reaches (exact in doubles, below 2^53);
-- the twin logs at most LOG_CAP requests per exact window (its documented
-- cap), so there the count stops at that many hits in one window.
local BIG = LOG_CAP or 4503599627370496
local window = ARGV[1] .. 'ms'
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local function seconds(ms) return math.ceil(ms / 1000) end
-- The in-memory storage sweeps idle records every minute: a block's end is
-- kept that much longer than anything it can affect.
local SWEEP = 60000

-- A new window's end is its expiry, rounded up to the next millisecond:
-- its reset can read ttl + 1, which the in-memory storage never answers.
local tte = seconds(math.min(cell('FW.INCR', KEYS[2], { BIG, window, 1, 'MS' })[5], ttl))

if block <= 0 then
  -- Without a block a hit over the limit is refused and not recorded.
  local a = decide({ limit, window, 1, 'MS' })
  if a[1] == 0 then return { allowed_hits(a), tte, 0, 0 } end
  local wait = a[4] >= 0 and seconds(a[4]) or tte
  return { math.max(limit - a[3] + 1, limit + 1), tte, 1, wait }
end

-- The block's end: positive while it counts, negated once it ended (the
-- in-memory record keeps its old end and answers it until swept).
local ends = tonumber(redis.call('GET', KEYS[3]) or '0')
if ends > 0 then
  if ends > now then
    -- A refusal the server counts and never records: no quantity fits.
    if COUNTS_REFUSALS then decide({ limit, window, NEVER_FITS, 'MS' }) end
    local p = cell('SW.PEEK', KEYS[1], { BIG, window, 'MS' })
    return { BIG - p[3], tte, 1, seconds(ends - now) }
  end
  -- The block is over: its hits are forgotten and this one counts.
  redis.call('DEL', KEYS[1])
  redis.call('SET', KEYS[3], -ends, 'PX', ttl + SWEEP)
  local a = cell('SW.ALLOW', KEYS[1], { BIG, window, 1, 'MS' })
  return { BIG - a[3], tte, 0, seconds(ends - now) }
end
local hits
if COUNTS_REFUSALS then
  local a = decide({ limit, window, 1, 'MS' })
  if a[1] == 0 then return { allowed_hits(a), tte, 0, seconds(-ends - now) } end
  -- Refused (and counted) by the server, not recorded: the in-memory
  -- storage records the hit that starts a block, so it is recorded here.
  hits = math.max(BIG - cell('SW.ALLOW', KEYS[1], { BIG, window, 1, 'MS' })[3], limit + 1)
else
  hits = BIG - cell('SW.ALLOW', KEYS[1], { BIG, window, 1, 'MS' })[3]
end
if hits > limit then
  redis.call('SET', KEYS[3], now + block, 'PX', math.max(block, ttl) + SWEEP)
  return { hits, tte, 1, seconds(block) }
end
-- Never blocked (or the record forgotten), the in-memory block end is 0.
return { hits, tte, 0, seconds(-ends - now) }
