-- The sorted-set sliding window log as a Lua script: one member per request.
-- KEYS[1] = key; ARGV = limit, window (s).
local limit = tonumber(ARGV[1])
local window = tonumber(ARGV[2]) * 1000000
local t = redis.call('TIME')
local now = t[1] * 1000000 + t[2]
redis.call('ZREMRANGEBYSCORE', KEYS[1], 0, now - window)
local n = redis.call('ZCARD', KEYS[1])
if n + 1 > limit then
  return {1, limit, 0, -1, 0}
end
redis.call('ZADD', KEYS[1], now, now .. ':' .. n)
redis.call('PEXPIRE', KEYS[1], math.ceil(window / 1000))
return {0, limit, limit - n - 1, -1, math.ceil(window / 1000000)}
