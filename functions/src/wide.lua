-- Exact integers beyond 2^53. Lua's numbers are IEEE doubles, exact only
-- up to 2^53, and a nanosecond instant (1.8e18) is beyond that; the module
-- computes in i64 with i128 intermediates. Here such a value is a pair
-- (s, n) of doubles meaning s * 1e9 + n, with s whole (|s| < 2^53) and
-- 0 <= n < 1e9: for an instant or a duration in nanoseconds, s is the whole
-- seconds (towards minus infinity) and n the nanoseconds. Pairs cover
-- +-9e24, every i128 the module forms from i64 sums; a product beyond that
-- range returns nil and the caller decides what it means.

local B = 1e9
local MAXS = 9007199254740992 -- 2^53
local I64MAX_S, I64MAX_N = 9223372036, 854775807
local I64MIN_S, I64MIN_N = -9223372037, 145224192

local function padd(as, an, bs, bn)
  local n = an + bn
  if n >= B then return as + bs + 1, n - B end
  return as + bs, n
end

local function psub(as, an, bs, bn)
  local n = an - bn
  if n < 0 then return as - bs - 1, n + B end
  return as - bs, n
end

local function plt(as, an, bs, bn)
  return as < bs or (as == bs and an < bn)
end

local function ple(as, an, bs, bn)
  return as < bs or (as == bs and an <= bn)
end

-- An approximation as a double (exact below 2^53).
local function ptod(s, n)
  return s * B + n
end

-- The pair of `k * value`, for a whole double `k >= 0` below 2^53.
local function pmul(s, n, k)
  if not (k < MAXS) then return nil end -- also NaN
  if k <= 8388608 then -- n * k < 2^53: exact
    local nk = n * k
    local c = floor(nk / B)
    local hs = s * k + c
    if hs >= MAXS or hs <= -MAXS then return nil end
    return hs, nk - c * B
  end
  local k1 = floor(k / 8388608)
  local as, an = pmul(s, n, k1)
  if not as then return nil end
  as, an = pmul(as, an, 8388608)
  if not as then return nil end
  local bs, bn = pmul(s, n, k - k1 * 8388608)
  if not bs then return nil end
  as, an = padd(as, an, bs, bn)
  if as >= MAXS or as <= -MAXS then return nil end
  return as, an
end

-- The pair of a whole double (any magnitude a pair holds).
local function dtop(x)
  if x < MAXS and x > -MAXS then
    local s = floor(x / B)
    local n = x - s * B
    if n < 0 then return s - 1, n + B end
    if n >= B then return s + 1, n - B end
    return s, n
  end
  local hi = floor(x / 67108864) -- 2^26: exact
  local s, n = dtop(hi)
  s, n = pmul(s, n, 67108864)
  if not s then return nil end
  return padd(s, n, 0, x - hi * 67108864)
end

-- a * b for b >= 0 (both pairs).
local function pmulp(as, an, bs, bn)
  local a, b = as * B + an, bs * B + bn
  if a >= 0 and a < MAXS and b < MAXS then
    local p = a * b
    if p < MAXS then
      local s = floor(p / B)
      return s, p - s * B
    end
  end
  local xs, xn = pmul(as, an, bs)
  if not xs then return nil end
  local hs = xs * B + xn
  if hs >= MAXS or hs <= -MAXS then return nil end
  local ys, yn = pmul(as, an, bn)
  if not ys then return nil end
  xs, xn = padd(hs, 0, ys, yn)
  if xs >= MAXS or xs <= -MAXS then return nil end
  return xs, xn
end

-- floor(a / b) and a - b * floor(a / b) for b > 0: quotient pair, then
-- remainder pair (nil if out of range).
local function pdiv(as, an, bs, bn)
  local a, b = as * B + an, bs * B + bn
  if a < MAXS and a > -MAXS and b < MAXS then
    local q = floor(a / b)
    local r = a - q * b
    if r < 0 then q, r = q - 1, r + b elseif r >= b then q, r = q + 1, r - b end
    local qs, qn = dtop(q)
    local rs, rn = dtop(r)
    return qs, qn, rs, rn
  end
  local qs, qn = dtop(floor(a / b))
  for _ = 1, 8 do
    if not qs then return nil end
    local ps, pn = pmulp(qs, qn, bs, bn)
    if not ps then return nil end
    local rs, rn = psub(as, an, ps, pn)
    if rs >= 0 and plt(rs, rn, bs, bn) then return qs, qn, rs, rn end
    local d = floor((rs * B + rn) / b)
    if d == 0 then d = rs < 0 and -1 or 1 end
    local ds, dn = dtop(d)
    qs, qn = padd(qs, qn, ds, dn)
  end
  return nil
end

-- Clamped into the i64 range, as the module's saturate().
-- Whole seconds strictly between the bounds' are in range whatever the
-- nanoseconds: the usual value is answered by two comparisons.
local function psat(s, n)
  if s < I64MAX_S and s > I64MIN_S then return s, n end
  if plt(I64MAX_S, I64MAX_N, s, n) then return I64MAX_S, I64MAX_N end
  if plt(s, n, I64MIN_S, I64MIN_N) then return I64MIN_S, I64MIN_N end
  return s, n
end

local function over_i64(s, n)
  if s < I64MAX_S and s > I64MIN_S then return false end -- as psat
  return plt(I64MAX_S, I64MAX_N, s, n) or plt(s, n, I64MIN_S, I64MIN_N)
end

-- Whether now + d passes i64::MAX ns, for now >= 0 and d >= 0 (pairs).
-- An instant before 9e9 s (the year 2255) plus less than 1e6 s stays
-- below 9.001e18 ns, short of i64::MAX (9.22e18): the usual call answers
-- without pair arithmetic.
local function past_i64(now_s, now_n, ds, dn)
  if now_s < 9000000000 and ds < 1000000 then return false end
  return over_i64(padd(now_s, now_n, ds, dn))
end

-- The decimal text of a pair in the i64 range, as the module writes it.
local function ptostr(s, n)
  if s == 0 then return tostr(n) end
  if s > 0 then return sformat('%d%09d', s, n) end
  if n == 0 then return sformat('%d000000000', s) end
  -- negative: -( (-s-1) * 1e9 + (1e9 - n) )
  local hs, hn = -s - 1, B - n
  if hs == 0 then return '-' .. tostr(hn) end
  return sformat('-%d%09d', hs, hn)
end

-- A pair as redis.call takes a value: a whole number below 1e9 (a count)
-- as the number itself, which every server writes out in its digits (see
-- store's ms_text) with no Lua string made; otherwise its text (ptostr).
local function parg(s, n)
  if s == 0 then return n end
  return ptostr(s, n)
end
