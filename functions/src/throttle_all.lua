-- CL.THROTTLEALL numkeys key [key ...] limiter [limiter ...] [QUANTITY q] [MS]
-- (src/commands/throttle_all.rs). In FCALL the keys are FCALL's keys, so
-- `argv` starts with the first limiter. Every limiter decides at one
-- instant exactly as its own command; all keys are written only when all
-- allow. The reply is the binding limiter's five integers and its index.

local KINDS = { GCRA = 3, SW = 2, FW = 2 }
local LIMITER_SPEC = { GCRA = {}, SW = { APPROX = 'flag' }, FW = { ALIGN = 'flag', TZ = 'keyword', COUNTALL = 'flag' } }
local CALL_SPEC = { QUANTITY = 'keyword', MS = 'flag' }

-- One limiter from its parameters at argv[i] and its options, as its own
-- command reads them.
local function limiter_of(kind, argv, i, o)
  local lim, err
  if kind == 'GCRA' then
    lim, err = limiter.gcra(argv[i], argv[i + 1], argv[i + 2])
  elseif kind == 'SW' then
    lim, err = limiter.sliding(argv[i], argv[i + 1], o.APPROX)
  else
    lim, err = limiter.fixed(argv[i], argv[i + 1], o.TZ, o.ALIGN, o.COUNTALL)
  end
  if not lim then return nil, err end
  local ok, cerr = limiter.check_range(lim)
  if not ok then return nil, cerr end
  return lim
end

-- The limiters and call options of a call, parsed from its words (after
-- the keys) and its number of keys alone: nil and the error, or the
-- limiters, the quantity (a pair) and MS.
local function parse_all(argv, n, last)
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
    local at = i + 1
    i = i + 1 + params
    local o, spec = {}, LIMITER_SPEC[kind]
    while i <= last do
      local u = grammar.upper(argv[i])
      local oerr
      -- A limiter's options end at the next kind word (and, before the
      -- last limiter, at a call option); what is left over is reported
      -- after this limiter has been checked, as the module does.
      if KINDS[u] or (CALL_SPEC[u] and j < n) then
        break
      elseif CALL_SPEC[u] then
        i, oerr = grammar.option(co, argv, i, CALL_SPEC)
      else
        i, oerr = grammar.option(o, argv, i, spec)
      end
      if not i then return nil, oerr end
    end
    local lim, lerr = limiter_of(kind, argv, at, o)
    if not lim then return nil, lerr end
    limiters[j] = lim
  end
  if i <= last then return nil, E.LIMITER_COUNT end
  local qs, qn = 0, 1
  if co.QUANTITY then qs, qn = co.q_s, co.q_n end
  return limiters, qs, qn, co.MS
end

-- Calls parsed before, by their words joined and their number of keys:
-- what parsing gives depends on nothing else, so a call with the same
-- limiters is parsed once (only calls that parse are kept). Bounded, and
-- only short word lists.
local parsed, parsed_n = {}, 0

commands['cl.throttleall'] = { 3, function(keys, argv)
  local n, last = #keys, #argv
  if n > 100 then return nil, E.TOO_MANY_KEYS end
  if n < 1 or last < n then return nil, E.BAD_NUMKEYS end
  local seen = {}
  for j = 1, n do
    if seen[keys[j]] then return nil, E.KEY_TWICE end
    seen[keys[j]] = true
  end
  local ck = last <= 32 and tconcat(argv, '\0') .. '\0' .. n
  if ck and #ck > 256 then ck = nil end
  local hit = ck and parsed[ck]
  -- A word may hold the separator: the words themselves must match.
  if hit then
    local words = hit[5]
    for i = 1, last do
      if words[i] ~= argv[i] then hit = nil; break end
    end
  end
  local limiters, qs, qn, ms
  if hit then
    limiters, qs, qn, ms = hit[1], hit[2], hit[3], hit[4]
  else
    limiters, qs, qn, ms = parse_all(argv, n, last)
    if not limiters then return nil, qs end
    if ck then
      if parsed_n >= 1024 then parsed, parsed_n = {}, 0 end
      local words = {}
      for i = 1, last do words[i] = argv[i] end
      parsed[ck], parsed_n = { limiters, qs, qn, ms, words }, parsed_n + 1
    end
  end
  -- One instant for all; every state is read (and every type checked)
  -- before anything is written.
  local now_s, now_n, now_ms = store.now()
  local decided, verdicts = {}, {}
  for j = 1, n do
    local v, value, exp_ms, current_ms, repair, always = limiter.decide(limiters[j], keys[j], now_s, now_n, qs, qn)
    if not v then return nil, value end
    decided[j], verdicts[j] = { value, exp_ms, current_ms, repair, always }, v
  end
  local b = binding_of(verdicts)
  local goes_ahead = not verdicts[b][1]
  for j = 1, n do
    local d = decided[j]
    limiter.apply(keys[j], goes_ahead or d[5], now_ms, d[1], d[2], d[3], d[4])
  end
  local reply = to_reply(verdicts[b], ms)
  reply[6] = b
  return reply
end, nil, 'keys' }
