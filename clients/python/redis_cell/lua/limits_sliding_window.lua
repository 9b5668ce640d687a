-- The sliding window counter of the `limits` library, with its semantics
-- (not redis-cell's SW.ALLOW APPROX, whose windows are aligned to the
-- epoch): the current window starts at its first hit and lives for two
-- windows; once less than one window of its life is left it becomes the
-- previous window and a new, empty current window starts where it ended.
-- The weighted count is floor(previous * previous_ttl / window) + current,
-- all in milliseconds, so keys written by limits' own Redis storage and by
-- this script are read the same way.
--
-- KEYS[1] previous window, KEYS[2] current window.
-- ARGV: 'get' window_s | 'acquire' window_s limit amount.
-- 'get' answers {previous, previous_ttl_ms, current, current_ttl_ms};
-- 'acquire' answers 1 when the hit was recorded, 0 when refused.

local previous, current = KEYS[1], KEYS[2]
local mode = ARGV[1]
local window = tonumber(ARGV[2]) * 1000

local current_ttl = redis.call('pttl', current)
if current_ttl > 0 and current_ttl < window then
  redis.call('rename', current, previous)
  redis.call('set', current, 0, 'PX', current_ttl + window)
end

local function count_of(key)
  return tonumber(redis.call('get', key)) or 0
end

local function ttl_of(key)
  local ttl = redis.call('pttl', key)
  if ttl < 0 then return 0 end
  return ttl
end

if mode == 'get' then
  return {count_of(previous), ttl_of(previous), count_of(current), ttl_of(current)}
end

local limit, amount = tonumber(ARGV[3]), tonumber(ARGV[4])
if amount > limit then return 0 end
local weighted = math.floor(count_of(previous) * ttl_of(previous) / window) + count_of(current)
if weighted + amount > limit then return 0 end
if redis.call('exists', current) == 1 then
  redis.call('incrby', current, amount)
else
  redis.call('set', current, amount, 'PX', window * 2)
end
return 1
