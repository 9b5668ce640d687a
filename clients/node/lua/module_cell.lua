-- The module's commands, for the scripts appended below (no log cap).
local LOG_CAP = nil
if redis.replicate_commands then redis.replicate_commands() end
local function cell(name, key, args)
  return redis.call(name, key, unpack(args))
end
