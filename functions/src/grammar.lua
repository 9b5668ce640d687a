-- The one grammar (docs/grammar.md): required arguments by position, then
-- options in any order; each option at most once; errors in the order the
-- words come.

local grammar = {}

-- The word as an error shows it: at most 32 bytes, bytes other than
-- printable ASCII as '?'.
local function shown(w)
  return (sgsub(ssub(w, 1, 32), '[^\32-\126]', '?'))
end

function grammar.unknown(w)
  return 'ERR unknown option \'' .. shown(w) .. '\''
end

local function twice(name)
  return 'ERR ' .. name .. ' given twice'
end

-- Flags and keywords are matched case-insensitively: the word in capitals
-- (short words only; no option is longer than 8 bytes).
local function upper(w)
  if #w > 8 then return '' end
  return supper(w)
end
grammar.upper = upper

-- A quantity: an integer >= 0, as a pair; or nil and the error.
local function quantity(w)
  local s, n = integer(w)
  if not s then return nil, E.NOT_INTEGER end
  if s < 0 then return nil, E.NEGATIVE_QUANTITY end
  return s, n
end
grammar.quantity = quantity

-- A duration named `what`: a pair of nanoseconds; or nil and the error.
local function duration(w, what)
  local s, n = parse_duration(w)
  if not s then
    if n == 'overflow' then return nil, E.OVERFLOW end
    return nil, bad_duration(what)
  end
  return s, n
end
grammar.duration = duration

-- Whether `w` may be a bare quantity: it starts with a digit, +, - or '.'.
local function numeric(w)
  local c = sbyte(w, 1)
  return c and ((c >= 48 and c <= 57) or c == 43 or c == 45 or c == 46)
end

-- A keyword's value: QUANTITY's is read at once (as the module reads a
-- quantity with the options); the others' are kept as words and checked
-- by the command after its required arguments.
local function keyword(o, name, w)
  if name == 'QUANTITY' then
    local s, n = quantity(w)
    if not s then return nil, n end
    o.QUANTITY, o.q_s, o.q_n = true, s, n
  else
    o[name] = w
  end
  return true
end

-- The options of `argv` from `from` on. `spec` maps each flag to 'flag'
-- and each keyword to 'keyword'; `bare` allows the bare quantity. Returns
-- the options (o.q_s/o.q_n is the quantity, nil when not given), or nil
-- and the error.
local NO_OPTIONS = {}
-- The options of a lone bare quantity, by its word (never changed once
-- made): the common `CL.THROTTLE key 15 30 60 1` reads no table anew.
local lone, lones = {}, 0
function grammar.options(argv, from, spec, bare)
  local last = #argv
  if from > last then return NO_OPTIONS end
  if from == last and bare then
    local o = lone[argv[from]]
    if o then return o end
  end
  local o = {}
  local i = from
  while i <= last do
    local w = argv[i]
    -- No flag or keyword starts with a digit, a sign or a dot.
    if bare and numeric(w) then
      if o.q_s then return nil, twice('quantity') end
      local s, n = quantity(w)
      if not s then return nil, n end
      o.q_s, o.q_n = s, n
    else
      local name = upper(w)
      local kind = spec[name]
      if kind == 'flag' then
        if o[name] then return nil, twice(name) end
        o[name] = true
      elseif kind == 'keyword' then
        if o[name] then return nil, twice(name) end
        i = i + 1
        if i > last then return nil, 'ERR ' .. name .. ' needs a value' end
        local ok, err = keyword(o, name, argv[i])
        if not ok then return nil, err end
      else
        return nil, grammar.unknown(w)
      end
    end
    i = i + 1
  end
  if from == last and bare and o.q_s then
    if lones >= 1024 then lone, lones = {}, 0 end
    lone[argv[from]], lones = o, lones + 1
  end
  return o
end

-- One option of CL.THROTTLEALL's word stream (same rules), into `o`.
-- Returns the next index, or nil and the error.
function grammar.option(o, argv, i, spec)
  local w = argv[i]
  local name = upper(w)
  local kind = spec[name]
  if kind == 'flag' then
    if o[name] then return nil, twice(name) end
    o[name] = true
    return i + 1
  elseif kind == 'keyword' then
    if o[name] then return nil, twice(name) end
    if i + 1 > #argv then return nil, 'ERR ' .. name .. ' needs a value' end
    local ok, err = keyword(o, name, argv[i + 1])
    if not ok then return nil, err end
    return i + 2
  end
  return nil, grammar.unknown(w)
end
