-- The one place that talks to keys (src/store.rs): reading state, writing
-- it with an absolute expiry. A function's writes replicate as the
-- commands it calls (effects), with the same absolute times the module
-- replicates: SET key value PXAT ms.

local store = {}

-- The clock: TIME, in microseconds. Returns now as a pair of nanoseconds
-- and now in Unix ms. The seconds' text repeats from call to call: its
-- number is kept (tonumber is the C library's strtod, about a thousand
-- machine instructions; comparing two Lua strings is one).
local sec_text, sec_num = '', 0
function store.now()
  local t = rcall('TIME')
  local st, usec = t[1], tonum(t[2])
  if st ~= sec_text then sec_text, sec_num = st, tonum(st) end
  local sec = sec_num
  return sec, usec * 1000, sec * 1000 + floor(usec / 1000)
end

-- A string key's value; nil when absent; nil and WRONGTYPE for any other
-- type (`module_error` for the module's own types, when given).
function store.get(key, module_error)
  local v = rpcall('GET', key)
  if ltype(v) == 'table' then
    if module_error then
      local t = rpcall('TYPE', key)
      t = ltype(t) == 'table' and t.ok
      if t == 'cell-swin' then return nil, E.MODULE_WINDOW end
      if t == 'cell-conc' then return nil, E.MODULE_LEASES end
    end
    return nil, E.WRONG_TYPE
  end
  return v or nil
end

-- A string key's value as store.get reads it (the module's types named),
-- but no more than its first max_len + 1 bytes: the value (nil when
-- absent), nil or the error, and whether the value was cut (longer than
-- max_len). A state the functions refuse for its size then costs no more
-- to refuse than one they serve costs to read.
function store.get_bounded(key, max_len)
  local v = rpcall('GETRANGE', key, 0, max_len)
  if ltype(v) ~= 'string' then return store.get(key, true) end
  if #v > max_len then return v, nil, true end
  -- GETRANGE answers "" for an absent key too.
  if v == '' and rcall('EXISTS', key) == 0 then return nil end
  return v
end

-- A string key holding an i64 (core parse::integer): found (true/false)
-- and the pair; or nil and `invalid` or WRONGTYPE.
function store.integer(key, invalid)
  local v, err = store.get(key)
  if err then return nil, err end
  if not v then return false end
  local s, n = integer(v)
  if not s then
    -- The twin's own sliding windows and leases are of another kind, as
    -- the module's types are to its CL and FW commands.
    if sbyte(v, 1) == 0 and (ssub(v, 1, 3) == '\0SW' or ssub(v, 1, 4) == '\0CCL') then
      return nil, E.WRONG_TYPE
    end
    return nil, invalid
  end
  return true, s, n
end

-- The key's absolute expiry in Unix ms, nil without one. PEXPIRETIME
-- where the server has it (7.0+), else now + PTTL.
local has_pexpiretime = true
function store.expire_ms(key, now_ms)
  if has_pexpiretime then
    local t = rpcall('PEXPIRETIME', key)
    if ltype(t) == 'number' then
      if t < 0 then return nil end
      return t
    end
    has_pexpiretime = false
  end
  local ttl = rcall('PTTL', key)
  if ttl < 0 then return nil end
  return now_ms + ttl
end

-- An absolute time in ms as redis.call takes it: its decimal text. A
-- number handed to redis.call is written out by the server (6.2 and 7.0
-- with snprintf's %.17g, about 2,700 instructions on 7.0, a call's worth
-- of work); so a whole number of ms from 1000 to 1e15 goes as the text of
-- its seconds, kept by their number (a limit's expiries share their
-- seconds from call to call; bounded), and its last three digits, each
-- made once. Any other number goes as it did: below 1e15 as the number.
-- (Its caches are locals of a block: the chunk's top level, which the
-- client packages extend, holds at most 200 locals.)
local ms_text
do
  local ms_secs, ms_secs_n, ms_digits = {}, 0, {}
  ms_text = function(ms)
    if not (ms >= 1000 and ms < 1e15) then
      if ms < 1e15 then return ms end
      return sformat('%.0f', ms)
    end
    local m = ms % 1000
    local d = ms_digits[m]
    if not d then
      if m % 1 ~= 0 then return ms end
      d = sformat('%03d', m)
      ms_digits[m] = d
    end
    local s = (ms - m) / 1000
    local st = ms_secs[s]
    if not st then
      st = tostr(s)
      if ms_secs_n >= 1024 then ms_secs, ms_secs_n = {}, 0 end
      ms_secs[s], ms_secs_n = st, ms_secs_n + 1
    end
    return st .. d
  end
end

-- Stores `value` expiring at `exp_ms`. `current_ms` is the expiry found:
-- an unchanged one is kept (KEEPTTL). A key expiring in the current
-- millisecond lives until it ends, as the module's keys do, on Redis; Valkey
-- deletes a key set to expire at the current millisecond at once, so there
-- it is given the next one (its state has expired by then either way).
function store.set(key, value, exp_ms, current_ms, now_ms)
  if current_ms and current_ms == exp_ms then
    rcall('SET', key, value, 'KEEPTTL')
    return
  end
  rcall('SET', key, value, 'PXAT', ms_text(exp_ms))
  if exp_ms <= now_ms and rcall('EXISTS', key) == 0 then
    rcall('SET', key, value, 'PXAT', ms_text(now_ms + 1))
  end
end

-- Gives a counter found without TTL the end of its window.
function store.expire_at(key, exp_ms)
  rcall('PEXPIREAT', key, ms_text(exp_ms))
end

function store.delete(key)
  rcall('DEL', key)
end
