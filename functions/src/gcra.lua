-- GCRA with the exact arithmetic of the original redis-cell
-- (core/src/gcra.rs). Instants and durations are pairs of nanoseconds.
--
-- A Gcra is { emission_s, emission_n, tolerance_s, tolerance_n, limit }.

local gcra = {}

-- Parameters as given to CL.THROTTLE (max_burst >= 0 and period >= 1 as
-- pairs, count >= 1 as its text), or nil and the error.
function gcra.new(bs, bn, count_text, ps, pn)
  local es, en = f64_quotient_trunc(ps, pn, count_text)
  if es == 0 and en == 0 then return nil, E.RATE_TOO_HIGH end
  local ls, ln = padd(bs, bn, 0, 1)
  if over_i64(ls, ln) then return nil, E.OVERFLOW end
  local ts, tn = pmulp(es, en, ls, ln)
  if not ts or over_i64(ts, tn) then return nil, E.OVERFLOW end
  -- The interval and the tolerance as plain doubles when they are exact
  -- far below 2^53 (nearly always): gcra.decide's fast path.
  local e, t = ptod(es, en), ptod(ts, tn)
  if t >= 1e15 then e, t = nil, nil end
  return { es, en, ts, tn, ptod(ls, ln), e, t }
end

-- When a key whose bucket empties `ttl` after `now` expires (Unix ms).
local function expire_at_ms(now_s, now_n, ttl_s, ttl_n)
  return now_s * 1000 + floor(now_n / 1000000) + ttl_s * 1000 + floor(ttl_n / 1000000)
end
gcra.expire_at_ms = expire_at_ms

-- How many more requests of quantity 1 fit when the bucket empties in
-- `ttl`: (DVT - ttl) / T on whole microseconds when T >= 1 us, within
-- [0, limit].
local function remaining(g, ttl_s, ttl_n)
  local es, en = g[1], g[2]
  local xs, xn = psub(g[3], g[4], ttl_s, ttl_n)
  if xs < 0 or (xs == 0 and xn == 0) then return 0 end
  if es > 0 or en >= 1000 then
    xs, xn = whole_micros(xs, xn)
    es, en = whole_micros(es, en)
  end
  local limit = g[5]
  -- Past the limit: no need for the exact quotient.
  if ptod(xs, xn) / ptod(es, en) > limit + 2 then return limit end
  local qs, qn = pdiv(xs, xn, es, en)
  local q = ptod(qs, qn)
  if q > limit then return limit end
  return q
end

-- Decides a request of `quantity` (a pair) at `now` against the stored TAT
-- (nil for an absent key). Returns the decision ('allowed', 'limited' or
-- 'never'), the verdict, and for 'allowed' the new TAT and its expiry (ms);
-- or nil and the error.
-- The end-of-64-bits rule (Gcra::check): a bucket filled now empties at
-- now + DVT, which must be a 64-bit instant.
function gcra.check(g, now_s, now_n)
  return not past_i64(now_s, now_n, g[3], g[4])
end

