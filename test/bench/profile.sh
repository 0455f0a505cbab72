#!/usr/bin/env bash
# Instruction profile of the proxy on a fixed streaming workload (issue 8).
#
#   test/bench/profile.sh [BUILD_DIR] [HOOKS]
#
# Runs the simulator, then `tokentap proxy` (one I/O thread) under valgrind's callgrind, drives
# STREAMS (10) keep-alive clients for DURATION (20) seconds of TOKENS-event (100) streams through it, and
# prints instructions per forwarded event plus the top functions (inclusive and self).  Instruction
# counts do not depend on what else the machine runs, so two builds can be compared on a busy box.
# HOOKS defaults to everything on: "timing, steps, cache, metrics, trace".
# The callgrind output stays in $WORK (printed) for callgrind_annotate / kcachegrind.
# TOOL=cachegrind simulates the caches instead (D1 and last-level misses per event, by function):
# with many streams (STREAMS=300 ITL_MS=20) it shows what per-stream state costs in misses.
# PLAIN=1 profiles plain (non-streamed) requests instead: CLIENTS (20) keep-alive clients send
# REQUESTS (100) chat completions each (python3's http.client), and the figures are per request,
# the proxy's start and stop (a run with one request) taken out.
# VALGRIND_ARGS go to valgrind: "--LL=2097152,16,64" makes the simulated last level this
# machine's 2 MiB L2 (valgrind takes the real last level, here a VM's 480 MiB "L3", which nothing
# misses); with TOOL=callgrind, "--cache-sim=yes" adds misses to the call graph.
set -euo pipefail
BUILD=${1:-build}
HOOKS=${2-timing, steps, cache, metrics, trace}
STREAMS=${STREAMS:-10}
DURATION=${DURATION:-20}
ITL_MS=${ITL_MS:-5}
TOKENS=${TOKENS:-100}
TOOL=${TOOL:-callgrind}
BIN=$(realpath "$BUILD/tokentap")
LOADGEN=$(realpath "$BUILD/test/tokentap-loadgen")
command -v valgrind >/dev/null || { echo "profile.sh: needs valgrind (apt-get install valgrind)" >&2; exit 2; }
WORK=$(mktemp -d /tmp/tokentap-profile-XXXXXX)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT
wait_line() {  # $1 file, $2 pattern
  for _ in $(seq 1 600); do grep -q "$2" "$1" 2>/dev/null && return 0; sleep 0.1; done
  echo "profile.sh: timed out waiting for '$2' in $1" >&2; cat "$1" >&2; exit 1
}

sim_args=()
[ "${PLAIN:-0}" = 1 ] && sim_args=(--ttft-ms 1 --itl-ms 0 --tokens 16)  # short answers, at once
"$BIN" sim --listen 127.0.0.1:0 --threads 1 --log-level warn "${sim_args[@]}" > "$WORK/sim.out" &
pids+=($!)
wait_line "$WORK/sim.out" ready
SIM=$(sed -n 's/^ready sim=//p' "$WORK/sim.out")

echo "hooks: [$HOOKS]" > "$WORK/proxy.yaml"
valgrind --tool="$TOOL" ${VALGRIND_ARGS:-} --"$TOOL"-out-file="$WORK/$TOOL.out" \
  "$BIN" proxy --config "$WORK/proxy.yaml" --listen 127.0.0.1:0 --admin 127.0.0.1:0 --threads 1 \
  --no-access-log --log-level warn --upstream "http://$SIM" --trace-dir "$WORK/traces" \
  > "$WORK/proxy.out" 2> "$WORK/valgrind.err" &
PROXY_PID=$!
wait_line "$WORK/proxy.out" "^ready"
PROXY=$(sed -n 's/^ready proxy=\([^ ]*\).*/\1/p' "$WORK/proxy.out")

