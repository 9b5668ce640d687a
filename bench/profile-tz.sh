#!/usr/bin/env bash
# Instructions per FW.INCR call inside the command, counted by callgrind, for
# calendar windows at a fixed offset and in a named zone: one redis-server
# run under valgrind per workload (all are the same command, so they cannot
# share a run), 10,000 calls over 1,000 keys (most calls find their window)
# and over ten million keys (almost every call starts a window, which is
# where the zone's changes of offset are looked at). Counting starts after
# one warm-up call, which reads the zone's file.
# Usage: bench/profile-tz.sh [redis-server]   (needs valgrind, redis-benchmark)
set -euo pipefail
cd "$(dirname "$0")/.."
server=${1:-redis-server}
cargo build --release -q -p redis-cell
calls=10000
port=7398
for keys in 1000 10000000; do
  for unit in hour day month; do
    for tz in +01:00 Europe/Berlin; do
      out=$(mktemp -d)
      valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$out/cg.out" \
        "$server" --port "$port" --save "" --appendonly no \
        --loadmodule "$PWD/target/release/libredis_cell.so" >"$out/server.log" 2>&1 &
      pid=$!
      for _ in $(seq 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.2; done
      redis-cli -p "$port" FW.INCR warm-up 100 "$unit" TZ "$tz" >/dev/null
      callgrind_control -i on "$pid" >/dev/null 2>&1
      redis-benchmark -p "$port" -c 1 -n "$calls" -r "$keys" -q \
        FW.INCR fw:__rand_int__ 100 "$unit" TZ "$tz" >/dev/null
      redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
      wait || true
      n=$(callgrind_annotate --inclusive=yes "$out/cg.out" 2>/dev/null |
        awk '/fixed::FW_INCR::entry \[/ { gsub(",", "", $1); print $1 }')
      printf '%-9s keys %-6s TZ %-14s %6d instructions per call\n' "$keys" "$unit" "$tz" $((n / calls))
      rm -rf "$out"
    done
  done
done
