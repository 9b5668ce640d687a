-- The limiters as the commands use them (src/limiter.rs): parameters
-- parsed from words, a decision read from a key, and the write that
-- follows when the call goes ahead. Single commands and CL.THROTTLEALL
-- share all of it.
--
-- A limiter is { 'gcra', g }, { 'exact', limit, ws, wn },
-- { 'approx', limit, ws, wn } or { 'fixed', fw }.

local limiter = {}
local MAX_LIMIT = 9007199254740992 -- 2^53: Lua replies integers as doubles

-- Parsed parameters by their words: a library's state lives as long as
-- the library, so a rate limit called with the same words is parsed once
-- (what parsing gives depends on nothing else). Bounded; only short words.
local cache, cached = {}, 0

function limiter.cache_key(k)
  if #k <= 80 then return k end
  return nil
end

function limiter.cached(k)
  return k and cache[k]
end

function limiter.remember(k, value)
  if not k then return end
  if cached >= 4096 then cache, cached = {}, 0 end
  cache[k] = value
  cached = cached + 1
end

-- max_burst count_per_period period as limiter::gcra reads them: the three
-- parsed, then their ranges, then what needs them together (Gcra::new).
-- Returns { 'gcra', g }, or nil and the error.
function limiter.gcra(mb, count, period)
  local bs, bn = integer(mb)
  if not bs then return nil, E.NOT_INTEGER end
  local cs, cn = integer(count)
  if not cs then return nil, E.NOT_INTEGER end
  local ps, pn = grammar.duration(period, 'period')
  if not ps then return nil, pn end
  if bs < 0 then return nil, E.NEGATIVE_MAX_BURST end
  if cs < 0 or (cs == 0 and cn < 1) then return nil, E.COUNT_NOT_POSITIVE end
  if ps < 0 or (ps == 0 and pn < 1) then return nil, E.PERIOD_NOT_POSITIVE end
  local g, err = gcra.new(bs, bn, count, ps, pn)
  if not g then return nil, err end
  return { 'gcra', g }
end

