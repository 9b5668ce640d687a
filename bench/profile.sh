#!/usr/bin/env bash
# Instructions per call inside each command, counted by callgrind (exact and
# repeatable, unlike timings on a shared machine): 10,000 calls of each
# command over 1,000 keys against one redis-server run under valgrind, the
# floor module loaded beside redis-cell.
# Usage: bench/profile.sh [redis-server]   (needs valgrind, redis-benchmark)
set -euo pipefail
cd "$(dirname "$0")/.."
server=${1:-redis-server}
cargo build --release -q -p redis-cell -p cell-bench
out=$(mktemp -d)
port=7399
valgrind --tool=callgrind --callgrind-out-file="$out/cg.out" \
  "$server" --port "$port" --save "" --appendonly no \
  --loadmodule "$PWD/target/release/libredis_cell.so" \
  --loadmodule "$PWD/target/release/libcell_floor.so" >"$out/server.log" 2>&1 &
for _ in $(seq 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.2; done
calls=10000
run() { redis-benchmark -p "$port" -c 1 -n "$calls" -r 1000 -q "$@" >/dev/null; }
run INCR n:__rand_int__
run FLOOR.ONE f:__rand_int__
run FLOOR.TWO {f:__rand_int__}:a {f:__rand_int__}:b
run CL.THROTTLE cl:__rand_int__ 15 30 60 1
run CL.PEEK cl:__rand_int__ 15 30 60
run CL.THROTTLEALL 2 {t:__rand_int__}:a {t:__rand_int__}:b GCRA 15 30 60 FW 100 60 ALIGN
run SW.ALLOW sw:__rand_int__ 100 60
run FW.INCR fw:__rand_int__ 100 60
redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
wait || true
callgrind_annotate --inclusive=yes "$out/cg.out" 2>/dev/null | awk -v calls="$calls" '
  function row(name) { gsub(",", "", $1); printf "%-15s %6d instructions per call\n", name, $1 / calls }
  /incrCommand \[/ { row("INCR") }
  /cell_floor::one \[/ { row("FLOOR.ONE") }
  /cell_floor::two \[/ { row("FLOOR.TWO") }
  /commands::cl_throttle \[/ { row("CL.THROTTLE") }
  /commands::cl_peek \[/ { row("CL.PEEK") }
  /commands::cl_throttleall \[/ { row("CL.THROTTLEALL") }
  /commands::sw_allow \[/ { row("SW.ALLOW") }
  /commands::fw_incr \[/ { row("FW.INCR") }
'
if [ -n "${KEEP_PROFILE:-}" ]; then cp "$out/cg.out" "$KEEP_PROFILE"; fi
rm -rf "$out"
