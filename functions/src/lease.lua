-- Concurrency leases (core/src/lease.rs) over the twin's own string:
-- "\0CCL", the last generated id's time (us) and sequence (doubles), then
-- one entry per lease: its expiry (seconds, 5 bytes; nanoseconds, 4
-- bytes), the id's length (2 bytes) and the id.

local lease = {}
local CCL = '\0CCL'
local HEAD = 20
-- The most leases a key holds, and the longest id a lease is taken
-- with: every call reads and rewrites the whole string (reading a
-- megabyte into Lua alone took 5 ms here), which at 1,000 leases of 139
-- bytes (139 KB) stays within a few milliseconds. A key holds at most its
-- limit (a lease beyond it is refused, an id renews its own), so limits
-- above lease.MAX (E.BIG_LEASES) and longer ids (E.LONG_ID; the module
-- takes 1024 bytes) are refused, and the string never holds more (it
-- drops the expired leases on every write).
lease.MAX = 1000
lease.MAX_ID = 128
lease.MAX_BYTES = HEAD + lease.MAX * (11 + lease.MAX_ID)

-- Whether the start of a string is leases' (for a string read in part).
function lease.is_head(v)
  return ssub(v, 1, 4) == CCL
end

-- Whether `v` holds `id` at `at`, compared 31 bytes at a time: a string
-- of 32 bytes or more is hashed on only every (length / 32 + 1)-th byte
-- by Lua 5.1, so a copy of each lease's id would put ids alike in those
-- bytes in one chain of Lua's string table, and each new copy would walk
-- it (7 ms for 1,000 ids of 128 bytes on Redis 6.2). Shorter strings are
-- hashed whole, and the id's own pieces are made once.
local function id_at(v, at, id)
  local n = #id
  if n < 32 then return ssub(v, at, at + n - 1) == id end
  local i = 1
  while i <= n do
    local j = i + 30
    if j > n then j = n end
    if ssub(v, at + i - 1, at + j - 1) ~= ssub(id, i, j) then return false end
    i = j + 1
  end
  return true
end

-- Scans the leases of `v` (nil: none) at `now` for `id` (nil: none):
-- live count, whether `id` holds a live lease, the first and last live
-- expiries (pairs), the id generator's state, and the last live expiry of
-- the other ids. nil if `v` is not one; false if it holds more entries
-- than lease.MAX (read no further).
function lease.scan(v, now_s, now_n, id)
  if not v then return 0, false, nil, nil, nil, nil, 0, 0 end
  if ssub(v, 1, 4) ~= CCL or #v < HEAD then return nil end
  local last_us, seq = sunpack('>dd', v, 5)
  local held, holds, entries = 0, false, 0
  local fs, fn, ls, ln, os_, on
  local pos, len = HEAD + 1, #v
  while pos <= len do
    entries = entries + 1
    if entries > lease.MAX then return false end
    -- A damaged string is not leases: never read past its end.
    if pos + 10 > len then return nil end
    local s, n, idlen, nxt = sunpack('>I5I4I2', v, pos)
    if nxt + idlen - 1 > len or n >= B then return nil end
    if plt(now_s, now_n, s, n) then
      held = held + 1
      local mine = id and idlen == #id and id_at(v, nxt, id)
      if mine then holds = true
      elseif not os_ or plt(os_, on, s, n) then os_, on = s, n end
      if not fs or plt(s, n, fs, fn) then fs, fn = s, n end
      if not ls or plt(ls, ln, s, n) then ls, ln = s, n end
    end
    pos = nxt + idlen
  end
  return held, holds, fs, fn, ls, ln, last_us, seq, os_, on
end

-- Acquire (Leases::acquire) on the leases `v` as lease.scan found them
-- (`s`: held, holds, the first and last live expiries and the other ids'
-- last): 'hold' or 'refused', the verdict, and the lease's expiry (a
-- pair); or nil and the error.
function lease.acquire(limit, v, s, now_s, now_n, ls_, ln_)
  local xs, xn = padd(now_s, now_n, ls_, ln_)
  if over_i64(xs, xn) then return nil, E.OVERFLOW end
  local held, holds, los, lon = s.held, s.holds, s.os, s.on
  if held < limit or holds then
    local after = holds and held or held + 1
    -- A renewed lease's old expiry is replaced, not kept.
    local ts, tn = xs, xn
    if los and plt(ts, tn, los, lon) then ts, tn = los, lon end
    ts, tn = psub(ts, tn, now_s, now_n)
    local rem = limit - after
    if rem < 0 then rem = 0 end
    return 'hold', verdict(false, limit, rem, nil, nil, ts, tn), xs, xn
  end
  return 'refused', lease.decision(limit, v, s, now_s, now_n, 1)
