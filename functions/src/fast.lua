-- A flat path for the commonest calls of CL.THROTTLE, FW.INCR, SW.ALLOW
-- and CL.THROTTLEALL, beside the layered one. Why it exists: through the
-- layers (entry, commands.throttle, grammar.options, single,
-- limiter.decide, limiter.check, store.integer, gcra.decide, verdict,
-- to_reply, limiter.apply, store.set) a CL.THROTTLE call costs about 480
-- Lua VM instructions and an FW.INCR call about 560, against about 140 and
-- 100 for the simple scripts of bench/lua (counted under Lua 5.1 with a
-- stub `redis`, the stub's own included); flat, about 290 each. What a
-- call costs the server is counted by bench/profile-twin.sh (callgrind):
-- there a C call from Lua (tonumber's strtod, a pattern, string.format,
-- a number handed to redis.call, which the server writes out with
-- snprintf) costs as much as dozens of VM instructions, so what repeats
-- from call to call is kept by its text.
--
-- It serves only `CL.THROTTLE key max_burst count period [quantity] [MS]`,
-- `FW.INCR key limit window [quantity] [MS]` (a rolling window),
-- `SW.ALLOW key limit window [quantity] [MS]` (an exact log) and
-- `CL.THROTTLEALL 2 k1 k2 GCRA max_burst count period FW limit window
-- [ALIGN]`, with limiters that parse within the twin's range (kept in
-- limiter.cached, as the layered path keeps them), a plain quantity word,
-- a clock and a stored TAT, count or log where every value is a whole
-- double far below 2^53; for anything else it returns nil before writing
-- anything and the layered path answers (every error comes from there).
-- Each step below names the layered function whose arithmetic it
-- repeats, operation for operation.
--
-- FW.INCR, SW.ALLOW and CL.THROTTLEALL are written out in one function
-- each, their helpers inlined: a Lua function call costs the server a
-- couple of hundred machine instructions, math.floor (a C call) more
-- than x - x % 1, and a call of FW.INCR's script costs 40,000 in all.
-- SW.ALLOW reads a log's first and newest entries only (two
-- struct.unpack calls) when no entry leaves the window, and appends the
-- new one.

local fast = {}

-- limiter.cached by the words themselves: nested tables rather than one
-- joined string, so a hit makes no string. Filled from limiter.cached
-- (a limiter depends on its words alone); bounded as that is.
-- `c` is the third word (GCRA's period), or 0 for FW's key ('F' limit
-- window, no TZ, no ALIGN), 2 for FW's with ALIGN ('A'), or 1 for SW's
-- ('S' limit window).
-- What is kept is what the flat path reads, worked out once (prepared),
-- or false for a limiter it does not serve: the layered path answers.
local by_words, by_words_n = { G = {}, F = {}, A = {}, S = {} }, 0

local prepared = {
  -- gcra.decide's fast path: the interval and tolerance as doubles,
  -- the limit, and the interval's whole microseconds (floor(e / 1000)).
  G = function(lim)
    local g = lim[2]
    if not g[6] then return false end
    return { g[6], g[7], g[5], floor(g[6] / 1000) }
  end,
  -- A rolling window below 1e15 ns: limit, window (a pair).
  F = function(lim)
    local fw = lim[2]
    if fw[2] ~= 'rolling' or fw.all or ptod(fw[3], fw[4]) >= 1e15 then return false end
    return { fw[1], fw[3], fw[4] }
  end,
  -- An aligned window of whole seconds below 1e6 s: limit, seconds.
  A = function(lim)
    local fw = lim[2]
    if fw[2] ~= 'aligned' or fw.all or fw[4] ~= 0 or fw[3] >= 1000000 then return false end
    return { fw[1], fw[3] }
  end,
  -- An exact log: limit, window (a pair).
  S = function(lim)
    if lim[1] ~= 'exact' then return false end
    return { lim[2], lim[3], lim[4] }
  end,
}

-- A limiter's key in limiter.cached (commands.lua's gcra_of, fixed_of
-- without options, fixed_of with ALIGN, sliding_of) and its parse, as
-- commands.lua's cached_limiter makes them.
local limiter_key = {
  G = function(a, b, c) return 'G' .. a .. '\0' .. b .. '\0' .. c end,
  F = function(a, b) return 'F' .. a .. '\0' .. b .. '\0' end,
  A = function(a, b) return 'F' .. a .. '\0' .. b .. '\0\0A' end,
  S = function(a, b) return 'S' .. a .. '\0' .. b end,
}
local parse = {
  G = function(a, b, c) return limiter.gcra(a, b, c) end,
  F = function(a, b) return limiter.fixed(a, b, nil, false, nil) end,
  A = function(a, b) return limiter.fixed(a, b, nil, true, nil) end,
  S = function(a, b) return limiter.sliding(a, b, false) end,
}

