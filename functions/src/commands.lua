-- One function per command (src/commands/*.rs), each with the same shape:
-- the required arguments left to right, then the options, then what needs
-- several, then the clock, the key, the decision, the write, the reply.
-- `argv` holds the command's words after its key.

local commands = {}


-- The shape of every single-limiter command (commands::single).
local function single(key, lim, qs, qn, ms, write)
  local now_s, now_n, now_ms = store.now()
  local d, err = limiter.decide(lim, key, now_s, now_n, qs, qn)
  if not d then return nil, err end
  if write then limiter.apply(d, key, not d[1][1], now_ms) end
  return to_reply(d[1], ms)
end

local function quantity_of(o)
  if o.q_s then return o.q_s, o.q_n end
  return 0, 1
end

local MS = { MS = 'flag' }
local MS_MAXWAIT = { MS = 'flag', MAXWAIT = 'keyword' }
local SW_FLAGS = { APPROX = 'flag', MS = 'flag' }
local FW_FLAGS = { ALIGN = 'flag', TZ = 'keyword', MS = 'flag' }
local CC_FLAGS = { ID = 'keyword', MS = 'flag' }
local NONE = {}

-- CL.THROTTLE key max_burst count_per_period period [quantity] [MS]
-- CL.PEEK key max_burst count_per_period period [MS]
local function throttle(write)
  return function(key, argv)
    local k = limiter.cache_key('G', argv[1], argv[2], argv[3])
    local lim, a, err = limiter.cached(k), nil, nil
    if not lim then
      a, err = limiter.gcra_args(argv[1], argv[2], argv[3])
      if not a then return nil, err end
    end
    local o, oerr = grammar.options(argv, 4, MS, write)
    if not o then return nil, oerr end
    if not lim then
      lim, err = limiter.gcra(a)
      if not lim then return nil, err end
      limiter.remember(k, lim)
    end
    local qs, qn = 0, 0
    if write then qs, qn = quantity_of(o) end
    return single(key, lim, qs, qn, o.MS, write)
  end
end
commands['cl.throttle'] = { 4, throttle(true) }
commands['cl.peek'] = { 4, throttle(false), 'no-writes' }

-- CL.RESERVE key max_burst count_per_period period [quantity] MAXWAIT duration [MS]
commands['cl.reserve'] = { 4, function(key, argv)
  local a, err = limiter.gcra_args(argv[1], argv[2], argv[3])
  if not a then return nil, err end
  local o, oerr = grammar.options(argv, 4, MS_MAXWAIT, true)
  if not o then return nil, oerr end
  local lim, lerr = limiter.gcra(a)
  if not lim then return nil, lerr end
  if not o.MAXWAIT then return nil, E.MAXWAIT_MISSING end
  local qs, qn = quantity_of(o)
  local now_s, now_n, now_ms = store.now()
  local found, ts, tn = store.integer(key, E.INVALID_TAT)
  if found == nil then return nil, ts end
  if not found then ts, tn = nil, nil end
  local decision, v, nts, ntn, exp, ws, wn =
    gcra.reserve(lim[2], ts, tn, now_s, now_n, qs, qn, o.mw_s, o.mw_n)
  if not decision then return nil, v end
  if nts then store.set(key, ptostr(nts, ntn), exp, nil, now_ms) end
  local reply = to_reply(v, o.MS)
  if decision == 'later' then reply[4] = unit_ceil(o.MS, ws, wn) end
  return reply
end }

-- CL.REFUND key max_burst count_per_period period quantity [MS]
commands['cl.refund'] = { 5, function(key, argv)
  local a, err = limiter.gcra_args(argv[1], argv[2], argv[3])
  if not a then return nil, err end
  local qs, qn = grammar.quantity(argv[4])
  if not qs then return nil, qn end
  local o, oerr = grammar.options(argv, 5, MS, false)
  if not o then return nil, oerr end
  local lim, lerr = limiter.gcra(a)
  if not lim then return nil, lerr end
  local now_s, now_n, now_ms = store.now()
  local v, verr = limiter.refund(lim, key, now_s, now_n, now_ms, qs, qn)
  if not v then return nil, verr end
  return to_reply(v, o.MS)
end, 'allow-oom' }

-- SW.ALLOW key limit window [quantity] [APPROX] [MS]
-- SW.PEEK key limit window [APPROX] [MS]
local function sliding_command(write)
  return function(key, argv)
    local k = limiter.cache_key('S', argv[1], argv[2])
    local p = limiter.cached(k)
    local limit, ws, wn
    if p then
      limit, ws, wn = p[1], p[2], p[3]
    else
      local err
      limit, err = limiter.limit(argv[1])
      if not limit then return nil, err end
      ws, wn = limiter.window(argv[2], 'window', E.WINDOW_NOT_POSITIVE)
      if not ws then return nil, wn end
    end
    local o, oerr = grammar.options(argv, 3, SW_FLAGS, write)
    if not o then return nil, oerr end
    if not p then
      local ok, lerr = limiter.check_limit(limit)
      if not ok then return nil, lerr end
      limiter.remember(k, { limit, ws, wn })
    end
    local qs, qn = 0, 0
    if write then qs, qn = quantity_of(o) end
    return single(key, limiter.sliding(limit, ws, wn, o.APPROX), qs, qn, o.MS, write)
  end
end
commands['sw.allow'] = { 3, sliding_command(true) }
commands['sw.peek'] = { 3, sliding_command(false), 'no-writes' }

-- SW.REFUND key limit window quantity [APPROX] [MS]
commands['sw.refund'] = { 4, function(key, argv)
  local limit, err = limiter.limit(argv[1])
  if not limit then return nil, err end
  local ws, wn = limiter.window(argv[2], 'window', E.WINDOW_NOT_POSITIVE)
  if not ws then return nil, wn end
  local qs, qn = grammar.quantity(argv[3])
  if not qs then return nil, qn end
  local o, oerr = grammar.options(argv, 4, SW_FLAGS, false)
  if not o then return nil, oerr end
  local ok, lerr = limiter.check_limit(limit)
  if not ok then return nil, lerr end
  local now_s, now_n, now_ms = store.now()
  local v, verr = limiter.refund(limiter.sliding(limit, ws, wn, o.APPROX), key, now_s, now_n, now_ms, qs, qn)
  if not v then return nil, verr end
  return to_reply(v, o.MS)
end, 'allow-oom' }

-- FW.INCR key limit window-or-unit [quantity] [ALIGN] [TZ zone] [MS]
-- FW.PEEK key limit window-or-unit [ALIGN] [TZ zone] [MS]
local function fixed_command(write)
  return function(key, argv)
    local k = limiter.cache_key('F', argv[1], argv[2])
    local p = limiter.cached(k)
    local limit, unit, ws, wn
    if p then
      limit, unit, ws, wn = p[1], p[2], p[3], p[4]
    else
      local err
      limit, err = limiter.limit(argv[1])
      if not limit then return nil, err end
      unit, ws, wn = limiter.window_or_unit(argv[2])
      if unit == nil then return nil, ws end
    end
    local o, oerr = grammar.options(argv, 3, FW_FLAGS, write)
    if not o then return nil, oerr end
    local lim, lerr = limiter.fixed(limit, unit, ws, wn, o.TZ, o.ALIGN)
    if not lim then return nil, lerr end
    if not p then
      local ok, cerr = limiter.check_limit(limit)
      if not ok then return nil, cerr end
      limiter.remember(k, { limit, unit, ws, wn })
    end
    local qs, qn = 0, 0
    if write then qs, qn = quantity_of(o) end
    return single(key, lim, qs, qn, o.MS, write)
  end
end
commands['fw.incr'] = { 3, fixed_command(true) }
commands['fw.peek'] = { 3, fixed_command(false), 'no-writes' }

-- FW.REFUND key limit window-or-unit quantity [ALIGN] [TZ zone] [MS]
commands['fw.refund'] = { 4, function(key, argv)
  local limit, err = limiter.limit(argv[1])
  if not limit then return nil, err end
  local unit, ws, wn = limiter.window_or_unit(argv[2])
  if unit == nil then return nil, ws end
  local qs, qn = grammar.quantity(argv[3])
  if not qs then return nil, qn end
  local o, oerr = grammar.options(argv, 4, FW_FLAGS, false)
  if not o then return nil, oerr end
  local lim, lerr = limiter.fixed(limit, unit, ws, wn, o.TZ, o.ALIGN)
  if not lim then return nil, lerr end
  local ok, cerr = limiter.check_limit(limit)
  if not ok then return nil, cerr end
  local now_s, now_n, now_ms = store.now()
  local v, verr = limiter.refund(lim, key, now_s, now_n, now_ms, qs, qn)
  if not v then return nil, verr end
  return to_reply(v, o.MS)
end, 'allow-oom' }

-- The twin's leases of `key`: the string (false when absent), or nil and
-- the error.
local function leases_of(key, now_s, now_n, id)
  local v, err = store.get(key, true)
  if err then return nil, err end
  if not v then return false, lease.scan(nil, now_s, now_n, id) end
  local held, holds, fs, fn, ls, ln, last_us, seq = lease.scan(v, now_s, now_n, id)
  if not held then return nil, E.WRONG_TYPE end
  return v, held, holds, fs, fn, ls, ln, last_us, seq
end

local function lease_duration(w)
  return limiter.window(w, 'lease', E.LEASE_NOT_POSITIVE)
end

-- CC.ACQUIRE key limit lease [ID id] [MS]
commands['cc.acquire'] = { 3, function(key, argv)
  local limit, err = limiter.limit(argv[1])
  if not limit then return nil, err end
  local ls_, ln_ = lease_duration(argv[2])
  if not ls_ then return nil, ln_ end
  local o, oerr = grammar.options(argv, 3, CC_FLAGS, false)
  if not o then return nil, oerr end
  local ok, cerr = limiter.check_limit(limit)
  if not ok then return nil, cerr end
  local now_s, now_n, now_ms = store.now()
  local v, verr, _, _, _, _, _, last_us, seq = leases_of(key, now_s, now_n, o.ID)
  if v == nil then return nil, verr end
  local decision, vd, xs, xn = lease.acquire(limit, v or nil, now_s, now_n, ls_, ln_, o.ID)
  if not decision then return nil, vd end
  local reply = to_reply(vd, o.MS)
  if decision == 'refused' then
    reply[6] = false
    return reply
  end
  local id = o.ID
  if not id then id, last_us, seq = lease.new_id(now_s, now_n, last_us, seq) end
  local out, exp = lease.rewrite(v or nil, now_s, now_n, id, xs, xn, last_us, seq)
  store.set(key, out, exp, nil, now_ms)
  reply[6] = id
  return reply
end }

local function id_of(w)
  if #w > 1024 then return nil, E.ID_TOO_LONG end
  return w
end

-- CC.RELEASE key id
commands['cc.release'] = { 2, function(key, argv)
  local id, err = id_of(argv[1])
  if not id then return nil, err end
  local o, oerr = grammar.options(argv, 2, NONE, false)
  if not o then return nil, oerr end
  local now_s, now_n, now_ms = store.now()
  local v, verr, holds, _, _, _, _, last_us, seq = leases_of(key, now_s, now_n, id)
  if v == nil then return nil, verr end
  if not holds then return 0 end
  local out, exp = lease.rewrite(v, now_s, now_n, id, nil, nil, last_us, seq)
  if out then store.set(key, out, exp, nil, now_ms) else store.delete(key) end
  return 1
end, 'allow-oom' }

-- CC.RENEW key id lease
commands['cc.renew'] = { 3, function(key, argv)
  local id, err = id_of(argv[1])
  if not id then return nil, err end
  local ls_, ln_ = lease_duration(argv[2])
  if not ls_ then return nil, ln_ end
  local o, oerr = grammar.options(argv, 3, NONE, false)
  if not o then return nil, oerr end
  local now_s, now_n, now_ms = store.now()
  local v, verr, holds, _, _, _, _, last_us, seq = leases_of(key, now_s, now_n, id)
  if v == nil then return nil, verr end
  if not holds then return 0 end
  local xs, xn = padd(now_s, now_n, ls_, ln_)
  if over_i64(xs, xn) then return nil, E.OVERFLOW end
  local out, exp = lease.rewrite(v, now_s, now_n, id, xs, xn, last_us, seq)
  store.set(key, out, exp, nil, now_ms)
  return 1
end, 'allow-oom' }

-- CC.PEEK key limit [MS]
commands['cc.peek'] = { 2, function(key, argv)
  local limit, err = limiter.limit(argv[1])
  if not limit then return nil, err end
  local o, oerr = grammar.options(argv, 2, MS, false)
  if not o then return nil, oerr end
  local ok, cerr = limiter.check_limit(limit)
  if not ok then return nil, cerr end
  local now_s, now_n = store.now()
  local v, held, _, fs, fn, ls, ln = leases_of(key, now_s, now_n, nil)
  if v == nil then return nil, held end
  return to_reply(lease.verdict(limit, held, fs, fn, ls, ln, now_s, now_n), o.MS)
end, 'no-writes' }
