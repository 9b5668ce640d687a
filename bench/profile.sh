#!/usr/bin/env bash
# Instructions per call, counted by callgrind (exact and repeatable, unlike
# timings on a shared machine): each workload sends 20,000 calls over 1,000
# keys (redis-benchmark -c 1 -P 16, pipelined as bench/run.py sends them) to
# one redis-server run under valgrind (started by the test kit,
# bench/testkit.sh) with the floor module (bench/floor.rs) loaded beside
# redis-cell. The counters are dumped after each workload, so every row is
# that workload alone, on keys of its own.
#
# The server runs on the test kit's clock, stepped by 80 ms every 800
# calls (a workload spans 2 s of its time): the decisions, and so the
# counts, do not depend on how fast valgrind runs on a loaded machine (on
# the real clock a slow run let keys of the GCRA workloads, whose TTL is
# 2 s a call, expire between their calls).
#
# Two kinds of workload:
# - the write path: every call allowed, on keys that live through the run
#   (no key reaches its limit: a key gets about 20 calls), so every call
#   writes and replicates, as the floors do;
# - refusal-heavy ones, where most calls are refused and write nothing.
# Each command is compared with the floor that does the least any command
# of its kind must do, sent with as many words as the command (the server's
# reading of the words is outside any module): FLOOR.ONE (a string
# rewritten in place, SET ... PXAT replicated), FLOOR.TWO (the same on two
# keys) and FLOOR.TYPE (a module-type value changed in place, its effect
# replicated with the time, FLOOR.TYPE key <ms>). The floor's workload is
# the command's size: the same calls over the same number of keys.
#
# Columns: the server's handling of a call (callgrind's inclusive count of
# processInputBuffer: reading and parsing the request, the command,
# propagation, the reply), inside the command's own function, the floor's
# count in the first column's terms, and floor / command (1 is the floor;
# the goal of each command beside it). The server's timers (serverCron) and
# event loop are left out: their share per call grows with the wall time a
# call takes under valgrind, so with the machine's load; so are the two
# CONFIG GETs each redis-benchmark run sends first, and the clock reads
# (answered by the test kit's clock, testkit/faketime.c, whose reading of
# its file is no part of a command's cost), for the floor and the command
# alike.
# Usage: bench/profile.sh [redis-server]   (needs valgrind, redis-benchmark)
# PROFILE_MODULE=/path/to/libredis_cell.so profiles another build (say, of
# an earlier commit) against the same floor; KEEP_PROFILE=dir keeps the
# dumps (callgrind_annotate --inclusive=yes dir/cg.out.N).
set -euo pipefail
cd "$(dirname "$0")/.."
server=${1:-redis-server}
for tool in valgrind callgrind_control callgrind_annotate redis-benchmark redis-cli; do
  command -v "$tool" >/dev/null || { echo "bench/profile.sh: $tool is missing" >&2; exit 1; }
done
. bench/testkit.sh
. bench/callgrind.sh
cargo build --release -q -p redis-cell -p cell-bench
cargo build -q -p testkit
module=${PROFILE_MODULE:-$PWD/target/release/libredis_cell.so}
kit_open
cg_server --server "$server" --module "$module" --module "$PWD/target/release/libcell_floor.so"
fixed=$(redis-cli -p "$port" script load "$(cat bench/lua/fixed_window.lua)")
rows=()
# run NAME FUNCTION FLOOR GOAL COMMAND...: FUNCTION is the command's entry
# point as callgrind names it (its inclusive count is the second column),
# FLOOR the name of the floor's row it is compared with ("-" for none) and
# GOAL the ratio it should reach ("-" for none).
run() {
  local name=$1 fn=$2 floor=$3 goal=$4
  shift 4
  cg_workload "$name" "$@"
  rows+=("$name|$fn|$floor|$goal")
}
run warm-up - - - FLOOR.ONE w:__rand_int__
callgrind_control -z "$pid" >/dev/null 2>&1
run INCR incrCommand - - INCR n:__rand_int__
# The floors, with as many words as the commands below.
floor1=cell_floor::one floor2=cell_floor::two floort=cell_floor::typed
run "FLOOR.ONE, 4 words" $floor1 - - FLOOR.ONE f4:__rand_int__ 100 60
run "FLOOR.ONE, 6 words" $floor1 - - FLOOR.ONE f6:__rand_int__ 1000 1 2 1
run "FLOOR.ONE, 8 words" $floor1 - - FLOOR.ONE f8:__rand_int__ 1000 1 2 1 MAXWAIT 1
run "FLOOR.TWO, 12 words" $floor2 - - \
  FLOOR.TWO '{f:__rand_int__}a' '{f:__rand_int__}b' GCRA 1000 1 2 FW 100000 86400 ALIGN