-- What the flat path keeps for the limiter of words a, b (and c, GCRA's
-- period; for the others a constant naming the kind), or false; nil when
-- the words do not parse or are out of the twin's range (the layered
-- path answers the error). A limiter parsed here is remembered in
-- limiter.cached, as cached_limiter remembers it.
local function cached_by_words(kind, a, b, c)
  local kt = by_words[kind]
  local t = kt[a]
  t = t and t[b]
  t = t and t[c]
  if t ~= nil then return t end
  local k = limiter.cache_key(limiter_key[kind](a, b, c))
  if not k then return nil end
  local lim = limiter.cached(k)
  if not lim then
    lim = parse[kind](a, b, c)
    if not lim or not limiter.check_range(lim) then return nil end
    limiter.remember(k, lim)
  end
  if by_words_n >= 4096 then
    by_words, by_words_n = { G = {}, F = {}, A = {}, S = {} }, 0
    kt = by_words[kind]
  end
  local ta = kt[a]
  if not ta then ta = {}; kt[a] = ta end
  local tb = ta[b]
  if not tb then tb = {}; ta[b] = tb end
  local p = prepared[kind](lim)
  tb[c] = p
  by_words_n = by_words_n + 1
  return p
end

-- A quantity word this path reads: plain digits, below 1e9 (remembered
-- by its word, as parse.lua's integer() remembers short words), and its
-- canonical text (no leading zeros), which goes to redis.call as it is:
-- a number there is written out with snprintf in the server, every call.
local quantities, quantity_texts, quantities_n = {}, {}, 0
local function plain_quantity(w)
  local q = quantities[w]
  if q ~= nil then return q end
  q = #w <= 9 and sfind(w, '^%d+$') and tonum(w) or false
  if quantities_n >= 1024 then quantities, quantity_texts, quantities_n = {}, {}, 0 end
  quantities[w], quantities_n = q, quantities_n + 1
  if q then quantity_texts[q] = tostr(q) end
  return q
end

-- grammar.options for `[quantity] [MS]` in any order after the first
-- `from - 1` words: the quantity (1 when not given) and MS; nil for any
-- other options.
local function plain_options(argv, from)
  local w = argv[from]
  if not w then return 1, false end
  local w2 = argv[from + 1]
  if w2 then
    if argv[from + 2] then return nil end
    -- Either order; one of the two must be MS.
    if w == 'MS' or w == 'ms' then w, w2 = w2, w end
    if w2 ~= 'MS' and w2 ~= 'ms' then return nil end
    return plain_quantity(w), true
  end
  if w == 'MS' or w == 'ms' then return 1, true end
  return plain_quantity(w), false
end

-- The text of a quantity plain_quantity read.
local function quantity_text(q)
  return quantity_texts[q] or tostr(q)
end

-- A counter's value in canonical digits (at most 15, no leading zero):
-- its number, remembered by its text (bounded); nil for anything else
-- (INCRBY refuses "007", which the layered path reads as 7 and rewrites).
local counts, counts_n = {}, 0
local function plain_count(v)
  local c = counts[v]
  if c then return c end
  if ltype(v) ~= 'string' or #v > 15 or not (sfind(v, '^[1-9]%d*$') or v == '0') then return nil end
  c = tonum(v)
  if counts_n >= 1024 then counts, counts_n = {}, 0 end
  counts[v], counts_n = c, counts_n + 1
  return c
end

-- A key's expiry, as the general path reads it (a local: no table lookup
-- per call).
local expire_ms = store.expire_ms

-- A stored TAT's whole seconds (digits without a leading zero), remembered
-- by their text (bounded): TATs of one rate limit share their seconds from
-- call to call. False for any other text. (One pattern over the whole TAT
-- that also splits it backtracks: it costs several times this.)
local tat_seconds, tat_seconds_n = {}, 0
local function seconds_of(st)
  local s = tat_seconds[st]
  if s ~= nil then return s end
  s = sfind(st, '^[1-9]%d*$') and tonum(st) or false
  if tat_seconds_n >= 4096 then tat_seconds, tat_seconds_n = {}, 0 end
  tat_seconds[st], tat_seconds_n = s, tat_seconds_n + 1
  return s
