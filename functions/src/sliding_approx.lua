-- Sliding window counter, APPROX (core/src/sliding_approx.rs), over the
-- twin's own string: "\0SWA", the window (seconds as a double, then
-- nanoseconds, 4 bytes), the start of the current fixed window (the same
-- way; the module keeps its index, start / window), then the previous and
-- the current counts (doubles): 44 bytes.

local approx = {}
local SWA = '\0SWA'

-- The counter found in a string, or nil if it is not one:
-- window pair, start pair, previous, current.
function approx.open(v)
  if #v ~= 44 or ssub(v, 1, 4) ~= SWA then return nil end
  local ws, wn, ss, sn, previous, current = sunpack('>dI4dI4dd', v, 5)
  -- A damaged string is no counter (NaN fails every comparison).
  if not (ws >= 0 and ws < 1e10 and wn < B and ss > -1e10 and ss < 1e10 and sn < B
      and previous >= 0 and previous < MAXS and current >= 0 and current < MAXS) then
    return nil
  end
  return ws, wn, ss, sn, previous, current
end

function approx.encode(ws, wn, ss, sn, previous, current)
  return SWA .. spack('>dI4dI4dd', ws, wn, ss, sn, previous, current)
end

-- The state as of `now` (roll): start pair, previous, current.
local function roll(v, ws, wn, now_s, now_n)
  local rs, rn = fixed.pmod(now_s, now_n, ws, wn)
  local ss, sn = psub(now_s, now_n, rs, rn)
  if v then
    local vws, vwn, vss, vsn, previous, current = approx.open(v)
    if vws == ws and vwn == wn then
      -- A state from this window, or from a later one (the clock stepped
      -- back), is kept as it is.
      if ple(ss, sn, vss, vsn) then return vss, vsn, previous, current end
      local ns, nn = padd(vss, vsn, ws, wn)
      if ns == ss and nn == sn then return ss, sn, current, 0 end
    end
  end
  return ss, sn, 0, 0
end
approx.roll = roll

-- ceil(previous * (w - elapsed) / w) + current; nil beyond the pairs.
local function estimate(ws, wn, previous, current, es, en)
  if previous == 0 then return current end
  local gs, gn = psub(ws, wn, es, en)
  local ps, pn = pmul(gs, gn, previous)
  if not ps then return nil end
  ps, pn = padd(ps, pn, ws, wn)
  ps, pn = psub(ps, pn, 0, 1)
  local qs, qn = pdiv(ps, pn, ws, wn)
  if not qs then return nil end
  return ptod(qs, qn) + current
end

-- The first instant the request fits (wait_until_fits), a pair; nil
-- beyond the pairs.
local function wait_until_fits(limit, ws, wn, previous, current, es, en, q)
  local windows = { { previous, current }, { current, 0 }, { 0, 0 } }
  for k = 0, 2 do
    local p, c = windows[k + 1][1], windows[k + 1][2]
    local room = limit - q - c
    if room >= 0 then
      local xs, xn = 0, 0
      if p ~= 0 then
        local ps, pn = pmul(ws, wn, room)
        if not ps then return nil end
        local ds, dn = dtop(p)
        local qs, qn = pdiv(ps, pn, ds, dn)
        if not qs then return nil end
        xs, xn = psub(ws, wn, qs, qn)
        if xs < 0 then xs, xn = 0, 0 end
      end
      if k == 0 and plt(xs, xn, es, en) then xs, xn = es, en end
      if plt(xs, xn, ws, wn) then
        local ts, tn = xs, xn
        for _ = 1, k do ts, tn = padd(ts, tn, ws, wn) end
        ts, tn = psat(psub(ts, tn, es, en))
        if ts < 0 or (ts == 0 and tn < 1) then ts, tn = 0, 1 end
        return ts, tn
      end
    end
  end
  local ts, tn = padd(ws, wn, ws, wn)
  return psat(psub(ts, tn, es, en))
end

-- Decides a request at `now` (ApproxWindow::decide). Returns the decision,
-- the verdict, and for an allowed request of quantity > 0 the new string
-- and its expiry (ms); or nil and the error.
function approx.decide(limit, ws, wn, v, now_s, now_n, q)
  local ss, sn, previous, current = roll(v, ws, wn, now_s, now_n)
  -- Decided at the start of a later window when the clock is behind it.
  local ats, atn = now_s, now_n
  if plt(ats, atn, ss, sn) then ats, atn = ss, sn end
  local bs, bn = psub(ats, atn, now_s, now_n)
  local es, en = psub(ats, atn, ss, sn)
  local used = estimate(ws, wn, previous, current, es, en)
  if not used then return nil, E.RANGE end
  local fits = limit > 0 and q >= 0 and q <= limit
  local decision, rs, rn = 'never', nil, nil
  local after_current = current
  if not fits then
    decision = 'never'
  elseif used + q <= limit then
    decision = 'allowed'
    if q > 0 then after_current = current + q end
  else
    decision = 'limited'
    rs, rn = wait_until_fits(limit, ws, wn, previous, current, es, en, q)
    if not rs then return nil, E.RANGE end
    rs, rn = psat(padd(rs, rn, bs, bn))
  end
  local used_after = estimate(ws, wn, previous, after_current, es, en)
  local ts, tn
  if after_current > 0 then
    ts, tn = padd(ss, sn, ws, wn)
    ts, tn = padd(ts, tn, ws, wn)
  elseif previous > 0 then
    ts, tn = padd(ss, sn, ws, wn)
  else
    ts, tn = now_s, now_n
  end
  ts, tn = psat(psub(ts, tn, now_s, now_n))
  local rem = limit - used_after
  if rem < 0 then rem = 0 elseif rem > limit then rem = limit end
  local v2, exp
  if decision == 'allowed' and q > 0 then
    v2 = approx.encode(ws, wn, ss, sn, previous, after_current)
    exp = approx.expire_at_ms(ws, wn, ss, sn)
  end
  return decision, verdict(decision ~= 'allowed', limit, rem, rs, rn, ts, tn), v2, exp
end

-- The end-of-64-bits rule (sliding_approx::check): the end of the window
-- after the current one must be a 64-bit instant.
function approx.check(ws, wn, now_s, now_n)
  local rs, rn = fixed.pmod(now_s, now_n, ws, wn)
  local es, en = psub(now_s, now_n, rs, rn)
  es, en = padd(es, en, ws, wn)
  es, en = padd(es, en, ws, wn)
  return not over_i64(es, en)
end

-- When the key can expire: once both counts have weight zero.
function approx.expire_at_ms(ws, wn, ss, sn)
  local es, en = padd(ss, sn, ws, wn)
  es, en = padd(es, en, ws, wn)
  return es * 1000 + floor(en / 1000000)
end

-- Gives back `q` at `at` (unrecord): the new string and its expiry, or
-- nil when both counts are 0 (the key goes).
function approx.unrecord(v, ws, wn, at_s, at_n, q)
  local ss, sn, previous, current = roll(v, ws, wn, at_s, at_n)
  local from_current = current < q and current or q
  local from_previous = previous < q - from_current and previous or q - from_current
  current, previous = current - from_current, previous - from_previous
  if previous <= 0 and current <= 0 then return nil end
  return approx.encode(ws, wn, ss, sn, previous, current), approx.expire_at_ms(ws, wn, ss, sn)
end