-- The caller has applied gcra.check (limiter.check, gcra.reserve).
function gcra.decide(g, tat_s, tat_n, now_s, now_n, qs, qn)
  -- Fast path: the same steps on doubles, relative to now, when every
  -- value is a whole number far below 2^53 (a TAT within a day of now,
  -- an interval and a tolerance under 1e15 ns, a small quantity).
  local e, t = g[6], g[7]
  if e and qs == 0 then
    local inc = e * qn
    local rel = 0
    if tat_s then
      local ds = tat_s - now_s
      if ds > 86400 or ds < -86400 then e = nil else rel = ds * B + (tat_n - now_n) end
    end
    if e and inc < 1e15 and now_s < 9000000000 then
      local new_rel = (rel > 0 and rel or 0) + inc
      local allow_rel = new_rel - t
      local ttl = new_rel
      local limited = allow_rel > 0
      if limited then ttl = rel > 0 and rel or 0 end
      -- remaining: (t - ttl) / e, on whole microseconds when e >= 1 us
      local rem, x = 0, t - ttl
      if x > 0 then
        if e >= 1000 then rem = floor(floor(x / 1000) / floor(e / 1000)) else rem = floor(x / e) end
        if rem > g[5] then rem = g[5] end
      end
      local ttl_s = floor(ttl / B)
      if limited then
        local rs, rn
        if inc <= t then
          rs = floor(allow_rel / B)
          rn = allow_rel - rs * B
          return 'limited', verdict(true, g[5], rem, rs, rn, ttl_s, ttl - ttl_s * B)
        end
        return 'never', verdict(true, g[5], rem, nil, nil, ttl_s, ttl - ttl_s * B)
      end
      local nts, ntn = padd(now_s, now_n, ttl_s, ttl - ttl_s * B)
      return 'allowed', verdict(false, g[5], rem, nil, nil, ttl_s, ttl - ttl_s * B),
        nts, ntn, now_s * 1000 + floor(now_n / 1000000) + floor(ttl / 1000000)
    end
  end
  local is, inc_n = pmulp(g[1], g[2], qs, qn)
  if not is or over_i64(is, inc_n) then return nil, E.OVERFLOW end
  if not tat_s then tat_s, tat_n = now_s, now_n end
  local ms_, mn = tat_s, tat_n
  if plt(ms_, mn, now_s, now_n) then ms_, mn = now_s, now_n end
  local nts, ntn = padd(ms_, mn, is, inc_n)
  local as, an = psub(nts, ntn, g[3], g[4])
  local limit = g[5]
  if plt(now_s, now_n, as, an) then
    local decision, rs, rn = 'never', nil, nil
    if ple(is, inc_n, g[3], g[4]) then
      decision = 'limited'
      rs, rn = psat(psub(as, an, now_s, now_n))
    end
    local ts, tn = psub(tat_s, tat_n, now_s, now_n)
    if ts < 0 then ts, tn = 0, 0 end
    local rem = remaining(g, ts, tn)
    local ss, sn = psat(ts, tn)
    return decision, verdict(true, limit, rem, rs, rn, ss, sn)
  end
  if over_i64(nts, ntn) then return nil, E.OVERFLOW end
  local ts, tn = psub(nts, ntn, now_s, now_n)
  local ss, sn = psat(ts, tn)
  return 'allowed', verdict(false, limit, remaining(g, ts, tn), nil, nil, ss, sn),
    nts, ntn, expire_at_ms(now_s, now_n, ts, tn)
end

-- Reserves `quantity` at `now` for a caller willing to wait up to
-- `max_wait`. Returns what decide returns, then the wait (a pair) when the
-- request is admitted later ('later').
function gcra.reserve(g, tat_s, tat_n, now_s, now_n, qs, qn, ws, wn)
  if not gcra.check(g, now_s, now_n) then return nil, E.OVERFLOW end
  local decision, v, a, b, c = gcra.decide(g, tat_s, tat_n, now_s, now_n, qs, qn)
  if decision ~= 'limited' then return decision, v, a, b, c end
  if plt(ws, wn, v[4], v[5]) then return decision, v end
  local wait_s, wait_n = v[4], v[5]
  local is, inc_n = pmulp(g[1], g[2], qs, qn)
  local bs, bn = now_s, now_n
  if tat_s and plt(now_s, now_n, tat_s, tat_n) then bs, bn = tat_s, tat_n end
  local nts, ntn = padd(bs, bn, is, inc_n)
  if over_i64(nts, ntn) then return nil, E.OVERFLOW end
  local ts, tn = psub(nts, ntn, now_s, now_n)
  local ss, sn = psat(ts, tn)
  return 'later', verdict(false, g[5], remaining(g, ts, tn), nil, nil, ss, sn),
    nts, ntn, expire_at_ms(now_s, now_n, ts, tn), wait_s, wait_n
end

-- Gives back `quantity` to a bucket whose TAT is `tat`. Returns 'empty',
-- 'unchanged', or 'store' with the new TAT and its expiry.
function gcra.refund(g, tat_s, tat_n, now_s, now_n, qs, qn)
  if qs < 0 then qs, qn = 0, 0 end
  local bs, bn = pmulp(g[1], g[2], qs, qn)
  -- Beyond the pairs' range it is beyond any TAT: the bucket empties.
  if not bs then return 'empty' end
  local nts, ntn = psub(tat_s, tat_n, bs, bn)
  if ple(nts, ntn, now_s, now_n) then return 'empty' end
  if bs == 0 and bn == 0 then return 'unchanged' end
  local ts, tn = psub(nts, ntn, now_s, now_n)
  return 'store', nts, ntn, expire_at_ms(now_s, now_n, ts, tn)
end