end

-- store.now, flat: TIME's seconds as store.now keeps them (sec_text,
-- sec_num), its microseconds, and now in ns (a pair) and in ms.
-- (floor(x) is x - x % 1 here and below: one VM instruction where
-- math.floor is a C call.)
local function clock()
  local t = rcall('TIME')
  local st, usec = t[1], tonum(t[2])
  if st ~= sec_text then sec_text, sec_num = st, tonum(st) end
  local sec = sec_num
  local sub = usec % 1000
  return sec, usec * 1000, sec * 1000 + (usec - sub) / 1000, sub * 1000
end

-- store.integer for a TAT in canonical digits (integer() reads them so):
-- the TAT relative to now in ns when within a day of now (gcra.decide's
-- fast path), 0 for an absent key; nil for anything else.
local function tat_rel(key, now_s, now_n)
  local v = rpcall('GET', key)
  if not v then return 0 end
  -- An error reply (WRONGTYPE) is a table, whose length is 0.
  local len = #v
  if len < 10 or len > 19 then return nil end
  local s = seconds_of(ssub(v, 1, len - 9))
  if not s then return nil end
  local nt = ssub(v, len - 8)
  if not sfind(nt, '^%d+$') then return nil end
  local ds = s - now_s
  if ds > 86400 or ds < -86400 then return nil end
  return ds * B + (tonum(nt) - now_n)
end

