-- Fixed window counter (core/src/fixed.rs): the state is what INCR +
-- EXPIRE holds, a count (a pair) and the key's expiry in Unix ms (a
-- double, nil without TTL).
--
-- A FixedWindow is { limit, kind, window_s, window_n } with kind
-- 'rolling' or 'aligned', or { limit, 'calendar', unit, offset }; its
-- field `all` is true for COUNTALL (every hit counted, refused or not).

local fixed = {}

function fixed.new(limit, ws, wn, align)
  return { limit, align and 'aligned' or 'rolling', ws, wn }
end

function fixed.calendar(limit, unit, offset)
  return { limit, 'calendar', unit, offset }
end

-- The same windows counting every hit (COUNTALL), as FixedWindow::counting.
function fixed.counting(fw, all)
  if all then fw.all = true end
  return fw
end

-- now mod w for now >= 0 and w > 0 (pairs), as a pair.
local function pmod(as, an, ws, wn)
  local w = ptod(ws, wn)
  if ptod(as, an) / w < 4503599627370496 then -- quotient below 2^52
    local _, _, rs, rn = pdiv(as, an, ws, wn)
    return rs, rn
  end
  -- w < 2^12 here: reduce the seconds and the nanoseconds apart.
  local r = (fmod(as, w) * fmod(B, w) + fmod(an, w)) % w
  return 0, r
end
fixed.pmod = pmod

-- The end (ns, a pair) of a window that would start now.
local function new_window_end(fw, now_s, now_n)
  local kind = fw[2]
  if kind == 'rolling' then return padd(now_s, now_n, fw[3], fw[4]) end
  if kind == 'aligned' then
    local rs, rn = pmod(now_s, now_n, fw[3], fw[4])
    local es, en = psub(now_s, now_n, rs, rn)
    return padd(es, en, fw[3], fw[4])
  end
  return calendar.period_end(now_s, now_n, fw[3], fw[4])
end

-- The end-of-64-bits rule (FixedWindow::check): a window starting now
-- must end at a 64-bit instant.
function fixed.check(fw, now_s, now_n)
  -- A rolling or aligned window ends at most one window after now.
  if fw[2] ~= 'calendar' and not past_i64(now_s, now_n, fw[3], fw[4]) then return true end
  return not over_i64(new_window_end(fw, now_s, now_n))
end

-- The end (Unix ms, rounded up) of a window that would start now.
local function new_window_end_ms(fw, now_s, now_n)
  local es, en = new_window_end(fw, now_s, now_n)
  -- ceil(end / 1e6)
  local ms = es * 1000 + floor(en / 1000000)
  if en % 1000000 > 0 then ms = ms + 1 end
  return ms
end
fixed.new_window_end_ms = new_window_end_ms

-- A counter is expired from the first instant of its expiry millisecond:
-- alive while now's millisecond is before it.
local function alive(exp_ms, now_s, now_n)
  return not exp_ms or now_s * 1000 + floor(now_n / 1000000) < exp_ms
end

-- end_ms * 1e6 - now, a pair (end_ms * 1e6 is beyond 2^53).
local function until_ms(end_ms, now_s, now_n)
  local d = end_ms - (now_s * 1000 + floor(now_n / 1000000))
  if d < 9e9 and d > -9e9 then
    local x = d * 1000000 - now_n % 1000000
    local s = floor(x / B)
    return s, x - s * B
  end
  local es, en = dtop(end_ms)
  es, en = pmul(es, en, 1000000)
  return psub(es, en, now_s, now_n)
end

-- Decides a request of `quantity` (a pair) on the counter found (count
-- pair cs/cn, expiry exp_ms; cs nil when absent). Returns the effect
-- ('none', or 'store' with the count pair and expiry), the verdict, and
-- for a counter found without TTL the end of its window, to be set as its
-- expiry whatever happens to the call (the repair).
function fixed.decide(fw, cs, cn, exp_ms, now_s, now_n, qs, qn)
  if cs and not alive(exp_ms, now_s, now_n) then cs, cn, exp_ms = nil, nil, nil end
  local end_ms
  if cs and exp_ms then end_ms = exp_ms else end_ms = new_window_end_ms(fw, now_s, now_n) end
  local us, un = psat(until_ms(end_ms, now_s, now_n))
  if us < 0 then us, un = 0, 0 end
  local count_s, count_n = cs or 0, cn or 0
  local limit = fw[1]
  local fits = limit > 0 and qs >= 0 and ptod(qs, qn) <= limit
  local ncs, ncn = padd(count_s, count_n, qs, qn)
  local limited, rs, rn, as, an = false, nil, nil, count_s, count_n
  local effect = 'none'
  if fw.all and (qs > 0 or qn > 0) and not over_i64(ncs, ncn) then
    -- Counted whatever the verdict, as INCRBY counts it; a count past 64
    -- bits is refused uncounted below, as never fitting.
    as, an, effect = ncs, ncn, 'store'
    if ptod(ncs, ncn) > limit then
      limited = true
      if fits then rs, rn = us, un end
    end
  elseif not fits then
    limited = true
  elseif ptod(ncs, ncn) <= limit then
    as, an = ncs, ncn
    if qs > 0 or qn > 0 then effect = 'store' end
  else
    limited, rs, rn = true, us, un
  end
  local repair
  if cs and not exp_ms then repair = end_ms end
  local after = ptod(as, an)
  local rem = limit - after
  -- COUNTALL's remaining goes below 0 by the count over the limit.
  if rem < 0 and not fw.all then rem = 0 elseif rem > limit then rem = limit end
  local ts, tn = 0, 0
  if as > 0 or (as == 0 and an > 0) then ts, tn = us, un end
  return effect, verdict(limited, limit, rem, rs, rn, ts, tn), as, an, end_ms, repair
end

-- Gives back `quantity` to the counter found. Returns nil (nothing to
-- write) or the new count pair and its expiry (ms).
function fixed.refund(fw, cs, cn, exp_ms, now_s, now_n, qs, qn)
  if not cs or not alive(exp_ms, now_s, now_n) then return nil end
  local positive = qs > 0 or (qs == 0 and qn > 0)
  if not positive and exp_ms then return nil end
  if not positive then qs, qn = 0, 0 end
  local rs, rn = psub(cs, cn, qs, qn)
  if rs < 0 then rs, rn = 0, 0 end
  return rs, rn, exp_ms or new_window_end_ms(fw, now_s, now_n)
end