end

-- The held + quantity - limit earliest live expiry: the first (lease.scan
-- found it) when that is 1, as it is unless the limit was lowered.
-- Otherwise found by sorting plain numbers (a Lua comparator of pairs
-- made the sort ten times slower): the live leases' seconds, then the
-- nanoseconds of those in the second where the excess-th falls.
local function earliest(v, s, now_s, now_n, excess)
  if excess == 1 then return s.fs, s.fn end
  local secs = {}
  local pos, len = HEAD + 1, #v
  while pos <= len do
    local es, en, idlen, nxt = sunpack('>I5I4I2', v, pos)
    if plt(now_s, now_n, es, en) then secs[#secs + 1] = es end
    pos = nxt + idlen
  end
  table.sort(secs)
  local sec, first = secs[excess], excess
  while first > 1 and secs[first - 1] == sec do first = first - 1 end
  local nanos = {}
  pos = HEAD + 1
  while pos <= len do
    local es, en, idlen, nxt = sunpack('>I5I4I2', v, pos)
    if es == sec and plt(now_s, now_n, es, en) then nanos[#nanos + 1] = en end
    pos = nxt + idlen
  end
  table.sort(nanos)
  return sec, nanos[excess - first + 1]
end

-- The verdict for a request of `quantity` (Leases::decision: 0 for a
-- peek, 1 for a new lease) on the leases `v` as lease.scan found them
-- (`s`): limited when held + quantity > limit or the limit is 0, waiting
-- until the held + quantity - limit earliest leases have expired (never,
-- with limit 0).
function lease.decision(limit, v, s, now_s, now_n, quantity)
  local held, ls, ln = s.held, s.ls, s.ln
  local excess = held + quantity - limit
  local limited = limit <= 0 or excess > 0
  local rs, rn
  if limit > 0 and excess > 0 and excess <= held then
    rs, rn = earliest(v, s, now_s, now_n, excess)
    rs, rn = psub(rs, rn, now_s, now_n)
  end
  local ts, tn = 0, 0
  if ls then ts, tn = psub(ls, ln, now_s, now_n) end
  local rem = limit - held
  if rem < 0 then rem = 0 end
  return verdict(limited, limit, rem, rs, rn, ts, tn)
end

-- Rewrites the leases: drops those expired at `now`, then holds `id` until
-- `x` (when x_s is given) or releases it. Returns the new string (nil when
-- no lease is left), the key's expiry (ms, rounded up), and whether `id`
-- held one.
function lease.rewrite(v, now_s, now_n, id, x_s, x_n, last_us, seq)
  local parts, found = { '' }, false
  local ls, ln
  if v then
    -- The kept entries are copied a run at a time (from `run` to the
    -- entry before `pos`), not one string each.
    local pos, len, run = HEAD + 1, #v, nil
    while pos <= len do
      local s, n, idlen, nxt = sunpack('>I5I4I2', v, pos)
      local stop = nxt + idlen
      local keep = plt(now_s, now_n, s, n)
      if keep and idlen == #id and id_at(v, nxt, id) then
        found, keep = true, false
        if run then parts[#parts + 1] = ssub(v, run, pos - 1); run = nil end
        if x_s then
          s, n = x_s, x_n
          parts[#parts + 1] = spack('>I5I4I2', s, n, idlen) .. id
        else
          s = nil
        end
      elseif keep then
        run = run or pos
      elseif run then
        parts[#parts + 1] = ssub(v, run, pos - 1); run = nil
        s = nil
      else
        s = nil
      end
      if s and (not ls or plt(ls, ln, s, n)) then ls, ln = s, n end
      pos = stop
    end
    if run then parts[#parts + 1] = ssub(v, run, len) end
  end
  if x_s and not found then
    parts[#parts + 1] = spack('>I5I4I2', x_s, x_n, #id) .. id
    if not ls or plt(ls, ln, x_s, x_n) then ls, ln = x_s, x_n end
  end
  if #parts == 1 then return nil, nil, found end
  parts[1] = CCL .. spack('>dd', last_us, seq)
  return tconcat(parts), millis_rounded_up(ls, ln), found
end

-- A new lease id, unique per key: 32 hex digits, the time in
-- microseconds (never before the key's last id) and a sequence number
-- within that microsecond. Returns the id and the generator's new state.
function lease.new_id(now_s, now_n, last_us, seq)
  local us = now_s * 1000000 + floor(now_n / 1000)
  if us > last_us then last_us, seq = us, 0 else seq = seq + 1 end
  return sformat('%014x%018x', last_us, seq), last_us, seq
end