fast['cl.throttle'] = function(keys, argv)
  if #keys ~= 1 then return nil end
  -- commands.throttle / grammar.options.
  local q, ms = plain_options(argv, 4)
  if not q then return nil end
  -- gcra_of: only a limiter parsed before (cached_limiter's hit).
  local g = cached_by_words('G', argv[1], argv[2], argv[3])
  if not g then return nil end
  local e, t = g[1], g[2]
  local inc = e * q
  if inc >= 1e15 then return nil end
  -- store.now; limiter.check (gcra.check) holds for a clock below 9e9 s
  -- and a tolerance below 1e15 ns.
  local now_s, now_n, now_ms = clock()
  if not (now_s < 9000000000) then return nil end
  -- store.integer: a TAT in canonical digits (integer() reads them so),
  -- split into its seconds and nanoseconds by one match;
  -- gcra.decide's fast path: within a day of now.
  local key = keys[1]
  local rel = tat_rel(key, now_s, now_n)
  if not rel then return nil end
  -- gcra.decide's fast path.
  local new_rel = (rel > 0 and rel or 0) + inc
  local allow_rel = new_rel - t
  local ttl = new_rel
  local limited = allow_rel > 0
  if limited then ttl = rel > 0 and rel or 0 end
  local rem, x = 0, t - ttl
  if x > 0 then
    if e >= 1000 then x = x / 1000; rem = (x - x % 1) / g[4] else rem = x / e end
    rem = rem - rem % 1
    if rem > g[3] then rem = g[3] end
  end
  local ttl_s = ttl / B
  ttl_s = ttl_s - ttl_s % 1
  local ttl_n = ttl - ttl_s * B
  -- to_reply: reset, then retry.
  local reset
  if ms then reset = unit_of(true, ttl_s, ttl_n)
  else reset = ttl_n >= 1000000 and ttl_s + 1 or ttl_s end
  if limited then
    local retry = -1
    if inc <= t then
      local rs = allow_rel / B
      rs = rs - rs % 1
      retry = unit_of(ms, rs, allow_rel - rs * B)
    end
    return { 1, g[3], rem, retry, reset }
  end
  -- limiter.apply: store.set with gcra.decide's new TAT and expiry.
  local nts, ntn = padd(now_s, now_n, ttl_s, ttl_n)
  local ttl_ms = ttl / 1000000
  store.set(key, ptostr(nts, ntn), now_ms + ttl_ms - ttl_ms % 1, nil, now_ms)
  return { 0, g[3], rem, -1, reset }
end

fast['fw.incr'] = function(keys, argv)
  if #keys ~= 1 then return nil end
  -- fixed_command / grammar.options: a quantity word alone is the usual
  -- call (plain_quantity's hit); anything else goes by plain_options.
  local q, ms, w = 1, false, argv[3]
  if w then
    q = not argv[4] and quantities[w]
    if not q then q, ms = plain_options(argv, 3) end
    if not q then return nil end
  end
  -- fixed_of: only a rolling window parsed before (cached_by_words' hit,
  -- else cached_by_words).
  local fw = by_words.F[argv[1]]
  fw = fw and fw[argv[2]]
  fw = fw and fw[0]
  if fw == nil then fw = cached_by_words('F', argv[1], argv[2], 0) end
  if not fw then return nil end
  -- store.now; limiter.check (fixed.check) holds for a clock below 9e9 s
  -- and a window below 1e15 ns. sub_n is now's nanoseconds past its ms.
  local now_s, now_n, now_ms, sub_n = clock()
  if not (now_s < 9000000000) then return nil end
  -- store.integer and store.expire_ms for a counter in plain digits
  -- (plain_count), as fixed.decide takes it: the count and the expiry, 0
  -- and none when absent or expired; anything else, and a counter without
  -- TTL (its repair is the layered path's), goes to the layered path.
  local key = keys[1]
  local count, exp_ms = 0, nil
  local v = rpcall('GET', key)
  if v then
    count = counts[v] or plain_count(v)
    if not count then return nil end
    exp_ms = has_pexpiretime and rpcall('PEXPIRETIME', key)
    if ltype(exp_ms) ~= 'number' then exp_ms = expire_ms(key, now_ms)
    elseif exp_ms < 0 then exp_ms = nil end
    if not exp_ms then return nil end
    if now_ms >= exp_ms then count, exp_ms = 0, nil end
  end
  -- fixed.decide: the window's end (new_window_end_ms for a rolling
  -- window), then until_ms (end_ms * 1e6 - now) in its usual range, as a
  -- pair clamped at 0 (beyond it, the layered path).
  local end_ms = exp_ms
  if not end_ms then
    local es, en = now_s + fw[2], now_n + fw[3]
    if en >= B then es, en = es + 1, en - B end
    local r = en % 1000000
    end_ms = es * 1000 + (en - r) / 1000000
    if r > 0 then end_ms = end_ms + 1 end
  end
  local d = end_ms - now_ms
  if not (d < 9e9 and d > -9e9) then return nil end
  local x = d * 1000000 - sub_n
  local us = x / B
  us = us - us % 1
  local un = 0
  if us < 0 then us = 0 else un = x - us * B end
  -- whole_seconds_rounded_up of it (retry and reset in seconds).
  local secs = un >= 1000000 and us + 1 or us
  local limit = fw[1]
  local after, limited, retry = count, 0, -1
  if not (limit > 0 and q <= limit) then
    limited = 1
  elseif count + q <= limit then
    after = count + q
    -- limiter.apply: store.set of the count, keeping an unchanged expiry;
    -- on a live counter, INCRBY writes the same value and keeps its TTL.
    if q > 0 then
      if exp_ms then
        rcall('INCRBY', key, quantity_texts[q] or tostr(q))
      else
        -- A fresh window: the count is the quantity.
        store.set(key, quantity_texts[q] or tostr(q), end_ms, nil, now_ms)
      end
    end
  else
    limited = 1
    if ms then retry = unit_of(true, us, un) else retry = secs end
  end
  local rem = limit - after
  if rem < 0 then rem = 0 elseif rem > limit then rem = limit end
  -- to_reply: reset.
  local reset = secs
  if after <= 0 then reset = 0 elseif ms then reset = unit_of(true, us, un) end
  return { limited, limit, rem, retry, reset }
end

do
  -- (A block: its locals leave the chunk's top level, which holds at most
  -- 200 and which the client packages extend.)
  -- A log's head and first entry read as numbers: "\0SWE" as a big-endian
  -- 32-bit integer, the base (7 bytes), the entry's seconds (5),
  -- nanoseconds (4) and cumulated quantity (7): one struct.unpack.
  local SWE_NUMBER = 5461829
  local HEAD_AND_ENTRY = '>I4I7I5I4I7'
  local ONE_ENTRY = '>I5I4I7'
  local log_bytes_text

  -- SW.ALLOW's commonest call, on a log whose entries are in time order (as
  -- sliding.record keeps them) and all within the window (or on no log):
  -- sliding.decide needs then only the first entry (after now - window: no
  -- entry to drop, so the quantity in the window is the newest entry's
  -- cumulated quantity over the base) and the newest, two struct.unpack
  -- calls where its binary searches make one a step; and sliding.record
  -- appends the new entry. Any other log goes through sliding.decide and
  -- sliding.record, as before.
  fast['sw.allow'] = function(keys, argv)
    if #keys ~= 1 then return nil end
    -- sliding_command / grammar.options: `[quantity] [MS]`, no APPROX.
    local q, ms, w = 1, false, argv[3]
    if w then
      q = not argv[4] and quantities[w]
      if not q then q, ms = plain_options(argv, 3) end
      if not q then return nil end
    end
    -- sliding_of: only an exact log parsed before (cached_by_words' hit).
    local lim = by_words.S[argv[1]]
    lim = lim and lim[argv[2]]
    lim = lim and lim[1]
    if lim == nil then lim = cached_by_words('S', argv[1], argv[2], 1) end
    if not lim then return nil end
    local limit, ws, wn = lim[1], lim[2], lim[3]
    -- store.now; limiter.check.
    local now_s, now_n, now_ms = clock()
    if past_i64(now_s, now_n, ws, wn) then return nil end
    -- window_state: an exact log of the twin (anything else: the layered
    -- path, which answers every error). store.get_bounded: a log too long
    -- to be one the functions serve is the layered path's error. (Its
    -- bounds go as text: a number is written out by the server.)
    local key = keys[1]
    if not log_bytes_text then log_bytes_text = tostr(sliding.MAX_BYTES) end
    local v = rpcall('GETRANGE', key, '0', log_bytes_text)
    -- An error reply is a table, whose length is 0.
    local len = #v
    local base, s1, n1, c1, ls, ln, lc
    if len == 0 then
      if v ~= '' or rcall('EXISTS', key) ~= 0 then return nil end
      v = nil
    elseif len >= 27 and len <= sliding.MAX_BYTES and (len - 11) % 16 == 0 then
      local magic
      magic, base, s1, n1, c1 = sunpack(HEAD_AND_ENTRY, v, 1)
      if magic ~= SWE_NUMBER then return nil end
      if len == 27 then ls, ln, lc = s1, n1, c1 else ls, ln, lc = sunpack(ONE_ENTRY, v, len - 15) end
    else
      return nil
    end
    -- sliding.decide's cutoff (now - window; no saturation for a window
    -- below 1e9 s), and whether the first entry is after it.
    local cs, cn = now_s - ws, now_n - wn
    if cn < 0 then cs, cn = cs - 1, cn + B end
    if v and (ws >= 1000000000 or not (s1 > cs or (s1 == cs and n1 > cn)) or lc >= 9007199254740992
        or base >= 9007199254740992) then
      -- Entries to drop, or an extreme log: sliding.decide and
      -- sliding.record, which answer every log.
      local n = (len - 11) / 16
      local _, verdict_, at_s, at_n, dropped = sliding.decide(limit, ws, wn, v, n, base, now_s, now_n, q)
      if at_s then
        local v2, exp = sliding.record(v, n, base, ws, wn, at_s, at_n, q, dropped)
        store.set(key, v2, exp, nil, now_ms)
      end
      return to_reply(verdict_, ms)
    end
    -- sliding.decide with no entry at or before the cutoff: the quantity
    -- in the window, the newest entry's time when live.
    local in_window, live = 0, false
    if v then
      in_window = lc - base
      live = cs < ls or (cs == ls and cn < ln)
    end
    local limited, retry = 1, -1
    local used, ns_, nn = in_window, nil, nil
    if live then ns_, nn = ls, ln end
    if not (limit > 0 and q <= limit) then
      -- never: no retry time.
    elseif in_window + q <= limit then
      limited = 0
      if q > 0 then
        -- The request's time: now, or the newest entry's when later (a
        -- clock that stepped back). sliding.record: the entry appended
        -- (no entry to drop at now - window: none is at or before the
        -- cutoff), or the first one of a new log; its expiry.
        local at_s, at_n = now_s, now_n
        local out
        if v and (ls > at_s or (ls == at_s and ln > at_n)) then
          at_s, at_n = ls, ln
          out = sliding.record(v, (len - 11) / 16, base, ws, wn, at_s, at_n, q, nil)
        elseif v and lc + q < 9007199254740992 then
          out = v .. spack(ONE_ENTRY, at_s, at_n, lc + q)
        elseif v then
          out = sliding.record(v, (len - 11) / 16, base, ws, wn, at_s, at_n, q, 0)
        else
          out = spack(HEAD_AND_ENTRY, SWE_NUMBER, 0, at_s, at_n, q)
        end
        used, ns_, nn = in_window + q, at_s, at_n
        local es, en = at_s + ws, at_n + wn
        if en >= B then es, en = es + 1, en - B end
        store.set(key, out, es * 1000 + (en - en % 1000000) / 1000000, nil, now_ms)
      end
    else
      -- limited: the time that frees enough, the first entry whose
      -- cumulated quantity reaches the base plus what must go (reaching).
      local target = base + in_window - (limit - q)
      local ts, tn
      if target <= c1 then
        ts, tn = s1, n1
      else
        local n = (len - 11) / 16
        local j = sliding.reaching(v, 0, n, target)
        if j <= n then ts, tn = sliding.entry(v, j) else ts, tn = now_s, now_n end
      end
      local rs, rn = ts + ws, tn + wn
      if rn >= B then rs, rn = rs + 1, rn - B end
      rs, rn = rs - now_s, rn - now_n
      if rn < 0 then rs, rn = rs - 1, rn + B end
      if rs < 0 or (rs == 0 and rn < 1) then rs, rn = 0, 1 end
      if ms then retry = unit_of(true, rs, rn) else retry = rn >= 1000000 and rs + 1 or rs end
    end
    local rem = limit - used
    if rem < 0 then rem = 0 elseif rem > limit then rem = limit end
    -- to_reply's reset: until the newest entry leaves the window.
    local reset = 0
    if ns_ then
      local ts, tn = ns_ + ws, nn + wn
      if tn >= B then ts, tn = ts + 1, tn - B end
      ts, tn = ts - now_s, tn - now_n
      if tn < 0 then ts, tn = ts - 1, tn + B end
      if ts < 0 then ts, tn = 0, 0 end
      if ms then reset = unit_of(true, ts, tn) else reset = tn >= 1000000 and ts + 1 or ts end
    end
    return { limited, limit, rem, retry, reset }
  end
