-- redis-cell's twin in Lua: the module's commands as Redis Functions (and
-- as one EVAL script), with the same replies, errors and, for CL and FW,
-- the same state. The files of functions/src mirror core/ and src/ module
-- by module; functions/build joins them into the two generated scripts.
--
-- The top level of a library sees no Lua globals but `redis`: the standard
-- functions are bound here by init(), which every entry point calls first.

local floor, fmod, sbyte, ssub, sfind, smatch, sformat, supper, slower, sgsub, srep
local spack, sunpack, tconcat, tonum, tostr
local rcall, rpcall, rerror, ltype

local function init()
  floor, fmod = math.floor, math.fmod
  sbyte, ssub, sfind, smatch = string.byte, string.sub, string.find, string.match
  sformat, supper, slower, sgsub, srep = string.format, string.upper, string.lower, string.gsub, string.rep
  spack, sunpack = struct.pack, struct.unpack
  tconcat, tonum, tostr = table.concat, tonumber, tostring
  rcall, rpcall, rerror, ltype = redis.call, redis.pcall, redis.error_reply, type
end
