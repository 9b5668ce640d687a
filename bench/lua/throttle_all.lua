-- CL.THROTTLEALL's all-or-nothing decision for a GCRA and an aligned fixed
-- window, as a Lua script: both decide, and both keys are written only if
-- both allow. KEYS = gcra key, window key; ARGV = max_burst,
-- count_per_period, period (s), limit, window (s).
local burst, count, period = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local limit, window = tonumber(ARGV[4]), tonumber(ARGV[5])
local t = redis.call('TIME')
local now = t[1] * 1000000 + t[2]
-- GCRA
local emission = period * 1000000 / count
local tolerance = emission * (burst + 1)
local tat = tonumber(redis.call('GET', KEYS[1])) or now
if tat < now then tat = now end
local new_tat = tat + emission
local gcra_ok = now >= new_tat - tolerance
-- fixed window, aligned to multiples of the window
local used = tonumber(redis.call('GET', KEYS[2]) or 0)
local fw_ok = used + 1 <= limit
if not (gcra_ok and fw_ok) then
  return {1, burst + 1, 0, 1, 1, gcra_ok and 2 or 1}
end
local ttl = new_tat - now
redis.call('SET', KEYS[1], new_tat, 'PX', math.ceil(ttl / 1000))
local window_us = window * 1000000
local ends = (math.floor(now / window_us) + 1) * window_us
redis.call('INCR', KEYS[2])
redis.call('PEXPIREAT', KEYS[2], math.ceil(ends / 1000))
local remaining = math.floor((tolerance - ttl) / emission)
return {0, burst + 1, remaining, -1, math.ceil(ttl / 1000000), 1}
