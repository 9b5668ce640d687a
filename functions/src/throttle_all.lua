-- CL.THROTTLEALL numkeys key [key ...] limiter [limiter ...] [QUANTITY q] [MS]
-- (src/commands/throttle_all.rs). In FCALL the keys are FCALL's keys, so
-- `argv` starts with the first limiter. Every limiter decides at one
-- instant exactly as its own command; all keys are written only when all
-- allow. The reply is the binding limiter's five integers and its index.

local KINDS = { GCRA = 3, SW = 2, FW = 2 }
local LIMITER_SPEC = { GCRA = {}, SW = { APPROX = 'flag' }, FW = { ALIGN = 'flag', TZ = 'keyword' } }
local CALL_SPEC = { QUANTITY = 'keyword', MS = 'flag' }

-- One limiter's parameters, from argv[i]: the limiter, or nil and the
-- error (its own command's).
local function limiter_params(kind, argv, i)
  if kind == 'GCRA' then
    return limiter.gcra_args(argv[i], argv[i + 1], argv[i + 2])
  end
  local limit, err = limiter.limit(argv[i])
  if not limit then return nil, err end
  if kind == 'SW' then
    local ws, wn = limiter.window(argv[i + 1], 'window', E.WINDOW_NOT_POSITIVE)
    if not ws then return nil, wn end
    return { limit, ws, wn }
  end
  local unit, ws, wn = limiter.window_or_unit(argv[i + 1])
  if unit == nil then return nil, ws end
  return { limit, unit, ws, wn }
end

-- What needs the parameters and the options together.
local function limiter_of(kind, p, o)
  if kind == 'GCRA' then return limiter.gcra(p) end
  local lim, err
  if kind == 'SW' then
    lim = limiter.sliding(p[1], p[2], p[3], o.APPROX)
  else
    lim, err = limiter.fixed(p[1], p[2], p[3], p[4], o.TZ, o.ALIGN)
    if not lim then return nil, err end
  end
  local ok, cerr = limiter.check_limit(p[1])
  if not ok then return nil, cerr end
  return lim
end

commands['cl.throttleall'] = { 4, function(keys, argv)
  local n, last = #keys, #argv
  if n < 1 or last < n then return nil, E.BAD_NUMKEYS end
  local seen = {}
  for j = 1, n do
    if seen[keys[j]] then return nil, E.KEY_TWICE end
    seen[keys[j]] = true
  end
  local limiters, co, i = {}, {}, 1
  for j = 1, n do
    local w = argv[i]
    if not w then return nil, E.LIMITER_COUNT end
    local kind = grammar.upper(w)
    local params = KINDS[kind]
    if not params then
      if kind == 'QUANTITY' or kind == 'MS' then return nil, E.LIMITER_COUNT end
      return nil, E.UNKNOWN_LIMITER
    end
    if last - i < params then return nil, E.LIMITER_COUNT end
    local p, err = limiter_params(kind, argv, i + 1)
    if not p then return nil, err end
    i = i + 1 + params
    local o, spec = {}, LIMITER_SPEC[kind]
    while i <= last do
      local u = grammar.upper(argv[i])
      local oerr
      if KINDS[u] then
        if j == n then return nil, E.LIMITER_COUNT end
        break
      elseif CALL_SPEC[u] then
        if j < n then return nil, E.LIMITER_COUNT end
        i, oerr = grammar.option(co, argv, i, CALL_SPEC)
      else
        i, oerr = grammar.option(o, argv, i, spec)
      end
      if not i then return nil, oerr end
    end
    local lim, lerr = limiter_of(kind, p, o)
    if not lim then return nil, lerr end
    limiters[j] = lim
  end
  local qs, qn = 0, 1
  if co.QUANTITY then qs, qn = co.q_s, co.q_n end
  -- One instant for all; every state is read (and every type checked)
  -- before anything is written.
  local now_s, now_n, now_ms = store.now()
  local decided, verdicts = {}, {}
  for j = 1, n do
    local d, err = limiter.decide(limiters[j], keys[j], now_s, now_n, qs, qn)
    if not d then return nil, err end
    decided[j], verdicts[j] = d, d[1]
  end
  local b = binding_of(verdicts)
  local goes_ahead = not verdicts[b][1]
  for j = 1, n do limiter.apply(decided[j], keys[j], goes_ahead, now_ms) end
  local reply = to_reply(verdicts[b], co.MS)
  reply[6] = b
  return reply
end, nil, 'keys' }
