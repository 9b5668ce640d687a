-- The module's commands, for the scripts appended below (no log cap).
local LOG_CAP = nil
-- The module counts refusals (INFO, CL.TOP): a hit the script refuses is
-- also refused by a call the module counts.
local COUNTS_REFUSALS = true
-- A quantity no limit admits: a refusal that records nothing.
local NEVER_FITS = 4503599627370496
if redis.replicate_commands then redis.replicate_commands() end
local function cell(name, key, args)
  return redis.call(name, key, unpack(args))
end
