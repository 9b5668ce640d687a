# The test kit for the profile scripts, sourced: one `testkit serve`
# coprocess (testkit/src/serve.rs), a request a line on its input, one JSON
# answer a line on its output. When its input closes (kit_close, or this
# shell's exit), the kit kills every server it started.
# The kit is $TESTKIT, or target/debug/testkit (cargo build -p testkit).

kit_open() {
  local binary=${TESTKIT:-$PWD/target/debug/testkit}
  [ -x "$binary" ] || { echo "the test kit is missing at $binary: run cargo build -p testkit" >&2; exit 1; }
  coproc KIT { "$binary" serve; }
}

# kit WORD...: one request; its answer in $answer. An error answer ends the
# script (with the server's log).
kit() {
  local word
  for word in "$@"; do
    case $word in '' | *[[:space:]]*)
      echo "the kit's requests are words without spaces: '$word'" >&2
      exit 1
      ;;
    esac
  done
  echo "$*" >&"${KIT[1]}"
  IFS= read -r answer <&"${KIT[0]}" || { echo "testkit serve exited before answering: $*" >&2; exit 1; }
  case $answer in *'"error":'*)
    printf 'testkit: %s:\n%b\n' "$*" "$answer" >&2
    exit 1
    ;;
  esac
}

# field NAME: a number in the last answer (id, port, pid).
field() { sed -n "s/.*\"$1\":\([0-9]*\).*/\1/p" <<<"$answer"; }

# Closes the kit's input and waits until it has stopped its servers.
kit_close() {
  local input=${KIT[1]} pid=$KIT_PID
  exec {input}>&-
  wait "$pid"
}

# text NAME: a string in the last answer (dir, log, clock).
text() { sed -n "s/.*\"$1\":\"\([^\"]*\)\".*/\1/p" <<<"$answer"; }

# set_clock FILE NANOS: the instant a server started with --clock sees
# (testkit/faketime.c's format, written in place: the file is never empty).
set_clock() {
  printf '%020d %020d\n' "$2" "$2" 1<>"$1"
}

# workload NAME CHUNKS STEP CALLS KEYS WORD...: CALLS calls of WORD... over
# KEYS random keys (redis-benchmark, pipelined 16 deep) in CHUNKS runs, the
# server's clock stepped by STEP ns before each run; then callgrind's
# counters are dumped under NAME. Uses the server's $port, $pid, $log and
# clock file $clock, and moves $now.
workload() {
  local name=$1 chunks=$2 step=$3 calls=$4 keys=$5 chunk
  shift 5
  for chunk in $(seq "$chunks"); do
    now=$((now + step))
    set_clock "$clock" "$now"
    redis-benchmark -h 127.0.0.1 -p "$port" -c 1 -P 16 -n $((calls / chunks)) -r "$keys" -q "$@" >/dev/null || {
      echo "$0: redis-benchmark failed on $name; the server's log:" >&2
      tail -40 "$log" >&2
      exit 1
    }
  done
  callgrind_control -d "$name" "$pid" >/dev/null 2>&1
}
