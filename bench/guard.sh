#!/usr/bin/env bash
# The guard on instructions per call: counts a few commands with callgrind
# (4,800 pipelined calls over 250 keys each, on one redis-server run under
# valgrind, started by the test kit) and fails when one costs more than 3%
# over the number recorded in bench/instructions.txt. Counts, not times:
# they repeat within about 1% on any machine with valgrind, loaded or not.
#
# The count of a call is callgrind's inclusive count of the server's
# processInputBuffer per call: reading the request, the command, its
# propagation and reply buffering, without the event loop and the server's
# timers (whose share grows with the wall time valgrind takes, so with the
# machine's load), less the two CONFIG GETs each redis-benchmark run sends
# first and the clock reads (answered by the test kit's clock). The server
# runs on the test kit's clock, stepped by
# 100 ms every 480 calls, so that its decisions do not depend on that wall
# time either.
#
# Before comparing, the guard checks itself: the same counts compared with a
# copy of the record with one number lowered by 10% must fail.
#
# Usage: bench/guard.sh [--record] [redis-server]
#   --record   writes the counts measured into bench/instructions.txt
# GUARD_MODULE=/path/to/libredis_cell.so counts another build (say, of an
# earlier commit) against the same record.
# Needs valgrind, redis-benchmark, target/release/libredis_cell.so (cargo
# build --release -p redis-cell) and the test kit (cargo build -p testkit,
# or $TESTKIT). The numbers hold for the server they were recorded on
# (its version is in the record): another server is an error, never a skip.
set -euo pipefail
cd "$(dirname "$0")/.."
record=false
if [ "${1:-}" = --record ]; then
  record=true
  shift
fi
server=${1:-/usr/bin/redis-server}
recorded=${GUARD_RECORD:-bench/instructions.txt}
limit_percent=3
for tool in valgrind callgrind_annotate callgrind_control redis-benchmark; do
  command -v "$tool" >/dev/null || { echo "bench/guard.sh: $tool is missing (scripts/deps installs valgrind)" >&2; exit 1; }
done
module=${GUARD_MODULE:-$PWD/target/release/libredis_cell.so}
[ -f "$module" ] || { echo "bench/guard.sh: $module is missing: cargo build --release -p redis-cell" >&2; exit 1; }
version=$("$server" --version | sed -n 's/.* v=\([^ ]*\) .*/\1/p')
[ -n "$version" ] || { echo "bench/guard.sh: cannot read the version of $server" >&2; exit 1; }

. bench/testkit.sh
out=$(mktemp -d)
trap '[ -n "${GUARD_KEEP:-}" ] && cp "$out"/cg.out.* "$GUARD_KEEP"/; rm -rf "$out"' EXIT
calls=4800
kit_open
now=1800000000000000000
kit server --server "$server" --module "$module" --clock "$now" \
  --wrap valgrind --wrap --tool=callgrind --wrap --dump-instr=no --wrap "--callgrind-out-file=$out/cg.out"
id=$(field id) port=$(field port) pid=$(field pid) clock=$(text clock) log=$(text log)
# Keys made beforehand, with an expiry, so that neither the keyspace nor its
# table of expiries grows (and rehashes, at a point that depends on the
# random keys) while a workload is counted.
redis-cli -p "$port" EVAL "for i = 1, tonumber(ARGV[1]) do redis.call('SET', 'pre:' .. i, 'x', 'PX', 3600000000) end" 0 10000 >/dev/null
names=()
# run NAME COMMAND...: one workload, dumped on its own.
run() {
  local name=$1
  shift
  workload "$name" 10 100000000 "$calls" 250 "$@"
  names+=("$name")
}
run warm-up CL.THROTTLE w:__rand_int__ 1000 1 2 1
callgrind_control -z "$pid" >/dev/null 2>&1
run CL.THROTTLE CL.THROTTLE cl:__rand_int__ 1000 1 2 1
run CL.THROTTLE-refused CL.THROTTLE cr:__rand_int__ 1 1 60 1
run CL.RESERVE CL.RESERVE cv:__rand_int__ 1000 1 2 1 MAXWAIT 1
run CL.THROTTLEALL CL.THROTTLEALL 2 '{t:__rand_int__}a' '{t:__rand_int__}b' GCRA 1000 1 2 FW 100000 86400 ALIGN
run FW.INCR FW.INCR fw:__rand_int__ 100 60
run SW.ALLOW SW.ALLOW sw:__rand_int__ 100 60
run SW.ALLOW-APPROX SW.ALLOW sa:__rand_int__ 100 60 APPROX
kit stop "$id"
kit_close

