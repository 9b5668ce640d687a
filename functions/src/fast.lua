-- A flat path for the commonest calls of CL.THROTTLE, FW.INCR and SW.ALLOW, beside
-- the layered one. Why it exists: through the layers (entry,
-- commands.throttle, grammar.options, single, limiter.decide,
-- limiter.check, store.integer, gcra.decide, verdict, to_reply,
-- limiter.apply, store.set) a CL.THROTTLE call costs about 480 Lua VM
-- instructions and an FW.INCR call about 560, against about 140 and 100
-- for the simple scripts of bench/lua (counted under Lua 5.1 with a stub
-- `redis`, the stub's own included); flat, about 290 each.
--
-- It serves only `CL.THROTTLE key max_burst count period [quantity] [MS]`,
-- `FW.INCR key limit window [quantity] [MS]` (a rolling window) and
-- `SW.ALLOW key limit window [quantity] [MS]` (an exact log) with a
-- limiter already parsed (the cache of limiter.cached holds only
-- limiters within the twin's range), a plain quantity word, a clock and a
-- stored TAT, count or log where every value is a whole double far below 2^53; for
-- anything else it returns nil before writing anything and the layered
-- path answers (every error comes from there). Each step below names the
-- layered function whose arithmetic it repeats, operation for operation.

local fast = {}

-- limiter.cached by the words themselves: nested tables rather than one
-- joined string, so a hit makes no string. Filled from limiter.cached
-- only (a limiter depends on its words alone); bounded as that is.
-- `c` is the third word (GCRA's period), or 0 for FW's key ('F' limit
-- window, no TZ, no ALIGN), or 1 for SW's ('S' limit window).
local by_words, by_words_n = { G = {}, F = {}, S = {} }, 0

local function cached_by_words(kind, a, b, c)
  local kt = by_words[kind]
  local t = kt[a]
  t = t and t[b]
  t = t and t[c]
  if t then return t end
  local k
  if c == 1 then k = kind .. a .. '\0' .. b
  else k = kind .. a .. '\0' .. b .. '\0' .. (c ~= 0 and c or '') end
  local lim = limiter.cached(k)
  if not lim then return nil end
  if by_words_n >= 4096 then
    by_words, by_words_n = { G = {}, F = {}, S = {} }, 0
    kt = by_words[kind]
  end
  local ta = kt[a]
  if not ta then ta = {}; kt[a] = ta end
  local tb = ta[b]
  if not tb then tb = {}; ta[b] = tb end
  tb[c] = lim
  by_words_n = by_words_n + 1
  return lim
end

-- A quantity word this path reads: plain digits, below 1e9 (remembered
-- by its word, as parse.lua's integer() remembers short words).
local quantities, quantities_n = {}, 0
local function plain_quantity(w)
  local q = quantities[w]
  if q ~= nil then return q end
  q = #w <= 9 and sfind(w, '^%d+$') and tonum(w) or false
  if quantities_n >= 1024 then quantities, quantities_n = {}, 0 end
  quantities[w], quantities_n = q, quantities_n + 1
  return q
end

-- grammar.options for `[quantity] [MS]` in any order after the first
-- `from - 1` words: the quantity (1 when not given) and MS; nil for any
-- other options.
local function plain_options(argv, from)
  local nargs = #argv
  if nargs < from - 1 or nargs > from + 1 then return nil end
  local q, given, ms = 1, false, false
  for i = from, nargs do
    local w = argv[i]
    if w == 'MS' or w == 'ms' then
      if ms then return nil end
      ms = true
    else
      if given then return nil end
      q, given = plain_quantity(w), true
      if not q then return nil end
    end
  end
  return q, ms
end

fast['cl.throttle'] = function(keys, argv)
  if #keys ~= 1 then return nil end
  -- commands.throttle / grammar.options.
  local q, ms = plain_options(argv, 4)
  if not q then return nil end
  -- gcra_of: only a limiter parsed before (cached_limiter's hit).
  local lim = cached_by_words('G', argv[1], argv[2], argv[3])
  if not lim then return nil end
  local g = lim[2]
  local e, t = g[6], g[7]
  if not e then return nil end
  local inc = e * q
  if inc >= 1e15 then return nil end
  -- store.now; limiter.check (gcra.check) holds for a clock below 9e9 s
  -- and a tolerance below 1e15 ns.
  local now_s, now_n, now_ms = store.now()
  if not (now_s < 9000000000) then return nil end
  -- store.integer: a TAT in canonical digits (integer() reads them so);
  -- gcra.decide's fast path: within a day of now.
  local key = keys[1]
  local v = rpcall('GET', key)
  local rel = 0
  if v then
    if ltype(v) ~= 'string' then return nil end
    local len = #v
    if len < 10 or len > 19 or not sfind(v, '^[1-9]%d*$') then return nil end
    local ds = tonum(ssub(v, 1, len - 9)) - now_s
    if ds > 86400 or ds < -86400 then return nil end
    rel = ds * B + (tonum(ssub(v, len - 8)) - now_n)
  end
  -- gcra.decide's fast path.
  local new_rel = (rel > 0 and rel or 0) + inc
  local allow_rel = new_rel - t
  local ttl = new_rel
  local limited = allow_rel > 0
  if limited then ttl = rel > 0 and rel or 0 end
  local rem, x = 0, t - ttl
  if x > 0 then
    if e >= 1000 then rem = floor(floor(x / 1000) / floor(e / 1000)) else rem = floor(x / e) end
    if rem > g[5] then rem = g[5] end
  end
  local ttl_s = floor(ttl / B)
  local ttl_n = ttl - ttl_s * B
  -- to_reply: reset, then retry.
  local reset
  if ms then reset = unit_of(true, ttl_s, ttl_n)
  else reset = ttl_n >= 1000000 and ttl_s + 1 or ttl_s end
  if limited then
    local retry = -1
    if inc <= t then
      local rs = floor(allow_rel / B)
      retry = unit_of(ms, rs, allow_rel - rs * B)
    end
    return { 1, g[5], rem, retry, reset }
  end
  -- limiter.apply: store.set with gcra.decide's new TAT and expiry.
  local nts, ntn = padd(now_s, now_n, ttl_s, ttl_n)
  store.set(key, ptostr(nts, ntn), now_s * 1000 + floor(now_n / 1000000) + floor(ttl / 1000000), nil, now_ms)
  return { 0, g[5], rem, -1, reset }
end

fast['fw.incr'] = function(keys, argv)
  if #keys ~= 1 then return nil end
  -- fixed_command / grammar.options.
  local q, ms = plain_options(argv, 3)
  if not q then return nil end
  -- fixed_of: only a rolling window parsed before (cached_limiter's hit).
  local lim = cached_by_words('F', argv[1], argv[2], 0)
  if not lim then return nil end
  local fw = lim[2]
  if fw[2] ~= 'rolling' then return nil end
  local w = ptod(fw[3], fw[4])
  if w >= 1e15 then return nil end
  -- store.now; limiter.check (fixed.check) holds for a clock below 9e9 s
  -- and a window below 1e15 ns.
  local now_s, now_n, now_ms = store.now()
  if not (now_s < 9000000000) then return nil end
  -- store.integer: a count in plain digits; store.expire_ms.
  local key = keys[1]
  local v = rpcall('GET', key)
  local count, exp_ms = 0, nil
  if v then
    if ltype(v) ~= 'string' or #v > 15 or not sfind(v, '^%d+$') then return nil end
    exp_ms = store.expire_ms(key, now_ms)
    -- A counter without TTL needs the repair: the layered path.
    if not exp_ms then return nil end
    -- fixed.decide: alive, or absent.
    if now_ms < exp_ms then count = tonum(v) else exp_ms = nil end
  end
  -- fixed.decide: the window's end (new_window_end_ms for a rolling
  -- window), then until_ms in its usual range.
  local end_ms = exp_ms
  if not end_ms then
    local es, en = padd(now_s, now_n, fw[3], fw[4])
    end_ms = es * 1000 + floor(en / 1000000)
    if en % 1000000 > 0 then end_ms = end_ms + 1 end
  end
  local d = end_ms - now_ms
  if not (d < 9e9 and d > -9e9) then return nil end
  local x = d * 1000000 - now_n % 1000000
  local us = floor(x / B)
  local un = x - us * B
  if us < 0 then us, un = 0, 0 end
  local limit = fw[1]
  local fits = limit > 0 and q <= limit
  local after, limited, retry, store_it = count, false, -1, false
  if not fits then
    limited = true
  elseif count + q <= limit then
    after = count + q
    store_it = q > 0
  else
    limited = true
    retry = unit_of(ms, us, un)
  end
  local rem = limit - after
  if rem < 0 then rem = 0 elseif rem > limit then rem = limit end
  -- to_reply: reset.
  local ts, tn = 0, 0
  if after > 0 then ts, tn = us, un end
  local reset
  if ms then reset = unit_of(true, ts, tn)
  else reset = tn >= 1000000 and ts + 1 or ts end
  -- limiter.apply: store.set of the count, keeping an unchanged expiry;
  -- on a live counter, INCRBY writes the same value and keeps its TTL.
  if store_it then
    if exp_ms then
      rcall('INCRBY', key, q)
    else
      local as = floor(after / B)
      store.set(key, parg(as, after - as * B), end_ms, exp_ms, now_ms)
    end
  end
  return { limited and 1 or 0, limit, rem, retry, reset }
end

fast['sw.allow'] = function(keys, argv)
  if #keys ~= 1 then return nil end
  -- sliding_command / grammar.options: `[quantity] [MS]`, no APPROX.
  local q, ms = plain_options(argv, 3)
  if not q then return nil end
  -- sliding_of: only an exact log parsed before (cached_limiter's hit).
  local lim = cached_by_words('S', argv[1], argv[2], 1)
  if not lim or lim[1] ~= 'exact' then return nil end
  local limit, ws, wn = lim[2], lim[3], lim[4]
  -- store.now; limiter.check.
  local now_s, now_n, now_ms = store.now()
  if past_i64(now_s, now_n, ws, wn) then return nil end
  -- window_state: an exact log of the twin (anything else: the layered
  -- path, which answers every error).
  local key = keys[1]
  -- (store.get_bounded: a log too long to be one the functions serve is
  -- the layered path's error.)
  local v = rpcall('GETRANGE', key, 0, sliding.MAX_BYTES)
  if ltype(v) ~= 'string' or #v > sliding.MAX_BYTES then return nil end
  local n, base = 0, 0
  if v ~= '' then
    n, base = sliding.open(v)
    if not n then return nil end
  elseif rcall('EXISTS', key) == 0 then
    v = nil
  else
    return nil
  end
  -- limiter.decide, limiter.apply, to_reply.
  local _, verdict_, at_s, at_n, dropped = sliding.decide(limit, ws, wn, v, n, base, now_s, now_n, q)
  if at_s then
    local v2, exp = sliding.record(v, n, base, ws, wn, at_s, at_n, q, dropped)
    store.set(key, v2, exp, nil, now_ms)
  end
  return to_reply(verdict_, ms)
end
