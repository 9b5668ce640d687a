-- Entry points: the arity (the server's own wrong-arity text), the keys,
-- then the command; every error is one of the replies above.

local function one_key_error(name)
  return 'ERR ' .. name .. ' takes exactly one key: call it with numkeys 1'
end

-- The callback of the function for `name`.
local function entry(name)
  local c = commands[name]
  local required, run, multi = c[1], c[2], c[4]
  local flat = fast[name]
  return function(keys, argv)
    if not floor then init() end
    if #keys + #argv < required then return rerror(wrong_arity(name)) end
    -- The common form's flat path (fast.lua); nil sends the call on here.
    if flat then
      local reply = flat(keys, argv)
      if reply then return reply end
    end
    local reply, err
    if multi then
      reply, err = run(keys, argv)
    else
      if #keys ~= 1 then return rerror(one_key_error(name)) end
      reply, err = run(keys[1], argv)
    end
    if reply == nil then return rerror(err) end
    return reply
  end
end

-- The function flags of `name`: no-writes for the peeks, allow-oom for
-- what frees memory (refunds, release, renew), none (deny-oom) otherwise.
local function flags_of(name)
  return { commands[name][3] }
end

-- EVAL: ARGV[1] names the command, the rest are its arguments.
local function dispatch(keys, args)
  local name = args[1]
  local c = name and #name <= 16 and commands[slower(name)]
  if not c then
    return rerror('ERR unknown redis-cell command: ARGV[1] must name one, such as cl.throttle')
  end
  local argv = {}
  for i = 2, #args do argv[i - 1] = args[i] end
  return entry(slower(name))(keys, argv)
end
