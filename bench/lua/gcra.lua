-- GCRA as a Lua script, the usual script-based alternative to CL.THROTTLE.
-- KEYS[1] = key; ARGV = max_burst, count_per_period, period (s), quantity.
-- Same reply shape: {limited, limit, remaining, retry_after, reset_after}.
local burst = tonumber(ARGV[1])
local count = tonumber(ARGV[2])
local period = tonumber(ARGV[3])
local quantity = tonumber(ARGV[4] or 1)
local t = redis.call('TIME')
local now = t[1] * 1000000 + t[2]
local emission = period * 1000000 / count
local tolerance = emission * (burst + 1)
local tat = tonumber(redis.call('GET', KEYS[1])) or now
if tat < now then tat = now end
local new_tat = tat + emission * quantity
local allow_at = new_tat - tolerance
if now < allow_at then
  return {1, burst + 1, 0, math.ceil((allow_at - now) / 1000000), math.ceil((tat - now) / 1000000)}
end
local ttl = new_tat - now
redis.call('SET', KEYS[1], new_tat, 'PX', math.ceil(ttl / 1000))
return {0, burst + 1, math.floor((tolerance - ttl) / emission), -1, math.ceil(ttl / 1000000)}
