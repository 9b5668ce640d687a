-- Parsing of client arguments and stored values (core/src/parse.rs), to
-- pairs (wide.lua): anything else is nil, never a Lua error.

-- A signed 64-bit integer: an optional + or -, then ASCII digits, nothing
-- else, within the i64 range. Returns the pair, or nil.
-- Short words (parameters, quantities, counters) repeat: their values
-- are kept, bounded, for the library's life (false: not an integer).
local short, shorts = {}, 0

local function integer(w)
  local len = #w
  if len <= 15 then
    local v = short[w]
    if v == nil then
      v = sfind(w, '^[+-]?%d+$') and tonum(w) or false
      if shorts >= 4096 then short, shorts = {}, 0 end
      short[w], shorts = v, shorts + 1
    end
    if not v then return nil end
    local s = floor(v / B)
    return s, v - s * B
  end
  if not sfind(w, '^[+-]?%d+$') then return nil end
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

-- A duration in seconds, an integer or a decimal with at most 9
-- fractional digits, optionally signed (parse::seconds_as_nanos): the pair
-- of nanoseconds, or nil.
local function seconds_as_nanos(w)
  local sign, whole, dot, frac = smatch(w, '^([+-]?)(%d*)(%.?)(%d*)$')
  if not sign or (whole == '' and frac == '') or (dot ~= '' and frac == '') or #frac > 9 then
    return nil
  end
  local s, n = 0, 0
  if whole ~= '' then
    local z = sfind(whole, '[^0]')
    if z then
      whole = ssub(whole, z)
      if #whole > 10 then return nil end
      s = tonum(whole)
    end
  end
  if frac ~= '' then n = tonum(frac .. srep('0', 9 - #frac)) end
  if plt(I64MAX_S, I64MAX_N, s, n) then return nil end
  if sign == '-' then
    if n == 0 then return -s, 0 end
    return -s - 1, B - n
  end
  return s, n
end

-- A number that failed to parse: out of range if it is well-formed
-- (digits, at most one dot and 9 decimals) but too large.
local function too_large_or_malformed(w)
  local whole, frac = smatch(w, '^[+-]?(%d+)%.?(%d*)$')
  if whole and #frac <= 9 and not (sfind(w, '%.') and frac == '') then return 'overflow' end
  return 'malformed'
end

-- Units after a number, in the order the module tries them, and their
-- nanoseconds as a multiple of a second (ms: a thousandth).
local UNITS = { 'ms', 's', 'm', 'h', 'd' }
local PER_SECOND = { ms = 0.001, s = 1, m = 60, h = 3600, d = 86400 }

-- A duration (parse::duration): seconds as seconds_as_nanos reads them, or
-- a number followed by a unit (`ms`, `s`, `m`, `h`, `d`, any case) that
-- comes to whole nanoseconds. Returns the pair of nanoseconds, or nil and
-- 'malformed' or 'overflow' (beyond 2^63 - 1 ns).
local function parse_duration(w)
  local number, unit = w, 's'
  local len = #w
  for i = 1, 5 do
    local u = UNITS[i]
    local ul = #u
    if len > ul and slower(ssub(w, len - ul + 1)) == u then
      local c = sbyte(w, len - ul)
      if c >= 48 and c <= 57 then
        number, unit = ssub(w, 1, len - ul), u
        break
      end
    end
  end
  local s, n = seconds_as_nanos(number)
  if not s then return nil, too_large_or_malformed(number) end
  local k = PER_SECOND[unit]
  if k == 1 then return s, n end
  if unit == 'ms' then
    if n % 1000 ~= 0 then return nil, 'malformed' end
    local qs, qn = pdiv(s, n, 0, 1000)
    return qs, qn
  end
  s, n = pmul(s, n, k)
  if not s or over_i64(s, n) then return nil, 'overflow' end
  return s, n
end
