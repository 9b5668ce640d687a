#!/usr/bin/env bash
# Instructions per call, counted by callgrind (exact and repeatable, unlike
# timings on a shared machine): each workload sends 20,000 calls over 1,000
# keys (redis-benchmark -c 1 -P 16, pipelined as bench/run.py sends them) to
# one redis-server run under valgrind (started by the test kit,
# bench/testkit.sh) with the floor module loaded beside redis-cell. The
# counters are dumped after each workload, so every row is that workload
# alone. Two columns: the whole server per call (reading and parsing the
# request, the command, propagation, the reply: what throughput follows),
# and inside the command's own function.
# Usage: bench/profile.sh [redis-server]   (needs valgrind, redis-benchmark)
# PROFILE_MODULE=/path/to/libredis_cell.so profiles another build (say, of
# an earlier commit) against the same floor.
set -euo pipefail
cd "$(dirname "$0")/.."
server=${1:-redis-server}
. bench/testkit.sh
cargo build --release -q -p redis-cell -p cell-bench
cargo build -q -p testkit
out=$(mktemp -d)
calls=20000
module=${PROFILE_MODULE:-$PWD/target/release/libredis_cell.so}
kit_open
kit server --server "$server" --module "$module" --module "$PWD/target/release/libcell_floor.so" \
  --wrap valgrind --wrap --tool=callgrind --wrap --dump-instr=no --wrap "--callgrind-out-file=$out/cg.out"
id=$(field id) port=$(field port) pid=$(field pid)
fixed=$(redis-cli -p "$port" script load "$(cat bench/lua/fixed_window.lua)")
rows=()
# run NAME FUNCTION COMMAND...: FUNCTION is the command's entry point as
# callgrind names it (its inclusive count is the second column).
run() {
  local name=$1 fn=$2
  shift 2
  redis-benchmark -h 127.0.0.1 -p "$port" -c 1 -P 16 -n "$calls" -r 1000 -q "$@" >/dev/null
  callgrind_control -d "$name" "$pid" >/dev/null 2>&1
  rows+=("$name|$fn")
}
run warm-up - FLOOR.ONE f:__rand_int__
callgrind_control -z "$pid" >/dev/null 2>&1
run INCR incrCommand INCR n:__rand_int__
run FLOOR.ONE cell_floor::one FLOOR.ONE f:__rand_int__
run FLOOR.TWO cell_floor::two FLOOR.TWO '{f:__rand_int__}:a' '{f:__rand_int__}:b'
run FLOOR.TYPE cell_floor::typed FLOOR.TYPE ft:__rand_int__
# The floors with as many arguments as the commands below (ignored words).
run "FLOOR.ONE, 6 arguments" cell_floor::one FLOOR.ONE f:__rand_int__ 15 30 60 1
run "FLOOR.TWO, 13 arguments" cell_floor::two \
  FLOOR.TWO '{f:__rand_int__}:a' '{f:__rand_int__}:b' GCRA 15 30 60 FW 100 60 ALIGN
run "FLOOR.TYPE, 4 arguments" cell_floor::typed FLOOR.TYPE ft:__rand_int__ 100 60
run CL.THROTTLE throttle::CL_THROTTLE::entry CL.THROTTLE cl:__rand_int__ 15 30 60 1
run CL.PEEK throttle::CL_PEEK::entry CL.PEEK cl:__rand_int__ 15 30 60
run CL.RESERVE reserve::CL_RESERVE::entry CL.RESERVE cr:__rand_int__ 15 30 60 MAXWAIT 1
run "CL.THROTTLEALL GCRA + FW" throttle_all::CL_THROTTLEALL::entry \
  CL.THROTTLEALL 2 '{t:__rand_int__}:a' '{t:__rand_int__}:b' GCRA 15 30 60 FW 100 60 ALIGN
run SW.ALLOW sliding::SW_ALLOW::entry SW.ALLOW sw:__rand_int__ 100 60
run "SW.ALLOW APPROX" sliding::SW_ALLOW::entry SW.ALLOW sa:__rand_int__ 100 60 APPROX
run FW.INCR fixed::FW_INCR::entry FW.INCR fw:__rand_int__ 100 60
run "Lua INCR+EXPIRE fixed window" evalShaCommand EVALSHA "$fixed" 1 lf:__rand_int__ 100 60 1
# Every row is in its own dump: the server is killed without a last one.
kit stop "$id"
kit_close
printf '%-30s %14s %14s\n' workload "whole server" "in the command"
for row in "${rows[@]}"; do
  name=${row%%|*} fn=${row#*|}
  file=$(grep -l "^desc: Trigger: .*dump $name\$" "$out"/cg.out.* | sed -n 1p) || true
  [ -n "$file" ] || { echo "callgrind wrote no dump for $name" >&2; exit 1; }
  [ "$name" = warm-up ] && continue
  total=$(awk '/^(summary|totals):/ { print $2; exit }' "$file")
  inside=$(callgrind_annotate --inclusive=yes "$file" 2>/dev/null |
    awk -v fn="$fn" '{ f = $0; gsub(",", "", $1) } !found && index(f, fn " [") { print $1; found = 1 }')
  printf '%-30s %14d %14d\n' "$name" $((total / calls)) $((${inside:-0} / calls))
done
if [ -n "${KEEP_PROFILE:-}" ]; then cp "$out"/cg.out.* "$KEEP_PROFILE"/; fi
rm -rf "$out"