-- A non-negative integer limit, as a double (inexact when too large for
-- the twin: limiter.check_limit() refuses it after the module's checks).
function limiter.limit(w)
  local s, n = integer(w)
  if not s then return nil, E.NOT_INTEGER end
  if s < 0 then return nil, E.NEGATIVE_LIMIT end
  return ptod(s, n)
end

-- The twin's own range: limits Lua can return exactly.
function limiter.check_limit(limit)
  if limit >= MAX_LIMIT then return nil, E.BIG_LIMIT end
  return true
end

-- The twin's range for a limiter: its limit (check_limit). An exact log's
-- limit may exceed the most requests the functions log (sliding.MAX_LOG):
-- requests of a large cost take one entry each, and a log that grows past
-- MAX_LOG entries is refused when next read (E.LOG_TOO_BIG), never read
-- whole.
function limiter.check_range(lim)
  local limit = limiter.limit_of(lim)
  local ok, err = limiter.check_limit(limit)
  if not ok then return nil, err end
  return true
end

-- A positive duration named `what` (`window`, `lease`): a pair.
function limiter.window(w, what, not_positive)
  local s, n = grammar.duration(w, what)
  if not s then return nil, n end
  if s < 0 or (s == 0 and n < 1) then return nil, not_positive end
  return s, n
end

-- `limit window` as limiter::sliding reads them: a limiter, or nil and the
-- error.
function limiter.sliding(limit_w, window_w, approx_mode)
  local limit, err = limiter.limit(limit_w)
  if not limit then return nil, err end
  local ws, wn = limiter.window(window_w, 'window', E.WINDOW_NOT_POSITIVE)
  if not ws then return nil, wn end
  return { approx_mode and 'approx' or 'exact', limit, ws, wn }
end

-- `limit window-or-unit [TZ zone] [ALIGN] [COUNTALL]` as limiter::fixed reads them: a
-- calendar unit takes the zone (UTC without one); a zone without a unit is
-- an error before the window is read.
function limiter.fixed(limit_w, window_w, tz_w, align, all)
  local limit, err = limiter.limit(limit_w)
  if not limit then return nil, err end
  local unit = calendar.unit(window_w)
  if unit then
    local offset = 0
    if tz_w then
      offset = calendar.parse_offset(tz_w)
      if not offset then
        -- An IANA name (Area/Location, or UTC) is the module's alone.
        if (sfind(tz_w, '/', 1, true) and sfind(tz_w, '%a')) or tz_w == 'UTC' then
          return nil, E.NAMED_ZONE
        end
        return nil, E.BAD_TZ
      end
    end
    return { 'fixed', fixed.counting(fixed.calendar(limit, unit, offset), all) }
  end
  if tz_w then return nil, E.TZ_WITHOUT_CALENDAR end
  local ws, wn = limiter.window(window_w, 'window', E.WINDOW_NOT_POSITIVE)
  if not ws then return nil, wn end
  return { 'fixed', fixed.counting(fixed.new(limit, ws, wn, align), all) }
end

-- The limit of a limiter, for the twin's range check.
function limiter.limit_of(lim)
  if lim[1] == 'gcra' then return lim[2][5] end
  if lim[1] == 'fixed' then return lim[2][1] end
  return lim[2]
end

-- A sliding window key's string, checked against the mode asked for;
-- for an exact log, also its entry count and base (sliding.open).
local function window_state(key, approx_mode)
  local v, err, cut = store.get_bounded(key, sliding.MAX_BYTES)
  if err then return nil, err end
  if not v then return false end
  if cut then
    -- A log of more requests than the functions serve (an older library
    -- took any limit): refused, never read whole.
    if sliding.is_log_head(v) then return nil, E.LOG_TOO_BIG end
    return nil, E.WRONG_TYPE
  end
  local n, base = sliding.open(v)
  if n then
    if approx_mode then return nil, E.EXACT_KEY end
    return v, n, base
  end
  if approx.open(v) then
    if not approx_mode then return nil, E.APPROX_KEY end
    return v
  end
  return nil, E.WRONG_TYPE
end
limiter.window_state = window_state

-- The end-of-64-bits rule (Limiter::check): a call whose arithmetic
-- would pass i64::MAX ns is refused before its key is read. Returns the
-- limiter's kind, or nil and the error.
function limiter.check(lim, now_s, now_n)
  local kind, ok = lim[1], true
  if kind == 'gcra' then ok = gcra.check(lim[2], now_s, now_n)
  elseif kind == 'fixed' then ok = fixed.check(lim[2], now_s, now_n)
  elseif kind == 'approx' then ok = approx.check(lim[3], lim[4], now_s, now_n)
  else ok = not past_i64(now_s, now_n, lim[3], lim[4]) end
  if not ok then return nil, E.OVERFLOW end
  return kind
end

-- Decides a request of `quantity` (a pair) at `now` on `key`, writing
-- nothing. Returns the verdict, then value, expire_ms, current_ms, repair,
-- always: the write (value nil for none; current_ms the expiry found),
-- `repair` an expiry for a counter found without TTL, and `always` true
-- when the write is made even for a refused call (COUNTALL); or nil and
-- the error. (Several values rather than one table: no table made per
-- call.)
function limiter.decide(lim, key, now_s, now_n, qs, qn)
  local kind, cerr = limiter.check(lim, now_s, now_n)
  if not kind then return nil, cerr end
  if kind == 'gcra' then
    local found, ts, tn = store.integer(key, E.INVALID_TAT)
    if found == nil then return nil, ts end
    if not found then ts, tn = nil, nil end
    local decision, v, nts, ntn, exp = gcra.decide(lim[2], ts, tn, now_s, now_n, qs, qn)
    if not decision then return nil, v end
    if decision == 'allowed' then return v, ptostr(nts, ntn), exp end
    return v
  elseif kind == 'fixed' then
    local found, cs, cn = store.integer(key, E.INVALID_COUNTER)
    if found == nil then return nil, cs end
    local exp_ms
    if found then exp_ms = store.expire_ms(key, now_s * 1000 + floor(now_n / 1000000)) else cs, cn = nil, nil end
    local effect, v, as, an, end_ms, repair = fixed.decide(lim[2], cs, cn, exp_ms, now_s, now_n, qs, qn)
    -- COUNTALL answers the count (limit - remaining): exact below 2^53.
    if lim[2].all and ptod(as, an) >= MAX_LIMIT then return nil, E.BIG_COUNT end
    if effect == 'store' then return v, parg(as, an), end_ms, exp_ms, repair, lim[2].all end
    return v, nil, nil, nil, repair
  end
  local approx_mode = kind == 'approx'
  local state, n, base = window_state(key, approx_mode)
  if state == nil then return nil, n end
  local q = ptod(qs, qn)
  if approx_mode then
    local decision, v, v2, exp = approx.decide(lim[2], lim[3], lim[4], state or nil, now_s, now_n, q)
    if not decision then return nil, v end
    if v2 then return v, v2, exp end
    return v
  end
  if not state then n, base = 0, 0 end
  local decision, v, at_s, at_n, dropped = sliding.decide(lim[2], lim[3], lim[4], state or nil, n, base, now_s, now_n, q)
  if at_s then
    local v2, exp = sliding.record(state or nil, n, base, lim[3], lim[4], at_s, at_n, q, dropped)
    return v, v2, exp
  end
  return v
end

-- Writes what the call writes (what limiter.decide returned after the
-- verdict): the write itself when the call goes ahead (which sets the
-- expiry a repair would), otherwise the repair.
function limiter.apply(key, goes_ahead, now_ms, value, exp_ms, current_ms, repair)
  if goes_ahead and value then
    store.set(key, value, exp_ms, current_ms, now_ms)
  elseif repair then
    store.expire_at(key, repair)
  end
end

-- Gives back up to `quantity` on `key` and answers what the limiter's peek
-- answers afterwards; or nil and the error.
function limiter.refund(lim, key, now_s, now_n, now_ms, qs, qn)
  local kind, cerr = limiter.check(lim, now_s, now_n)
  if not kind then return nil, cerr end
  if kind == 'gcra' then
    local found, ts, tn = store.integer(key, E.INVALID_TAT)
    if found == nil then return nil, ts end
    if found then
      local r, nts, ntn, exp = gcra.refund(lim[2], ts, tn, now_s, now_n, qs, qn)
      if r == 'empty' then store.delete(key)
      elseif r == 'store' then store.set(key, ptostr(nts, ntn), exp, nil, now_ms) end
    end
  elseif kind == 'fixed' then
    local found, cs, cn = store.integer(key, E.INVALID_COUNTER)
    if found == nil then return nil, cs end
    if found then
      if lim[2].all and ptod(cs, cn) >= MAX_LIMIT then return nil, E.BIG_COUNT end
      local exp_ms = store.expire_ms(key, now_ms)
      local rs, rn, exp = fixed.refund(lim[2], cs, cn, exp_ms, now_s, now_n, qs, qn)
      if rs then
        if rs == 0 and rn == 0 then store.delete(key)
        else store.set(key, parg(rs, rn), exp, exp_ms, now_ms) end
      end
    end
  else
    local approx_mode = kind == 'approx'
    local state, err = window_state(key, approx_mode)
    if state == nil then return nil, err end
    if state and (qs > 0 or qn > 0) then
      local q = ptod(qs, qn)
      local v2, exp
      if approx_mode then
        v2, exp = approx.unrecord(state, lim[3], lim[4], now_s, now_n, q)
      else
        v2, exp = sliding.unrecord(state, lim[3], lim[4], now_s, now_n, q)
      end
      if v2 then store.set(key, v2, exp, nil, now_ms) else store.delete(key) end
    end
  end
  -- The peek's verdict, or nil and the error.
  return limiter.decide(lim, key, now_s, now_n, 0, 0)
end
