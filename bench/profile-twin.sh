#!/usr/bin/env bash
# Instructions per call of the Functions twin (functions/redis_cell.lua)
# against the simple scripts of bench/lua doing the same job, counted by
# callgrind as bench/profile.sh counts the module (bench/callgrind.sh: one
# server under valgrind on the test kit's clock, stepped by 80 ms every 800
# calls; 20,000 pipelined calls over 1,000 keys a workload, each dumped on
# its own; the server's handling of a call, processInputBuffer inclusive,
# less redis-benchmark's CONFIG GETs and the clock reads). No module is
# loaded: the twin is for servers that cannot load one.
#
# Each pair sends the same parameters to `FCALL <function>` and to
# `EVALSHA <script>`, on keys of its own: the write path (every call
# allowed, on keys that live through the run: a key gets about 20 calls)
# and a refusal-heavy workload (a key allows 1 or 2 of its 20 calls). The
# goal (issue 31): script / twin >= 0.90 for each pair.
#
# Columns: the server's handling of a call for the twin and the script,
# script / twin, the goal, and the count inside fcallCommand and
# evalShaCommand (the function or script itself, with its redis.calls; the
# clock reads left out there too).
# Usage: bench/profile-twin.sh [redis-server]   (default /usr/bin/redis-server;
# needs valgrind, redis-benchmark, redis-cli and the test kit)
# PROFILE_LIBRARY=/path/to/redis_cell.lua profiles another build of the
# library (say, of an earlier commit); KEEP_PROFILE=dir keeps the dumps.
set -euo pipefail
cd "$(dirname "$0")/.."
server=${1:-/usr/bin/redis-server}
for tool in valgrind callgrind_control callgrind_annotate redis-benchmark redis-cli; do
  command -v "$tool" >/dev/null || { echo "bench/profile-twin.sh: $tool is missing" >&2; exit 1; }
done
library=${PROFILE_LIBRARY:-$PWD/functions/redis_cell.lua}
[ -f "$library" ] || { echo "bench/profile-twin.sh: no library at $library" >&2; exit 1; }
. bench/testkit.sh
. bench/callgrind.sh
[ -n "${TESTKIT:-}" ] || cargo build -q -p testkit
kit_open
cg_server --server "$server" --no-module
redis-cli -p "$port" -x FUNCTION LOAD REPLACE <"$library" >/dev/null
sha() { redis-cli -p "$port" SCRIPT LOAD "$(cat "bench/lua/$1.lua")"; }
gcra=$(sha gcra) fixed=$(sha fixed_window) sliding=$(sha sliding_zset) all=$(sha throttle_all)
pairs=()
# pair NAME TWIN-COMMAND -- SCRIPT-COMMAND: both workloads, on keys of
# their own (the commands' keys name them).
pair() {
  local name=$1 i
  shift
  for ((i = 1; i <= $#; i++)); do [ "${!i}" = -- ] && break; done
  cg_workload "$name, twin" "${@:1:i-1}"
  cg_workload "$name, script" "${@:i+1}"
  pairs+=("$name")
}
cg_workload warm-up FCALL cl_throttle 1 w:__rand_int__ 1000 1 2 1
callgrind_control -z "$pid" >/dev/null 2>&1
# The write path: every call allowed.
pair "cl_throttle k 1000 1 2 1" FCALL cl_throttle 1 ct:__rand_int__ 1000 1 2 1 \
  -- EVALSHA "$gcra" 1 cs:__rand_int__ 1000 1 2 1
pair "fw_incr k 100 60 1" FCALL fw_incr 1 ft:__rand_int__ 100 60 1 \
  -- EVALSHA "$fixed" 1 fs:__rand_int__ 100 60 1
pair "sw_allow k 100 60" FCALL sw_allow 1 st:__rand_int__ 100 60 \
  -- EVALSHA "$sliding" 1 ss:__rand_int__ 100 60
pair "cl_throttleall GCRA 1000 1 2 + FW 100000 1d" \
  FCALL cl_throttleall 2 '{at:__rand_int__}a' '{at:__rand_int__}b' GCRA 1000 1 2 FW 100000 86400 ALIGN \
  -- EVALSHA "$all" 2 '{as:__rand_int__}a' '{as:__rand_int__}b' 1000 1 2 100000 86400
# Refusal-heavy: a key allows 1 or 2 of its calls.
pair "cl_throttle k 1 1 60 1, refused" FCALL cl_throttle 1 rct:__rand_int__ 1 1 60 1 \
  -- EVALSHA "$gcra" 1 rcs:__rand_int__ 1 1 60 1
pair "fw_incr k 2 60 1, refused" FCALL fw_incr 1 rft:__rand_int__ 2 60 1 \
  -- EVALSHA "$fixed" 1 rfs:__rand_int__ 2 60 1
pair "sw_allow k 2 60, refused" FCALL sw_allow 1 rst:__rand_int__ 2 60 \
  -- EVALSHA "$sliding" 1 rss:__rand_int__ 2 60
pair "cl_throttleall GCRA 1 1 60 + FW 100 60, refused" \
  FCALL cl_throttleall 2 '{rat:__rand_int__}a' '{rat:__rand_int__}b' GCRA 1 1 60 FW 100 60 ALIGN \
  -- EVALSHA "$all" 2 '{ras:__rand_int__}a' '{ras:__rand_int__}b' 1 1 60 100 60
cg_stop
version=$("$server" --version | sed -n 's/.* v=\([^ ]*\) .*/\1/p')
echo "$(basename "$server") $version, library $(basename "$library")"
printf '%-48s %8s %8s %7s %5s %9s %9s\n' workload twin script ratio goal "in FCALL" "in EVALSHA"
for name in "${pairs[@]}"; do
  twin=$(cg_count "$name, twin" fcallCommand)
  script=$(cg_count "$name, script" evalShaCommand)
  read -r t ti tc <<<"$twin"
  read -r s si sc <<<"$script"
  printf '%-48s %8d %8d %7s %5s %9d %9d\n' "$name" "$t" "$s" \
    "$(awk -v s="$s" -v t="$t" 'BEGIN { printf "%.3f", s / t }')" 0.90 $((ti - tc)) $((si - sc))
done
