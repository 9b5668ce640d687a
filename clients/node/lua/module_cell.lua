-- The module's commands, for the scripts appended below.
if redis.replicate_commands then redis.replicate_commands() end
local function cell(name, key, args)
  return redis.call(name, key, unpack(args))
end
