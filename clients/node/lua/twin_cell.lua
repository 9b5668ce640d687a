-- The twin's commands, through the entry points of its EVAL script above.
-- The most requests the twin's exact window logs (functions/MISMATCHES.md).
local LOG_CAP = 10000
-- The twin counts no refusals (no INFO fields, no CL.TOP).
local COUNTS_REFUSALS = false
local NEVER_FITS = nil
local function cell(name, key, args)
  local argv = {}
  for i = 1, #args do
    local v = args[i]
    -- tostring would print 2^52 as 4.5035996273705e+15.
    argv[i] = type(v) == 'number' and string.format('%d', v) or v
  end
  local r = entry(string.lower(name))({ key }, argv)
  if type(r) == 'table' and r.err then error(r) end
  return r
end
