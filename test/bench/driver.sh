#!/usr/bin/env bash
# What `tokentap bench run` itself costs as a load driver (issue 60's guard rail): N concurrent
# streams against `tokentap sim` on this machine, the driver's CPU per streamed event (user and
# system, from /proc) and, for the open loop, its schedule lag.
#
#   test/bench/driver.sh [build-dir]     LEVELS="500 2000" TOKENS=64 ITL_MS=20 DURATION=15
#
# Each level runs twice: a closed loop of N clients, and an open loop at the rate that holds N
# streams open (N / a stream's length).  The simulator gets its own core's worth (one thread);
# the driver is one process with one thread, as `bench run` always is.  Every request is measured
# by the proxy's decoders and traced, as in any run.  Loopback only; bounded in time.
set -euo pipefail
BUILD=${1:-build}
BIN=$(realpath "$BUILD/tokentap")
LEVELS=${LEVELS:-"500 2000"}
TOKENS=${TOKENS:-64}
ITL_MS=${ITL_MS:-20}
DURATION=${DURATION:-15}
ulimit -n 65536 2>/dev/null || true
WORK=$(mktemp -d /tmp/tokentap-driver-XXXXXX)
"$BIN" sim --listen 127.0.0.1:0 --threads 1 --log-level warn --tokens "$TOKENS" --itl-ms "$ITL_MS" \
  --ttft-ms 50 > "$WORK/sim.out" &
SIM=$!
trap 'kill $SIM 2>/dev/null || true; rm -rf "$WORK"' EXIT
until grep -q ready "$WORK/sim.out"; do sleep 0.1; done
TARGET=http://$(sed -n 's/^ready sim=//p' "$WORK/sim.out")
printf 'synthetic:\n  requests: 1000\n  input_tokens: 100\n' > "$WORK/w.yaml"
# A stream lasts TTFT + (TOKENS - 1) gaps.
STREAM_S=$(awk -v t="$TOKENS" -v i="$ITL_MS" 'BEGIN { printf "%.3f", (50 + (t - 1) * i) / 1000 }')
echo "machine: $(nproc) cores; streams of $TOKENS events ${ITL_MS} ms apart; ${DURATION} s a level"
printf '%-28s %9s %9s %12s %12s %10s\n' load requests events "user us/ev" "sys us/ev" "lag p99"
for n in $LEVELS; do
  rate=$(awk -v n="$n" -v s="$STREAM_S" 'BEGIN { printf "%.1f", n / s }')
  for mode in "--concurrency $n" "--rate $rate --arrival poisson"; do
    rm -rf "$WORK/run"
    # The driver's CPU: `times` in the subshell that ran it (its children's user and system).
    # shellcheck disable=SC2086  # mode is two or four words
    cpu=$( { "$BIN" bench run --target "$TARGET" --workload "$WORK/w.yaml" --out "$WORK/run" \
             --model sim-small $mode --duration-s "$DURATION" > "$WORK/bench.out" 2>&1
             echo $? > "$WORK/rc"; times; } | tail -1)
    if [ "$(cat "$WORK/rc")" != 0 ]; then
      echo "bench run failed:"; cat "$WORK/bench.out"; exit 1
    fi
    # "0m3.210s 0m1.234s" -> ticks of 1/100 s
    read -r user sys < <(awk '{ for (i = 1; i <= 2; ++i) { split($i, a, /[ms]/); printf "%d ", (a[1] * 60 + a[2]) * 100 } print "" }' <<< "$cpu")
    python3 - "$WORK/run" "$user" "$sys" 100 "$mode" <<'PY'
import json, sys
run, user, sys_t, hz, mode = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
events = requests = 0
for line in open(run + "/requests.jsonl"):
    r = json.loads(line)
    requests += 1
    events += max(0, r.get("output_tokens") or 0)
lag = json.load(open(run + "/summary.json"))["levels"][0]["schedule_lag_ms"]["p99"]
per = lambda t: t / hz * 1e6 / max(events, 1)
print(f"{mode:28s} {requests:9d} {events:9d} {per(user):12.2f} {per(sys_t):12.2f} {lag:8.3f} ms")
PY
  done
done
