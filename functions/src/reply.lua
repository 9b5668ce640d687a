-- The five-integer reply (core/src/reply.rs): durations in nanoseconds
-- become whole seconds (the original's rounding) or milliseconds (MS).
--
-- A verdict is a table { limited, limit, remaining, retry_s, retry_n,
-- reset_s, reset_n }: limit and remaining are doubles, retry (nil when
-- there is no retry time) and reset are pairs of nanoseconds.

local function verdict(limited, limit, remaining, rs, rn, ts, tn)
  return { limited, limit, remaining, rs, rn, ts, tn }
end

-- Whole seconds truncated toward zero, plus one when at least one
-- millisecond is left over (whole_seconds_rounded_up).
local function whole_seconds_rounded_up(s, n)
  if s >= 0 then
    if n >= 1000000 then return s + 1 end
    return s
  end
  -- negative: truncation toward zero; the leftover is negative.
  if n > 0 then return s + 1 end
  return s
end

-- `nanos / unit` rounded up for a positive remainder, toward zero below 0
-- (ceil_div), for a unit of 1e6 (ms) or 1e9 (s).
local function ceil_div(s, n, unit)
  if s >= 0 then
    local per = B / unit
    local q = s * per + floor(n / unit)
    if fmod(n, unit) > 0 then return q + 1 end
    return q
  end
  -- negative: -(floor(|x| / unit))
  local ps, pn = psub(0, 0, s, n)
  local per = B / unit
  return -(ps * per + floor(pn / unit))
end

local function millis_rounded_up(s, n)
  return ceil_div(s, n, 1000000)
end

-- A duration in the reply's unit: `ms` true for milliseconds.
local function unit_of(ms, s, n)
  if ms then return ceil_div(s, n, 1000000) end
  return whole_seconds_rounded_up(s, n)
end

-- Rounded up in either unit: a caller that sleeps this long is never early.
local function unit_ceil(ms, s, n)
  if ms then return ceil_div(s, n, 1000000) end
  return ceil_div(s, n, 1000000000)
end

-- [limited, limit, remaining, retry_after, reset_after].
local function to_reply(v, ms)
  local retry, rs, ts, tn = -1, v[4], v[6], v[7]
  if rs then retry = unit_of(ms, rs, v[5]) end
  local reset
  if not ms and ts >= 0 then
    reset = tn >= 1000000 and ts + 1 or ts
  else
    reset = unit_of(ms, ts, tn)
  end
  return { v[1] and 1 or 0, v[2], v[3], retry, reset }
end

-- Which verdict answers for all (binding_of): when all allowed, the least
-- remaining; otherwise the refusing one with the longest wait, "never
-- fits" longest of all. Ties go to the first. Returns its index.
local function binding_of(vs)
  local best
  for i = 1, #vs do
    local v, better = vs[i], false
    if not best then
      better = true
    else
      local b = vs[best]
      if v[1] ~= b[1] then
        better = v[1]
      elseif v[1] then
        if b[4] == nil then better = false
        elseif v[4] == nil then better = true
        else better = plt(b[4], b[5], v[4], v[5]) end
      else
        better = v[3] < b[3]
      end
    end
    if better then best = i end
  end
  return best
end