if [ "${PLAIN:-0}" = 1 ]; then
  plain_run() {  # $1 clients, $2 requests each: plain chat completions on keep-alive connections
    python3 - "$PROXY" "$1" "$2" <<'PY'
import http.client, json, sys, threading
host, port = sys.argv[1].rsplit(":", 1)
body = json.dumps({"model": "sim-small", "max_tokens": 16,
                   "messages": [{"role": "user", "content": "hi there"}]})
def client():
    c = http.client.HTTPConnection(host, int(port))
    for _ in range(int(sys.argv[3])):
        c.request("POST", "/v1/chat/completions", body, {"content-type": "application/json"})
        r = c.getresponse(); r.read()
        assert r.status == 200, r.status
threads = [threading.Thread(target=client) for _ in range(int(sys.argv[2]))]
[t.start() for t in threads]; [t.join() for t in threads]
PY
  }
  plain_run "${CLIENTS:-20}" "${REQUESTS:-100}"
  kill -TERM "$PROXY_PID"
  wait "$PROXY_PID" || true
  # The same proxy with one request: its start and stop, taken out of the figures.
  valgrind --tool="$TOOL" ${VALGRIND_ARGS:-} --"$TOOL"-out-file="$WORK/$TOOL.base" \
    "$BIN" proxy --config "$WORK/proxy.yaml" --listen 127.0.0.1:0 --admin 127.0.0.1:0 \
    --threads 1 --no-access-log --log-level warn --upstream "http://$SIM" \
    --trace-dir "$WORK/traces-base" > "$WORK/proxy.out" 2>> "$WORK/valgrind.err" &
  PROXY_PID=$!
  wait_line "$WORK/proxy.out" "^ready"
  PROXY=$(sed -n 's/^ready proxy=\([^ ]*\).*/\1/p' "$WORK/proxy.out")
  plain_run 1 1
  kill -TERM "$PROXY_PID"
  wait "$PROXY_PID" || true
  n=$(( ${CLIENTS:-20} * ${REQUESTS:-100} ))
  total=$(grep -E '^totals:' "$WORK/$TOOL.out" | awk '{print $2}')
  base=$(grep -E '^totals:' "$WORK/$TOOL.base" | awk '{print $2}')
  echo "workload: $n plain requests, ${CLIENTS:-20} keep-alive clients, hooks [$HOOKS]"
  awk -v t="$total" -v b="$base" -v n="$n" 'BEGIN {
    printf "instructions per request: %.0f (start and stop taken out)\n", (t - b) / (n - 1) }'
  echo "$TOOL output: $WORK/$TOOL.out (inclusive: callgrind_annotate --inclusive=yes)"
  callgrind_annotate --inclusive=no "$WORK/$TOOL.out" 2>/dev/null | sed -n '/^Ir/,$p' | head -40
  trap - EXIT
  cleanup
  exit 0
fi

"$LOADGEN" --target "$PROXY" --concurrency "$STREAMS" --duration-s "$DURATION" --tokens "$TOKENS" \
  --itl-ms "$ITL_MS" --ttft-ms 10 --threads 1 > "$WORK/load.out" 2>&1
kill -TERM "$PROXY_PID"
wait "$PROXY_PID" || true

events=$(sed -n 's/.* events=\([0-9]*\).*/\1/p' "$WORK/load.out")
echo "workload: $STREAMS streams x $TOKENS events, ${ITL_MS} ms apart, ${DURATION}s, hooks [$HOOKS]"
echo "events forwarded: $events"
if [ "$TOOL" = cachegrind ]; then
  # summary: Ir I1mr ILmr Dr D1mr DLmr Dw D1mw DLmw
  read -r -a t <<<"$(sed -n 's/^summary: //p' "$WORK/cachegrind.out")"
  awk -v e="$events" -v ir="${t[0]}" -v d1="$(( t[4] + t[7] ))" -v ll="$(( t[5] + t[8] ))" 'BEGIN {
    printf "per event: %.0f instructions, %.0f D1 misses, %.1f last-level misses\n", ir/e, d1/e, ll/e }'
  echo "cachegrind output: $WORK/cachegrind.out"
  cg_annotate --sort=DLmr:1,DLmw:1 "$WORK/cachegrind.out" 2>/dev/null | sed -n '/^Ir/,$p' | head -40
else
  total=$(grep -E '^totals:' "$WORK/callgrind.out" | awk '{print $2}')
  echo "instructions: $total ($(awk -v t="$total" -v e="$events" 'BEGIN{printf "%.0f", t/e}') per event)"
  echo "callgrind output: $WORK/callgrind.out"
  callgrind_annotate --inclusive=no "$WORK/callgrind.out" 2>/dev/null | sed -n '/^Ir/,$p' | head -40
fi
trap - EXIT
cleanup
