-- One function per command (src/commands/*.rs), each with the same shape
-- and the module's order of checks: the options (their syntax, and a
-- quantity), then the required arguments, then the options' values and
-- what needs several, then the clock, the key, the decision, the write,
-- the reply. `argv` holds the command's words after its key.

local commands = {}

-- The shape of every single-limiter command (commands::single).
local function single(key, lim, qs, qn, ms, write)
  local now_s, now_n, now_ms = store.now()
  local v, value, exp_ms, current_ms, repair, always = limiter.decide(lim, key, now_s, now_n, qs, qn)
  if not v then return nil, value end
  if write then limiter.apply(key, always or not v[1], now_ms, value, exp_ms, current_ms, repair) end
  return to_reply(v, ms)
end

local function quantity_of(o)
  if o.q_s then return o.q_s, o.q_n end
  return 0, 1
end

-- A limiter parsed from words once per library (limiter.cached): `parse`
-- runs on a miss; a limiter the twin cannot serve is never kept.
-- Returns the limiter and whether it came from the cache (so within the
-- twin's range).
local function cached_limiter(k, parse, ...)
  local key = limiter.cache_key(k)
  local lim = limiter.cached(key)
  if lim then return lim, true end
  local err
  lim, err = parse(...)
  if not lim then return nil, err end
  if limiter.check_range(lim) then limiter.remember(key, lim) end
  return lim
end

local function twin_range(lim, known)
  if known then return true end
  return limiter.check_range(lim)
end

local MS = { MS = 'flag' }
local MS_MAXWAIT = { MAXWAIT = 'keyword', MS = 'flag' }
local SW_FLAGS = { APPROX = 'flag', MS = 'flag' }
local FW_FLAGS = { ALIGN = 'flag', TZ = 'keyword', COUNTALL = 'flag', MS = 'flag' }
local CC_FLAGS = { ID = 'keyword', MS = 'flag' }
local NONE = {}

local function gcra_of(argv)
  return cached_limiter('G' .. argv[1] .. '\0' .. argv[2] .. '\0' .. argv[3],
    limiter.gcra, argv[1], argv[2], argv[3])
end

-- CL.THROTTLE key max_burst count_per_period period [quantity] [MS]
-- CL.PEEK key max_burst count_per_period period [MS]
local function throttle(write)
  return function(key, argv)
    local o, oerr = grammar.options(argv, 4, MS, write)
    if not o then return nil, oerr end
    local lim, err = gcra_of(argv)
    if not lim then return nil, err end
    local ok, rerr = twin_range(lim, err)
    if not ok then return nil, rerr end
    local qs, qn = 0, 0
    if write then qs, qn = quantity_of(o) end
    return single(key, lim, qs, qn, o.MS, write)
  end
end
commands['cl.throttle'] = { 4, throttle(true) }
commands['cl.peek'] = { 4, throttle(false), 'no-writes' }

-- CL.RESERVE key max_burst count_per_period period [quantity] MAXWAIT duration [MS]
commands['cl.reserve'] = { 4, function(key, argv)
  local o, oerr = grammar.options(argv, 4, MS_MAXWAIT, true)
  if not o then return nil, oerr end
  local lim, err = gcra_of(argv)
  if not lim then return nil, err end
  if not o.MAXWAIT then return nil, E.MAXWAIT_MISSING end
  local mw_s, mw_n = grammar.duration(o.MAXWAIT, 'MAXWAIT')
  if not mw_s then return nil, mw_n end
  if mw_s < 0 then return nil, E.NEGATIVE_MAXWAIT end
  local ok, rerr = twin_range(lim)
  if not ok then return nil, rerr end
  local qs, qn = quantity_of(o)
  local now_s, now_n, now_ms = store.now()
  local found, ts, tn = store.integer(key, E.INVALID_TAT)
  if found == nil then return nil, ts end
  if not found then ts, tn = nil, nil end
  local decision, v, nts, ntn, exp, ws, wn =
    gcra.reserve(lim[2], ts, tn, now_s, now_n, qs, qn, mw_s, mw_n)
  if not decision then return nil, v end
  if nts then store.set(key, ptostr(nts, ntn), exp, nil, now_ms) end
  local reply = to_reply(v, o.MS)
  if decision == 'later' then reply[4] = unit_ceil(o.MS, ws, wn) end
  return reply
end }

-- A refund's quantity (read after the limiter's parameters), then the
-- twin's range, the refund, and the peek's answer.
local function refund(key, lim, q_word, ms)
  local qs, qn = grammar.quantity(q_word)
  if not qs then return nil, qn end
  local ok, rerr = twin_range(lim)
  if not ok then return nil, rerr end
  local now_s, now_n, now_ms = store.now()
  local v, verr = limiter.refund(lim, key, now_s, now_n, now_ms, qs, qn)
  if not v then return nil, verr end
  return to_reply(v, ms)
end

-- CL.REFUND key max_burst count_per_period period quantity [MS]
commands['cl.refund'] = { 5, function(key, argv)
  local o, oerr = grammar.options(argv, 5, MS, false)
  if not o then return nil, oerr end
  local lim, err = gcra_of(argv)
  if not lim then return nil, err end
  return refund(key, lim, argv[4], o.MS)
end, 'allow-oom' }

local function sliding_of(argv, approx_mode)
  return cached_limiter((approx_mode and 'A' or 'S') .. argv[1] .. '\0' .. argv[2],
    limiter.sliding, argv[1], argv[2], approx_mode)
end

-- SW.ALLOW key limit window [quantity] [APPROX] [MS]
-- SW.PEEK key limit window [APPROX] [MS]
local function sliding_command(write)
  return function(key, argv)
    local o, oerr = grammar.options(argv, 3, SW_FLAGS, write)
    if not o then return nil, oerr end
    local lim, err = sliding_of(argv, o.APPROX)
    if not lim then return nil, err end
    local ok, rerr = twin_range(lim, err)
    if not ok then return nil, rerr end
    local qs, qn = 0, 0
    if write then qs, qn = quantity_of(o) end
    return single(key, lim, qs, qn, o.MS, write)
  end
end
commands['sw.allow'] = { 3, sliding_command(true) }
commands['sw.peek'] = { 3, sliding_command(false), 'no-writes' }

-- SW.REFUND key limit window quantity [APPROX] [MS]
commands['sw.refund'] = { 4, function(key, argv)
  local o, oerr = grammar.options(argv, 4, SW_FLAGS, false)
  if not o then return nil, oerr end
  local lim, err = sliding_of(argv, o.APPROX)
  if not lim then return nil, err end
  return refund(key, lim, argv[3], o.MS)
end, 'allow-oom' }

local function fixed_of(argv, o)
  local tz = o.TZ
  return cached_limiter('F' .. argv[1] .. '\0' .. argv[2] .. '\0' .. (tz or '') .. (o.ALIGN and '\0A' or '')
    .. (o.COUNTALL and '\0C' or ''), limiter.fixed, argv[1], argv[2], tz, o.ALIGN, o.COUNTALL)
end

-- FW.INCR key limit window-or-unit [quantity] [ALIGN] [TZ zone] [COUNTALL] [MS]
-- FW.PEEK key limit window-or-unit [ALIGN] [TZ zone] [COUNTALL] [MS]
local function fixed_command(write)
  return function(key, argv)
    local o, oerr = grammar.options(argv, 3, FW_FLAGS, write)
    if not o then return nil, oerr end
    local lim, err = fixed_of(argv, o)
    if not lim then return nil, err end
    local ok, rerr = twin_range(lim, err)
    if not ok then return nil, rerr end
    local qs, qn = 0, 0
    if write then qs, qn = quantity_of(o) end
    return single(key, lim, qs, qn, o.MS, write)
  end
end
commands['fw.incr'] = { 3, fixed_command(true) }
commands['fw.peek'] = { 3, fixed_command(false), 'no-writes' }

-- FW.REFUND key limit window-or-unit quantity [ALIGN] [TZ zone] [COUNTALL] [MS]
commands['fw.refund'] = { 4, function(key, argv)
  local o, oerr = grammar.options(argv, 4, FW_FLAGS, false)
  if not o then return nil, oerr end
  local lim, err = fixed_of(argv, o)
  if not lim then return nil, err end
  return refund(key, lim, argv[3], o.MS)
end, 'allow-oom' }

-- The twin's leases of `key`: the string (false when absent) and what
-- lease.scan found in it, or nil and the error.
local function leases_of(key, now_s, now_n, id)
  local v, err, cut = store.get_bounded(key, lease.MAX_BYTES)
  if err then return nil, err end
  if cut then
    -- More leases than the functions serve (an older library took any
    -- limit): refused, never read whole.
    if lease.is_head(v) then return nil, E.TOO_MANY_LEASES end
    return nil, E.WRONG_TYPE
  end
  local held, holds, fs, fn, ls, ln, last_us, seq, os_, on = lease.scan(v, now_s, now_n, id)
  if held == false then return nil, E.TOO_MANY_LEASES end
  if not held then return nil, E.WRONG_TYPE end
  return v or false, { held = held, holds = holds, fs = fs, fn = fn, ls = ls, ln = ln,
    last_us = last_us, seq = seq, os = os_, on = on }
end

-- A limit within the functions' range for leases.
local function check_lease_limit(limit)
  local ok, err = limiter.check_limit(limit)
  if not ok then return nil, err end
  if limit > lease.MAX then return nil, E.BIG_LEASES end
  return true
end

local function lease_duration(w)
  return limiter.window(w, 'lease', E.LEASE_NOT_POSITIVE)
end

local function id_of(w)
  if #w > 1024 then return nil, E.ID_TOO_LONG end
  return w
end

-- CC.ACQUIRE key limit lease [ID id] [MS]
commands['cc.acquire'] = { 3, function(key, argv)
  local o, oerr = grammar.options(argv, 3, CC_FLAGS, false)
  if not o then return nil, oerr end
  local limit, err = limiter.limit(argv[1])
  if not limit then return nil, err end
  local ls_, ln_ = lease_duration(argv[2])
  if not ls_ then return nil, ln_ end
  local id = o.ID
  if id then
    local ierr
    id, ierr = id_of(id)
    if not id then return nil, ierr end
  end
  local ok, cerr = check_lease_limit(limit)
  if not ok then return nil, cerr end
  -- An id enters the key's string only here: CC.RELEASE and CC.RENEW take
  -- the module's ids (a longer one holds no lease of the functions').
  if id and #id > lease.MAX_ID then return nil, E.LONG_ID end
  local now_s, now_n, now_ms = store.now()
  local v, s = leases_of(key, now_s, now_n, id)
  if v == nil then return nil, s end
  local decision, vd, xs, xn = lease.acquire(limit, v or nil, s, now_s, now_n, ls_, ln_)
  if not decision then return nil, vd end
  local last_us, seq = s.last_us, s.seq
  local reply = to_reply(vd, o.MS)
  if decision == 'refused' then
    reply[6] = false
    return reply
  end
  if not id then id, last_us, seq = lease.new_id(now_s, now_n, last_us, seq) end
  local out, exp = lease.rewrite(v or nil, now_s, now_n, id, xs, xn, last_us, seq)
  store.set(key, out, exp, nil, now_ms)
  reply[6] = id
  return reply
end }

-- CC.RELEASE key id
commands['cc.release'] = { 2, function(key, argv)
  local o, oerr = grammar.options(argv, 2, NONE, false)
  if not o then return nil, oerr end
  local id, err = id_of(argv[1])
  if not id then return nil, err end
  local now_s, now_n, now_ms = store.now()
  local v, s = leases_of(key, now_s, now_n, id)
  if v == nil then return nil, s end
  if not s.holds then return 0 end
  local out, exp = lease.rewrite(v, now_s, now_n, id, nil, nil, s.last_us, s.seq)
  if out then store.set(key, out, exp, nil, now_ms) else store.delete(key) end
  return 1
end, 'allow-oom' }

-- CC.RENEW key id lease
commands['cc.renew'] = { 3, function(key, argv)
  local o, oerr = grammar.options(argv, 3, NONE, false)
  if not o then return nil, oerr end
  local id, err = id_of(argv[1])
  if not id then return nil, err end
  local ls_, ln_ = lease_duration(argv[2])
  if not ls_ then return nil, ln_ end
  local now_s, now_n, now_ms = store.now()
  local v, s = leases_of(key, now_s, now_n, id)
  if v == nil then return nil, s end
  if not s.holds then return 0 end
  local xs, xn = padd(now_s, now_n, ls_, ln_)
  if over_i64(xs, xn) then return nil, E.OVERFLOW end
  local out, exp = lease.rewrite(v, now_s, now_n, id, xs, xn, s.last_us, s.seq)
  store.set(key, out, exp, nil, now_ms)
  return 1
end, 'allow-oom' }

-- CC.PEEK key limit [MS]
commands['cc.peek'] = { 2, function(key, argv)
  local o, oerr = grammar.options(argv, 2, MS, false)
  if not o then return nil, oerr end
  local limit, err = limiter.limit(argv[1])
  if not limit then return nil, err end
  local ok, cerr = check_lease_limit(limit)
  if not ok then return nil, cerr end
  local now_s, now_n = store.now()
  local v, s = leases_of(key, now_s, now_n, nil)
  if v == nil then return nil, s end
  return to_reply(lease.decision(limit, v or nil, s, now_s, now_n, 0), o.MS)
end, 'no-writes' }
