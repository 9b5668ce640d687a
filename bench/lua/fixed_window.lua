-- The INCR + EXPIRE fixed window as a Lua script (refusals do not count).
-- KEYS[1] = key; ARGV = limit, window (s), quantity.
local limit = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local quantity = tonumber(ARGV[3] or 1)
local count = tonumber(redis.call('GET', KEYS[1]) or 0)
if count + quantity > limit then
  return {1, limit, limit - count, redis.call('TTL', KEYS[1]), redis.call('TTL', KEYS[1])}
end
count = redis.call('INCRBY', KEYS[1], quantity)
if count == quantity then redis.call('EXPIRE', KEYS[1], window) end
return {0, limit, limit - count, -1, redis.call('TTL', KEYS[1])}
