-- Parsing of client arguments and stored values (core/src/parse.rs), to
-- pairs (wide.lua): anything else is nil, never a Lua error.

-- A signed 64-bit integer: an optional + or -, then ASCII digits, nothing
-- else, within the i64 range. Returns the pair, or nil.
local function integer(w)
  if not sfind(w, '^[+-]?%d+$') then return nil end
  local len = #w
  if len <= 15 then
    local v = tonum(w)
    local s = floor(v / B)
    return s, v - s * B
  end
  local c = sbyte(w, 1)
  -- Plain digits of 16 to 19 without a leading zero (a stored TAT): split.
  if c > 48 and len <= 19 then
    local s, n = tonum(ssub(w, 1, len - 9)), tonum(ssub(w, len - 8))
    if s > I64MAX_S or (s == I64MAX_S and n > I64MAX_N) then return nil end
    return s, n
  end
  local neg = c == 45
  local d = w
  if c == 45 or c == 43 then d = ssub(w, 2) end
  local z = sfind(d, '[^0]')
  if not z then return 0, 0 end
  d = ssub(d, z)
  len = #d
  if len > 19 then return nil end
  local s, n
  if len <= 9 then s, n = 0, tonum(d) else s, n = tonum(ssub(d, 1, len - 9)), tonum(ssub(d, len - 8)) end
  if neg then
    if s > 9223372036 or (s == 9223372036 and n > 854775808) then return nil end
    if n == 0 then return -s, 0 end
    return -s - 1, B - n
  end
  if s > I64MAX_S or (s == I64MAX_S and n > I64MAX_N) then return nil end
  return s, n
end

-- Units of a duration: nanoseconds as c * 10^k.
local UNIT_C = { [''] = 1, s = 1, ms = 1, m = 6, h = 36, d = 864 }
local UNIT_K = { [''] = 9, s = 9, ms = 6, m = 10, h = 11, d = 11 }
local POW10 = { 1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15 }

-- A duration (docs/grammar.md): seconds (`60`, `0.5`), or a number with a
-- unit (`500ms`, `1.5s`, `15m`, `1h`, `1d`, any case) that comes to whole
-- nanoseconds, with an optional sign (a non-positive duration is reported
-- by name). Returns the pair of nanoseconds, or nil and 'malformed' or
-- 'overflow' (beyond 2^63 - 1 ns).
local function parse_duration(w)
  local sign, int, dot, frac, unit = smatch(w, '^([+-]?)(%d*)(%.?)(%d*)(%a*)$')
  if not sign or (int == '' and frac == '') or (dot ~= '' and frac == '') then
    return nil, 'malformed'
  end
  if #unit > 2 then return nil, 'malformed' end
  unit = slower(unit)
  local c, k = UNIT_C[unit], UNIT_K[unit]
  if not c then return nil, 'malformed' end
  -- Trailing zeros of the fraction change nothing.
  local fz = sfind(frac, '0*$')
  frac = ssub(frac, 1, fz - 1)
  local f = #frac
  if f > 30 then return nil, 'malformed' end
  local iz = sfind(int, '[^0]')
  int = iz and ssub(int, iz) or ''
  if #int > 20 then return nil, 'overflow' end
  local s, n = 0, 0
  if int ~= '' then
    s, n = integer(int)
    if not s then return nil, 'overflow' end
    s, n = pmul(s, n, c * POW10[k + 1])
    if not s then return nil, 'overflow' end
  end
  if f > 0 then
    -- frac * c * 10^k / 10^f must be whole.
    if f > 21 then return nil, 'malformed' end
    local fs, fn
    if f <= 15 then fs, fn = dtop(tonum(frac)) else
      fs, fn = tonum(ssub(frac, 1, f - 9)), tonum(ssub(frac, f - 8))
    end
    fs, fn = pmul(fs, fn, c)
    if f <= k then
      fs, fn = pmul(fs, fn, POW10[k - f + 1])
    else
      local ds, dn = dtop(POW10[f - k + 1] or 0)
      if f - k > 15 then return nil, 'malformed' end
      local qs, qn, rs, rn = pdiv(fs, fn, ds, dn)
      if not qs or rs ~= 0 or rn ~= 0 then return nil, 'malformed' end
      fs, fn = qs, qn
    end
    s, n = padd(s, n, fs, fn)
  end
  if plt(I64MAX_S, I64MAX_N, s, n) then return nil, 'overflow' end
  if sign == '-' then
    if n == 0 then return -s, 0 end
    return -s - 1, B - n
  end
  return s, n
end