end

-- CL.THROTTLEALL's commonest form: two keys, `GCRA max_burst count period
-- FW limit window [ALIGN]` (a rolling window, or an aligned one of whole
-- seconds), no call options; both limiters as the flat paths above take
-- them. Every step is the layered path's for these two limiters
-- (throttle_all.lua: one instant, both states read before anything is
-- written, binding_of, limiter.apply's writes, to_reply), on doubles.
fast['cl.throttleall'] = function(keys, argv)
  local k1, k2 = keys[1], keys[2]
  if not k2 or keys[3] or k1 == k2 then return nil end
  if argv[1] ~= 'GCRA' or argv[5] ~= 'FW' then return nil end
  -- The limiters: cached_by_words' hits, else cached_by_words.
  local align, fw = argv[8], nil
  if align then
    if align ~= 'ALIGN' or argv[9] then return nil end
    fw = by_words.A[argv[6]]
    fw = fw and fw[argv[7]]
    fw = fw and fw[2]
    if fw == nil then fw = cached_by_words('A', argv[6], argv[7], 2) end
  elseif argv[7] then
    fw = by_words.F[argv[6]]
    fw = fw and fw[argv[7]]
    fw = fw and fw[0]
    if fw == nil then fw = cached_by_words('F', argv[6], argv[7], 0) end
  end
  if not fw then return nil end
  local g = by_words.G[argv[2]]
  g = g and g[argv[3]]
  g = g and g[argv[4]]
  if g == nil then g = cached_by_words('G', argv[2], argv[3], argv[4]) end
  if not g then return nil end
  local now_s, now_n, now_ms, sub_n = clock()
  if not (now_s < 9000000000) then return nil end
  local rel = tat_rel(k1, now_s, now_n)
  if not rel then return nil end
  -- The counter and its expiry, as FW.INCR's flat path reads them.
  local count, exp_ms = 0, nil
  local v = rpcall('GET', k2)
  if v then
    count = counts[v] or plain_count(v)
    if not count then return nil end
    exp_ms = has_pexpiretime and rpcall('PEXPIRETIME', k2)
    if ltype(exp_ms) ~= 'number' then exp_ms = expire_ms(k2, now_ms)
    elseif exp_ms < 0 then exp_ms = nil end
    if not exp_ms then return nil end
    if now_ms >= exp_ms then count, exp_ms = 0, nil end
  end
  -- gcra.decide's fast path, quantity 1.
  local e, t = g[1], g[2]
  local new_rel = (rel > 0 and rel or 0) + e
  local allow_rel = new_rel - t
  local ttl = new_rel
  local g_limited = allow_rel > 0
  if g_limited then ttl = rel > 0 and rel or 0 end
  local g_rem, x = 0, t - ttl
  if x > 0 then
    if e >= 1000 then x = x / 1000; g_rem = (x - x % 1) / g[4] else g_rem = x / e end
    g_rem = g_rem - g_rem % 1
    if g_rem > g[3] then g_rem = g[3] end
  end
  local g_rs, g_rn
  if g_limited and e <= t then
    g_rs = allow_rel / B
    g_rs = g_rs - g_rs % 1
    g_rn = allow_rel - g_rs * B
  end
  -- fixed.decide, quantity 1: the window's end (a rolling window's, or
  -- an aligned one's: the next multiple of the window after now).
  local end_ms = exp_ms
  if not end_ms then
    if align then
      local w = fw[2]
      end_ms = (now_s - now_s % w + w) * 1000
    else
      local es, en = now_s + fw[2], now_n + fw[3]
      if en >= B then es, en = es + 1, en - B end
      local r = en % 1000000
      end_ms = es * 1000 + (en - r) / 1000000
      if r > 0 then end_ms = end_ms + 1 end
    end
  end
  -- until_ms, as FW.INCR's flat path works it out.
  local d = end_ms - now_ms
  if not (d < 9e9 and d > -9e9) then return nil end
  local ux = d * 1000000 - sub_n
  local us = ux / B
  us = us - us % 1
  local un = 0
  if us < 0 then us = 0 else un = ux - us * B end
  local limit = fw[1]
  local after, f_limited, f_rs, f_rn = count, false, nil, nil
  if not (limit > 0 and 1 <= limit) then
    f_limited = true
  elseif count + 1 <= limit then
    after = count + 1
  else
    f_limited, f_rs, f_rn = true, us, un
  end
  local f_rem = limit - after
  if f_rem < 0 then f_rem = 0 elseif f_rem > limit then f_rem = limit end
  -- binding_of: the FW limiter binds when it refuses and the GCRA allows,
  -- when both refuse and it waits longer (no retry time: longest), or
  -- when both allow and it has less left.
  local second
  if g_limited ~= f_limited then
    second = f_limited
  elseif g_limited then
    if g_rs == nil then second = false
    elseif f_rs == nil then second = true
    else second = g_rs < f_rs or (g_rs == f_rs and g_rn < f_rn) end
  else
    second = f_rem < g_rem
  end
  -- limiter.apply: both writes when both allow.
  local ttl_s = ttl / B
  ttl_s = ttl_s - ttl_s % 1
  if not (g_limited or f_limited) then
    local nts, ntn = padd(now_s, now_n, ttl_s, ttl - ttl_s * B)
    local ttl_ms = ttl / 1000000
    store.set(k1, ptostr(nts, ntn), now_ms + ttl_ms - ttl_ms % 1, nil, now_ms)
    -- The counter: on a live one INCRBY writes what SET ... KEEPTTL
    -- would (as FW.INCR's flat path does), with no number to write out;
    -- a fresh window holds 1.
    if exp_ms then rcall('INCRBY', k2, '1') else store.set(k2, '1', end_ms, nil, now_ms) end
  end
  -- to_reply of the binding verdict (seconds), and its index.
  if second then
    local reset = 0
    if after > 0 then reset = un >= 1000000 and us + 1 or us end
    -- whole_seconds_rounded_up (of times at or after now).
    local retry = -1
    if f_rs then retry = f_rn >= 1000000 and f_rs + 1 or f_rs end
    return { f_limited and 1 or 0, limit, f_rem, retry, reset, 2 }
  end
  local reset = ttl - ttl_s * B >= 1000000 and ttl_s + 1 or ttl_s
  local retry = -1
  if g_rs then retry = g_rn >= 1000000 and g_rs + 1 or g_rs end
  return { g_limited and 1 or 0, g[3], g_rem, retry, reset, 1 }
end
