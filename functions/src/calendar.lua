-- Calendar periods at a fixed offset from UTC (core/src/calendar.rs). Day
-- counts and seconds since 1970 are exact doubles.

local calendar = {}

local UNITS = { minute = 'minute', hour = 'hour', day = 'day', week = 'week', month = 'month', year = 'year' }
local DAY = 86400

-- `minute` ... `year`, any case; nil otherwise.
function calendar.unit(w)
  if #w > 6 then return nil end
  return UNITS[slower(w)]
end

-- A fixed offset `+hh:mm` / `-hh:mm`, from -12:00 to +14:00, in seconds;
-- nil otherwise.
function calendar.parse_offset(w)
  local sign, h, m = smatch(w, '^([+-])(%d%d):(%d%d)$')
  if not sign then return nil end
  h, m = tonum(h), tonum(m)
  if m > 59 then return nil end
  local total = h * 60 + m
  if sign == '+' then
    if total <= 14 * 60 then return total * 60 end
  elseif total <= 12 * 60 then
    return -total * 60
  end
  return nil
end

local function div(a, b) return floor(a / b) end

function calendar.days_from_civil(year, month, day)
  local y = year
  if month <= 2 then y = year - 1 end
  local era = div(y, 400)
  local yoe = y - era * 400
  local mp = (month + 9) % 12
  local doy = div(153 * mp + 2, 5) + day - 1
  local doe = yoe * 365 + div(yoe, 4) - div(yoe, 100) + doy
  return era * 146097 + doe - 719468
end

function calendar.civil_from_days(days)
  local z = days + 719468
  local era = div(z, 146097)
  local doe = z - era * 146097
  local yoe = div(doe - div(doe, 1460) + div(doe, 36524) - div(doe, 146096), 365)
  local doy = doe - (365 * yoe + div(yoe, 4) - div(yoe, 100))
  local mp = div(5 * doy + 2, 153)
  local day = doy - div(153 * mp + 2, 5) + 1
  local month = mp < 10 and mp + 3 or mp - 9
  local year = yoe + era * 400
  if month <= 2 then year = year + 1 end
  return year, month, day
end

-- The end of the `unit` containing `now` (a pair) in the zone `offset`
-- seconds ahead of UTC: the first instant of the next period, a pair.
function calendar.period_end(now_s, now_n, unit, offset)
  -- Whole local seconds toward minus infinity: the pair's seconds.
  local secs = now_s + offset
  local e
  if unit == 'minute' then e = (div(secs, 60) + 1) * 60
  elseif unit == 'hour' then e = (div(secs, 3600) + 1) * 3600
  elseif unit == 'day' then e = (div(secs, DAY) + 1) * DAY
  elseif unit == 'week' then
    local days = div(secs, DAY)
    local weekday = (days + 3) % 7
    e = (days - weekday + 7) * DAY
  elseif unit == 'month' then
    local year, month = calendar.civil_from_days(div(secs, DAY))
    if month == 12 then year, month = year + 1, 1 else month = month + 1 end
    e = calendar.days_from_civil(year, month, 1) * DAY
  else
    local year = calendar.civil_from_days(div(secs, DAY))
    e = calendar.days_from_civil(year + 1, 1, 1) * DAY
  end
  return e - offset, 0
end
