-- Exact sliding window log (core/src/sliding/): the same decisions over
-- the twin's own structure, a plain string that Lua can read and write.
--
-- The string: "\0SWE", then the cumulated quantity of the entries dropped
-- so far (7 bytes), then one 16-byte entry per recorded request, oldest
-- first: its time (seconds, 5 bytes; nanoseconds, 4 bytes) and the
-- cumulated quantity up to and including it (7 bytes), all big-endian.
-- The cumulated quantities make every question a binary search: the
-- quantity in the window, the time that frees enough, the newest entries.

local sliding = {}
local SWE = '\0SWE'
local HEAD = 11
local ENTRY = 16
-- The most requests a log holds: each call reads and rewrites the whole
-- string (16 bytes a request), which at this size stays within about a
-- millisecond. A log holds at most its limit (every request counts 1 or
-- more); a limit above MAX_LOG is accepted, and a log that grows past
-- MAX_LOG entries is refused when next read (E.LOG_TOO_BIG).
sliding.MAX_LOG = 10000
sliding.MAX_BYTES = HEAD + sliding.MAX_LOG * ENTRY

-- Whether the start of a string is a log's (for a string read in part).
function sliding.is_log_head(v)
  return ssub(v, 1, 4) == SWE
end

-- The log found in a string: its entry count and the base quantity; nil
-- if it is not one.
function sliding.open(v)
  if ssub(v, 1, 4) ~= SWE or (#v - HEAD) % ENTRY ~= 0 then return nil end
  return (#v - HEAD) / ENTRY, sunpack('>I7', v, 5)
end

-- i64 saturating arithmetic, as the module's log computes with.
local function sat_add(as, an, bs, bn)
  return psat(padd(as, an, bs, bn))
end
local function sat_sub(as, an, bs, bn)
  return psat(psub(as, an, bs, bn))
end

local function entry(v, i)
  return sunpack('>I5I4I7', v, HEAD + (i - 1) * ENTRY + 1)
end
sliding.entry = entry

local function cum(v, i, base)
  if i == 0 then return base end
  return (sunpack('>I7', v, HEAD + (i - 1) * ENTRY + 10))
end

-- The number of entries at or before `cutoff` (a pair).
local function until_cutoff(v, n, cs, cn)
  local lo, hi = 0, n -- entries 1..lo are at or before; hi + 1.. after
  while lo < hi do
    local mid = floor((lo + hi + 1) / 2)
    local s, ns = entry(v, mid)
    if ple(s, ns, cs, cn) then lo = mid else hi = mid - 1 end
  end
  return lo
end

-- The first entry after `from` whose cumulated quantity reaches `target`.
local function reaching(v, from, n, target)
  local lo, hi = from + 1, n + 1
  while lo < hi do
    local mid = floor((lo + hi) / 2)
    if cum(v, mid, 0) >= target then hi = mid else lo = mid + 1 end
  end
  return lo
end
sliding.reaching = reaching

-- Decides a request (core SlidingWindow::decide) on the log `v` (nil for
-- an absent key) of `n` entries above `base` (sliding.open). `limit` is a double, `ws/wn` the window, `q` the
-- quantity (a double; above any limit when huge). Returns the decision
-- ('allowed', 'limited', 'never'), the verdict, and for an allowed
-- request that records, its time (a pair) and, when that time is now, the
-- number of entries at or before now - window (what record drops).
function sliding.decide(limit, ws, wn, v, n, base, now_s, now_n, q)
  local cs, cn = sat_sub(now_s, now_n, ws, wn)
  local k = 0
  if n > 0 then k = until_cutoff(v, n, cs, cn) end
  -- The newest entry: its time and the cumulated quantity of the log.
  local ns_, nn, cum_n = nil, nil, base
  if n > 0 then ns_, nn, cum_n = entry(v, n) end
  local cum_k = cum(v, k, base)
  local in_window = cum_n - cum_k
  local live_s, live_n
  if ns_ and plt(cs, cn, ns_, nn) then live_s, live_n = ns_, nn end

  local decision, rs, rn, at_s, at_n = 'never', nil, nil, nil, nil
  local fits = limit > 0 and q <= limit
  if not fits or q < 0 then
    decision = 'never'
  elseif in_window + q <= limit then
    decision = 'allowed'
    if q > 0 then
      at_s, at_n = now_s, now_n
      if ns_ and plt(at_s, at_n, ns_, nn) then at_s, at_n = ns_, nn end
      if at_s < 0 then at_s, at_n = 0, 0 end
    end
  else
    decision = 'limited'
    local need = in_window - (limit - q)
    local j = reaching(v, k, n, cum_k + need)
    local ts, tn = now_s, now_n
    if j <= n then ts, tn = entry(v, j) end
    rs, rn = sat_add(ts, tn, ws, wn)
    rs, rn = sat_sub(rs, rn, now_s, now_n)
    if rs < 0 or (rs == 0 and rn < 1) then rs, rn = 0, 1 end
  end

  local used, newest_s, newest_n = in_window, live_s, live_n
  if at_s then used, newest_s, newest_n = in_window + q, at_s, at_n end
  local rem = limit - used
  if rem < 0 then rem = 0 elseif rem > limit then rem = limit end
  local ts, tn = 0, 0
  if newest_s then
    ts, tn = sat_add(newest_s, newest_n, ws, wn)
    ts, tn = sat_sub(ts, tn, now_s, now_n)
    if ts < 0 then ts, tn = 0, 0 end
  end
  local dropped
  if at_s == now_s and at_n == now_n then dropped = k end
  return decision, verdict(decision ~= 'allowed', limit, rem, rs, rn, ts, tn), at_s, at_n, dropped
end

-- Drops the entries at or before `cutoff` (`k` of them, when known): the
-- kept entries (a string) and the new base.
local function purge(v, n, base, cs, cn, k)
  if not v or n == 0 then return '', base end
  k = k or until_cutoff(v, n, cs, cn)
  return ssub(v, HEAD + k * ENTRY + 1), cum(v, k, base)
end

-- Cumulated quantities restarted from 0, when they near 2^53.
local function rebase(entries, base)
  local parts = {}
  for i = 1, #entries / ENTRY do
    local s, ns, c = sunpack('>I5I4I7', entries, (i - 1) * ENTRY + 1)
    parts[i] = spack('>I5I4I7', s, ns, c - base)
  end
  return tconcat(parts)
end

-- Records a request at `at` (sliding::record) in the log `v` of `n`
-- entries above `base`, `dropped` of them at or before at - window when
-- the caller knows it (sliding.decide): the new string and the key's
-- expiry (Unix ms).
function sliding.record(v, n, base, ws, wn, at_s, at_n, q, dropped)
  local last = cum(v, n, base)
  local out
  if v and dropped == 0 and last + q < 9007199254740992 and base < 9007199254740992 then
    -- Nothing to drop, no rebase, a base that reads back to its own
    -- bytes: the new string is the old one and the entry (one copy, not
    -- the entries cut out and joined again).
    out = v .. spack('>I5I4I7', at_s, at_n, last + q)
  else
    local cs, cn = sat_sub(at_s, at_n, ws, wn)
    local entries, nb = purge(v, n, base, cs, cn, dropped)
    if last + q >= 9007199254740992 then
      entries, last, nb = rebase(entries, nb), last - nb, 0
    end
    out = SWE .. spack('>I7', nb) .. entries .. spack('>I5I4I7', at_s, at_n, last + q)
  end
  local es, en = sat_add(at_s, at_n, ws, wn)
  return out, es * 1000 + floor(en / 1000000)
end

-- Gives back `q` at `at` (sliding::unrecord): the new string and its
-- expiry, or nil when nothing is left in the window (the key goes).
function sliding.unrecord(v, ws, wn, at_s, at_n, q)
  local n, base = sliding.open(v)
  local cs, cn = sat_sub(at_s, at_n, ws, wn)
  local entries, nb = purge(v, n, base, cs, cn)
  local m = #entries / ENTRY
  if m == 0 then return nil end
  local last = (sunpack('>I7', entries, (m - 1) * ENTRY + 10))
  local target = last - q
  if target <= nb then return nil end
  -- The first entry whose cumulated quantity reaches the target stays,
  -- reduced to it; the newer ones go.
  local lo, hi = 1, m
  while lo < hi do
    local mid = floor((lo + hi) / 2)
    if (sunpack('>I7', entries, (mid - 1) * ENTRY + 10)) >= target then hi = mid else lo = mid + 1 end
  end
  local s, ns = sunpack('>I5I4', entries, (lo - 1) * ENTRY + 1)
  local out = SWE .. spack('>I7', nb) .. ssub(entries, 1, (lo - 1) * ENTRY) .. spack('>I5I4I7', s, ns, target)
  local es, en = sat_add(s, ns, ws, wn)
  return out, es * 1000 + floor(en / 1000000)
end
