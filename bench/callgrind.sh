# Instruction counts per call for the profile scripts (bench/profile.sh,
# bench/profile-twin.sh), sourced after bench/testkit.sh: one server run
# under callgrind on the test kit's clock, workloads of `calls` pipelined
# calls over 1,000 keys, each dumped on its own, and the count of a dump.

calls=20000

# cg_server OPTION...: starts a server under callgrind (the kit's server
# options: --server, --module or --no-module) on the kit's clock; sets id,
# port, pid, clock, log, now and cg_out (the dumps' directory), and makes
# the keyspace large beforehand, with expiries, so that neither the keyspace
# nor its table of expiries grows (and rehashes, at a point that depends on
# the random keys) while a workload is counted.
cg_server() {
  cg_out=$(mktemp -d)
  now=1800000000000000000
  kit server "$@" --clock "$now" \
    --wrap valgrind --wrap --tool=callgrind --wrap --dump-instr=no --wrap "--callgrind-out-file=$cg_out/cg.out"
  id=$(field id) port=$(field port) pid=$(field pid) clock=$(text clock) log=$(text log)
  redis-cli -p "$port" EVAL "for i = 1, tonumber(ARGV[1]) do redis.call('SET', 'pre:' .. i, 'x', 'PX', 3600000000) end" 0 70000 >/dev/null
}

# cg_workload NAME COMMAND...: `calls` calls of COMMAND (redis-benchmark
# -c 1 -P 16 -r 1000, pipelined as bench/run.py sends them) in 25 chunks,
# the clock stepped by 80 ms before each (a workload spans 2 s of the
# kit's clock, whatever the wall time valgrind takes), then the counters
# dumped as NAME.
cg_workload() {
  local name=$1
  shift
  workload "$name" 25 80000000 "$calls" 1000 "$@"
}

# cg_count NAME [FUNCTION]: the instructions per call of workload NAME, as
# "server inside": the server's handling of a call (callgrind's inclusive
# count of processInputBuffer: reading and parsing the request, the
# command, propagation, the reply), less the two CONFIG GETs each
# redis-benchmark run sends first and the clock reads (answered by the test
# kit's clock, testkit/faketime.c, whose reading of its file is no part of
# a command's cost); FUNCTION's inclusive count (0 without one; the clock
# reads included); and the clock reads alone. The
# server's timers (serverCron) and event loop are left out: their share per
# call grows with the wall time a call takes under valgrind, so with the
# machine's load.
cg_count() {
  local name=$1 fn=${2:--} file counts total inside
  file=$(grep -l "^desc: Trigger: .*dump $name\$" "$cg_out"/cg.out.* | sed -n 1p) || true
  [ -n "$file" ] || { echo "callgrind wrote no dump for $name" >&2; exit 1; }
  counts=$(callgrind_annotate --inclusive=yes "$file" 2>/dev/null |
    awk -v fn="$fn" '{ f = $0; gsub(",", "", $1) }
      !a && index(f, ":processInputBuffer [") { a = $1 }
      !c && index(f, ":configGetCommand [") { c = $1 }
      f ~ /:(clock_gettime|gettimeofday|time) \[.*libcell_faketime/ { t += $1 }
      !b && fn != "-" && index(f, fn " [") { b = $1 }
      END { printf "%.0f %.0f %.0f\n", a - c - t, b, t }')
  read -r total inside clock_reads <<<"$counts"
  [ "$total" -gt 0 ] || { echo "no processInputBuffer in the dump of $name (a server without symbols?)" >&2; exit 1; }
  echo "$((total / calls)) $((inside / calls)) $((clock_reads / calls))"
}

# cg_stop: stops the server and the kit (the server writes no last dump:
# every workload is in its own).
cg_stop() {
  kit stop "$id"
  kit_close
}

# At the end the dumps go, kept in $KEEP_PROFILE when set (for
# callgrind_annotate --inclusive=yes DIR/cg.out.N).
cg_cleanup() {
  [ -n "${cg_out:-}" ] || return 0
  if [ -n "${KEEP_PROFILE:-}" ]; then cp "$cg_out"/cg.out.* "$KEEP_PROFILE"/ 2>/dev/null || true; fi
  rm -rf "$cg_out"
}
trap cg_cleanup EXIT