measured=$out/measured
for name in "${names[@]}"; do
  [ "$name" = warm-up ] && continue
  file=$(grep -l "^desc: Trigger: .*dump $name\$" "$out"/cg.out.* | sed -n 1p) || true
  [ -n "$file" ] || { echo "bench/guard.sh: callgrind wrote no dump for $name" >&2; exit 1; }
  n=$(callgrind_annotate --inclusive=yes "$file" 2>/dev/null |
    awk '{ f = $0; gsub(",", "", $1) }
      !a && index(f, ":processInputBuffer [") { a = $1 }
      !c && index(f, ":configGetCommand [") { c = $1 }
      f ~ /:(clock_gettime|gettimeofday|time) \[.*libcell_faketime/ { t += $1 }
      END { if (a) print a - c - t }')
  [ -n "$n" ] || { echo "bench/guard.sh: no processInputBuffer in the dump of $name (a server without symbols?)" >&2; exit 1; }
  echo "$name $((n / calls))" >>"$measured"
done

if $record; then
  {
    echo "# Instructions per call (callgrind: processInputBuffer inclusive, less the"
    echo "# clock reads and redis-benchmark's CONFIG GETs), written by"
    echo "# bench/guard.sh --record; bench/guard.sh fails when a count rises more than"
    echo "# $limit_percent% over these."
    echo "server $version"
    cat "$measured"
  } >"$recorded"
  echo "recorded in $recorded:"
  cat "$measured"
  exit 0
fi

# compare RECORD: every measured count against RECORD's; prints a line each
# and fails when one rose more than the limit (or is missing from RECORD).
compare() {
  awk -v limit="$limit_percent" -v version="$version" '
    FNR == NR { if ($1 == "server") server = $2; else if ($1 !~ /^#/) want[$1] = $2; next }
    {
      if (!($1 in want)) { printf "%-22s %8d  not in the record\n", $1, $2; bad = 1; next }
      pct = ($2 - want[$1]) * 100 / want[$1]
      over = pct > limit
      printf "%-22s %8d  recorded %8d  %+6.2f%%%s\n", $1, $2, want[$1], pct, over ? "  ROSE" : ""
      if (over) bad = 1
    }
    END {
      if (server != version) { printf "the record is of server %s, this is %s: record again (bench/guard.sh --record)\n", server, version; bad = 1 }
      exit bad
    }' "$1" "$measured"
}

[ -f "$recorded" ] || { echo "bench/guard.sh: no record at $recorded (bench/guard.sh --record)" >&2; exit 1; }
# The guard's own test: a record one number of which is 10% lower must fail.
lowered=$out/lowered
awk '!done && $1 !~ /^#/ && $1 != "server" { $2 = int($2 * 0.9); done = 1 } { print }' "$recorded" >"$lowered"
if compare "$lowered" >"$out/self-check"; then
  cat "$out/self-check"
  echo "bench/guard.sh: the guard passed a record lowered by 10%: it cannot fail" >&2
  exit 1
fi
grep -q ROSE "$out/self-check" || { cat "$out/self-check"; echo "bench/guard.sh: the lowered record failed for another reason" >&2; exit 1; }
echo "self-check: a record lowered by 10% fails, as it must"
if ! compare "$recorded"; then
  echo "bench/guard.sh: instructions per call rose more than $limit_percent% over $recorded" >&2
  exit 1
fi
echo "no command costs more than $limit_percent% over its recorded count"
