-- The two floating-point steps of the original redis-cell
-- (core/src/compat.rs). The module emulates them with integers; Lua's
-- numbers are those very doubles, so here they are computed directly.

-- ((a as f64) / (b as f64)) as i64 for the period `a` (a pair) and the
-- count `b` (its decimal text): both converted to doubles correctly
-- rounded (strtod), divided, truncated, saturated at i64::MAX. Returns a
-- pair.
local function f64_quotient_trunc(as, an, b_text)
  local a = tonum(ptostr(as, an))
  local b = tonum(b_text)
  local q = floor(a / b)
  if q >= 9223372036854775807 then return I64MAX_S, I64MAX_N end
  return dtop(q)
end

-- Whole microseconds of a non-negative pair of nanoseconds, truncated.
local function whole_micros(s, n)
  local hs = floor(s / 1000)
  return hs, (s - hs * 1000) * 1000000 + floor(n / 1000)
end
