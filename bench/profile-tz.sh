#!/usr/bin/env bash
# Instructions per FW.INCR call inside the command, counted by callgrind, for
# calendar windows at a fixed offset and in a named zone: one redis-server
# run under valgrind per workload (started by the test kit, bench/testkit.sh;
# all are the same command, so they cannot share a run), 10,000 calls over
# 1,000 keys (most calls find their window) and over ten million keys
# (almost every call starts a window, which is where the zone's changes of
# offset are looked at). Counting starts after one warm-up call, which
# reads the zone's file.
# Usage: bench/profile-tz.sh [redis-server]   (needs valgrind, redis-benchmark)
set -euo pipefail
cd "$(dirname "$0")/.."
server=${1:-redis-server}
. bench/testkit.sh
cargo build --release -q -p redis-cell
cargo build -q -p testkit
calls=10000
kit_open
for keys in 1000 10000000; do
  for unit in hour day month; do
    for tz in +01:00 Europe/Berlin; do
      out=$(mktemp -d)
      kit server --server "$server" --module "$PWD/target/release/libredis_cell.so" \
        --wrap valgrind --wrap --tool=callgrind --wrap --instr-atstart=no \
        --wrap "--callgrind-out-file=$out/cg.out"
      id=$(field id) port=$(field port) pid=$(field pid)
      redis-cli -p "$port" FW.INCR warm-up 100 "$unit" TZ "$tz" >/dev/null
      callgrind_control -i on "$pid" >/dev/null 2>&1
      redis-benchmark -p "$port" -c 1 -n "$calls" -r "$keys" -q \
        FW.INCR fw:__rand_int__ 100 "$unit" TZ "$tz" >/dev/null
      # The counts are dumped before the server is killed (which writes none).
      callgrind_control -d workload "$pid" >/dev/null 2>&1
      kit stop "$id"
      [ -f "$out/cg.out.1" ] || { echo "callgrind wrote no dump ($keys keys, $unit, $tz)" >&2; exit 1; }
      n=$(callgrind_annotate --inclusive=yes "$out/cg.out.1" 2>/dev/null |
        awk '/fixed::FW_INCR::entry \[/ { gsub(",", "", $1); print $1 }')
      printf '%-9s keys %-6s TZ %-14s %6d instructions per call\n' "$keys" "$unit" "$tz" $((n / calls))
      rm -rf "$out"
    done
  done
done
kit_close
