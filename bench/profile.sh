#!/usr/bin/env bash
# Instructions per call inside each command, counted by callgrind (exact and
# repeatable, unlike timings on a shared machine): 10,000 calls of each
# command over 1,000 keys against one redis-server run under valgrind.
# Usage: bench/profile.sh   (needs valgrind, redis-server, redis-benchmark)
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q
out=$(mktemp -d)
port=7399
valgrind --tool=callgrind --callgrind-out-file="$out/cg.out" \
  redis-server --port "$port" --save "" --appendonly no \
  --loadmodule "$PWD/target/release/libredis_cell.so" >"$out/server.log" 2>&1 &
for _ in $(seq 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.2; done
calls=10000
run() { redis-benchmark -p "$port" -c 1 -n "$calls" -r 1000 -q "$@" >/dev/null; }
run INCR n:__rand_int__
run CL.THROTTLE cl:__rand_int__ 15 30 60 1
run CL.PEEK cl:__rand_int__ 15 30 60
run SW.ALLOW sw:__rand_int__ 100 60
run FW.INCR fw:__rand_int__ 100 60
redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
wait || true
callgrind_annotate --inclusive=yes "$out/cg.out" 2>/dev/null | awk -v calls="$calls" '
  /incrCommand \[/ { gsub(",", "", $1); printf "INCR         %6d instructions per call\n", $1 / calls }
  /commands::cl_throttle \[/ { gsub(",", "", $1); printf "CL.THROTTLE  %6d instructions per call\n", $1 / calls }
  /commands::cl_peek \[/ { gsub(",", "", $1); printf "CL.PEEK      %6d instructions per call\n", $1 / calls }
  /commands::sw_allow \[/ { gsub(",", "", $1); printf "SW.ALLOW     %6d instructions per call\n", $1 / calls }
  /commands::fw_incr \[/ { gsub(",", "", $1); printf "FW.INCR      %6d instructions per call\n", $1 / calls }
  /RM_Replicate \[/ { gsub(",", "", $1); printf "(RedisModule_Replicate, all commands: %d instructions in total)\n", $1 }
' 
rm -rf "$out"