run "FLOOR.TYPE, 4 words" $floort - - FLOOR.TYPE t4:__rand_int__ 100 60
run "FLOOR.TYPE, 5 words" $floort - - FLOOR.TYPE t5:__rand_int__ 100 60 APPROX
# The write path: every call allowed.
run "CL.THROTTLE k 1000 1 2 1" throttle::CL_THROTTLE::entry "FLOOR.ONE, 6 words" 0.97 \
  CL.THROTTLE cl:__rand_int__ 1000 1 2 1
run "CL.RESERVE k 1000 1 2 1 MAXWAIT 1" reserve::CL_RESERVE::entry "FLOOR.ONE, 8 words" 0.95 \
  CL.RESERVE cr:__rand_int__ 1000 1 2 1 MAXWAIT 1
run "CL.THROTTLEALL GCRA + FW" throttle_all::CL_THROTTLEALL::entry "FLOOR.TWO, 12 words" 0.95 \
  CL.THROTTLEALL 2 '{t:__rand_int__}a' '{t:__rand_int__}b' GCRA 1000 1 2 FW 100000 86400 ALIGN
run "FW.INCR k 100 60" fixed::FW_INCR::entry "FLOOR.ONE, 4 words" 0.97 \
  FW.INCR fw:__rand_int__ 100 60
run "FW.INCR k 100 day TZ +05:30" fixed::FW_INCR::entry "FLOOR.ONE, 6 words" 0.97 \
  FW.INCR fd:__rand_int__ 100 day TZ +05:30
run "SW.ALLOW k 100 60" sliding::SW_ALLOW::entry "FLOOR.TYPE, 4 words" 0.95 \
  SW.ALLOW sw:__rand_int__ 100 60
run "SW.ALLOW k 100 60 APPROX" sliding::SW_ALLOW::entry "FLOOR.TYPE, 5 words" 0.95 \
  SW.ALLOW sa:__rand_int__ 100 60 APPROX
# Refusal-heavy: most calls refused (a key gets about 20 calls).
run "CL.THROTTLE k 15 30 60 1" throttle::CL_THROTTLE::entry "FLOOR.ONE, 6 words" - \
  CL.THROTTLE rc:__rand_int__ 15 30 60 1
run "CL.THROTTLE k 1 1 60 1, refused" throttle::CL_THROTTLE::entry "FLOOR.ONE, 6 words" - \
  CL.THROTTLE rr:__rand_int__ 1 1 60 1
run "CL.PEEK k 15 30 60" throttle::CL_PEEK::entry "FLOOR.ONE, 6 words" - \
  CL.PEEK rc:__rand_int__ 15 30 60
run "CL.RESERVE k 15 30 60 MAXWAIT 1" reserve::CL_RESERVE::entry "FLOOR.ONE, 8 words" - \
  CL.RESERVE re:__rand_int__ 15 30 60 MAXWAIT 1
run "CL.THROTTLEALL GCRA 15 + FW 100" throttle_all::CL_THROTTLEALL::entry "FLOOR.TWO, 12 words" - \
  CL.THROTTLEALL 2 '{r:__rand_int__}a' '{r:__rand_int__}b' GCRA 15 30 60 FW 100 60 ALIGN
run "FW.INCR k 2 60, refused" fixed::FW_INCR::entry "FLOOR.ONE, 4 words" - \
  FW.INCR fr:__rand_int__ 2 60
run "SW.ALLOW k 2 60, refused" sliding::SW_ALLOW::entry "FLOOR.TYPE, 4 words" - \
  SW.ALLOW sr:__rand_int__ 2 60
run "SW.ALLOW k 2 60 APPROX, refused" sliding::SW_ALLOW::entry "FLOOR.TYPE, 5 words" - \
  SW.ALLOW sq:__rand_int__ 2 60 APPROX
run "Lua INCR+EXPIRE fixed window" evalShaCommand - - EVALSHA "$fixed" 1 lf:__rand_int__ 100 60 1
cg_stop
declare -A whole=()
printf '%-36s %12s %12s %12s %8s %6s\n' workload "server" "in command" floor ratio goal
for row in "${rows[@]}"; do
  IFS='|' read -r name fn floor goal <<<"$row"
  [ "$name" = warm-up ] && continue
  counts=$(cg_count "$name" "$fn")
  read -r total inside _ <<<"$counts"
  whole[$name]=$total
  floor_count="" ratio=""
  if [ "$floor" != - ]; then
    floor_count=${whole[$floor]}
    ratio=$(awk -v f="$floor_count" -v c="${whole[$name]}" 'BEGIN { printf "%.3f", f / c }')
  fi
  [ "$goal" = - ] && goal=""
  printf '%-36s %12d %12d %12s %8s %6s\n' "$name" "${whole[$name]}" "$inside" \
    "$floor_count" "$ratio" "$goal"
done
