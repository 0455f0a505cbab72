#!/usr/bin/env bash
# Paired A/B of tokentap builds and hook sets under the same streaming load (issue 8).
#
#   BIN_a=old/tokentap BIN_b=build/tokentap test/bench/ab.sh [build-dir]
#   MODES="a:full b:full"  (BUILD:HOOKS; HOOKS = full | notrace | off; or `nginx`)  ROUNDS=4
#   ENV_b="GLIBC_TUNABLES=..."  (environment for build b's processes; same binary twice works)
#   STREAMS=300 TOKENS=100 ITL_MS=20 DURATION=15  FRESH=0  SPREAD_MS=0  PIN=0
#
# On a machine whose neighbours move CPU figures by ±10 % from one minute to the next, medians of
# a few rounds (compare.sh) cannot tell a 2 % change; runs of the two builds taken back to back
# can.  Each round runs every mode once, on processes started once — odd rounds in the order
# given, even rounds reversed (the mode that ran first in a round measured ~1 µs per event more
# than the same binary run second: use an even ROUNDS).  Per run it prints the CPU per forwarded
# event of the whole process, split into the I/O thread's user and system time and the rest
# (the trace writer), the context switches per event and the load generator's event latency
# (P50 / P99, µs).  At the end: the per-round differences of each mode against the first one, in
# all and per part, each with its mean and 95 % confidence interval, and the per-round ratio of
# the totals (with MODES="nginx a:full": the CPU target, tokentap's cost over nginx's) — printed
# by test/bench/pool.sh, which pools several saved runs the same way.
# FRESH=1 starts every run on a new proxy process instead: a kept process keeps its heap layout
# (where its streams' state landed in the caches) for all its rounds, so each mode samples one
# layout.  Either way 8 rounds resolve ~±0.7 µs per event at best here, and the machine's
# neighbours can tilt a whole comparison (BENCHMARKS.md, round 9): repeat before believing one.
# A mode `nginx` is nginx as a plain streaming reverse proxy (test/bench/nginx.sh, one worker,
# NGINX=/usr/sbin/nginx), measured the same way (its worker's time; the master's is ~0): with
# MODES="nginx a:full" the differences are the tokentap's cost over nginx's, run by run, where
# compare.sh's five modes per round put minutes between the two.
# SPREAD_MS and PIN as in compare.sh: stream starts spread over that many ms (0: together, so
# events arrive in bursts of STREAMS); PIN=1 puts the proxies on the last core and the simulator
# and load generator on the others.
# The simulator and load generator come from build-dir (default build).
set -euo pipefail
export LC_ALL=C
BUILD=${1:-build}
MODES=${MODES:-"a:full b:full"}
ROUNDS=${ROUNDS:-4}
STREAMS=${STREAMS:-300}
TOKENS=${TOKENS:-100}
ITL_MS=${ITL_MS:-20}
DURATION=${DURATION:-15}
SIMBIN=$(realpath "$BUILD/tokentap")
LOADGEN=$(realpath "$BUILD/test/tokentap-loadgen")
HZ=$(getconf CLK_TCK)
NGINX=${NGINX:-/usr/sbin/nginx}
# shellcheck source=test/bench/nginx.sh
. "$(dirname "$0")/nginx.sh"
WORK=$(mktemp -d /tmp/tokentap-ab-XXXXXX)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT
wait_line() { until grep -q "$2" "$1" 2>/dev/null; do sleep 0.1; done; }
LOAD_CPUS=() PROXY_CPUS=()
if [ "${PIN:-0}" = 1 ]; then
  last=$(($(nproc) - 1))
  LOAD_CPUS=(taskset -c "0-$((last - 1))") PROXY_CPUS=(taskset -c "$last")
fi

"${LOAD_CPUS[@]}" "$SIMBIN" sim --listen 127.0.0.1:0 --threads 1 --log-level warn > "$WORK/sim.out" &
pids+=($!)
wait_line "$WORK/sim.out" ready
SIM=$(sed -n 's/^ready sim=//p' "$WORK/sim.out")
echo "hooks: [timing, steps, cache, metrics, trace]" > "$WORK/full.yaml"
echo "hooks: [timing, steps, cache, metrics]" > "$WORK/notrace.yaml"
echo "hooks: []" > "$WORK/off.yaml"

declare -A PID ADDR STOP
start_nginx() {
  local port
  port=$(free_port)
  nginx_conf "$WORK/nginx" "$SIM" "$port"
  "${PROXY_CPUS[@]}" "$NGINX" -p "$WORK/nginx" -c "$WORK/nginx/nginx.conf" -g 'daemon off;' &
  pids+=($!)
  STOP[nginx]=$!
  until PID[nginx]=$(pgrep -P "${STOP[nginx]}") && (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do
    sleep 0.1
  done
  ADDR[nginx]=127.0.0.1:$port
}
start_proxy() {  # $1 mode
  if [ "$1" = nginx ]; then start_nginx; return; fi
  local m=$1 b=${1%%:*} hooks=${1#*:}
  local var=BIN_$b
  local bin=${!var:?"set BIN_$b to a tokentap binary"}
  [ -f "$WORK/$hooks.yaml" ] || { echo "ab.sh: hooks must be full, notrace or off: $m" >&2; exit 2; }
  local trace=()
  [ "$hooks" = full ] && trace=(--trace-dir "$WORK/traces-$b")
  local envvar=ENV_$b
  # Emptied first: with FRESH=1 the last run's "ready" line would otherwise be read before the
  # new process truncates the file (an empty address, one run in ~50).
  : > "$WORK/$m.out"
  # shellcheck disable=SC2086  # ENV_x is a list of NAME=value words
  "${PROXY_CPUS[@]}" env ${!envvar:-} "$bin" proxy --config "$WORK/$hooks.yaml" --listen 127.0.0.1:0 --admin 127.0.0.1:0 --threads 1 \
    --no-access-log --log-level warn --upstream "http://$SIM" "${trace[@]}" > "$WORK/$m.out" &
  pids+=($!)
  PID[$m]=$!
  STOP[$m]=$!
  wait_line "$WORK/$m.out" ready
  ADDR[$m]=$(sed -n 's/^ready proxy=\([^ ]*\).*/\1/p' "$WORK/$m.out")
}
stop_proxy() {  # $1 mode
  kill "${STOP[$1]}" 2>/dev/null || true
  wait "${STOP[$1]}" 2>/dev/null || true
}
if [ "${FRESH:-0}" != 1 ]; then
  for m in $MODES; do start_proxy "$m"; done
fi

# Per thread: id, user ticks, system ticks, voluntary and involuntary context switches.
snap() {
  for t in /proc/"$1"/task/*; do
    echo "$(basename "$t") $(awk '{print $14, $15}' "$t/stat")" \
      "$(awk '/^voluntary_ctxt/ {v = $2} /^nonvoluntary_ctxt/ {n = $2} END {print v, n}' "$t/status")"
  done | sort
}

fresh_note=
if [ "${FRESH:-0}" = 1 ]; then fresh_note=" (a new process per run)"; fi
echo "$STREAMS streams x $TOKENS events, $ITL_MS ms apart${SPREAD_MS:+ (starts spread over $SPREAD_MS ms)}," \
  "$DURATION s per run, $ROUNDS round(s)$fresh_note${PROXY_CPUS:+; proxies on cpu ${PROXY_CPUS[2]}}; µs per event"
for r in $(seq 1 "$ROUNDS"); do
  # Every other round runs the modes in reverse order: whichever mode runs first in a round
  # measured ~1 µs per event more than the same binary run second (2026-11-30, 300 streams),
  # so a fixed order is a bias of the size of the changes being judged.  Use an even ROUNDS.
  order=$MODES
  [ $((r % 2)) -eq 0 ] && order=$(echo "$MODES" | tr ' ' '\n' | tac | tr '\n' ' ')
  for m in $order; do
    if [ "${FRESH:-0}" = 1 ]; then start_proxy "$m"; fi
    snap "${PID[$m]}" > "$WORK/before"
    "${LOAD_CPUS[@]}" "$LOADGEN" --target "${ADDR[$m]}" --concurrency "$STREAMS" \
      --duration-s "$DURATION" --tokens "$TOKENS" --itl-ms "$ITL_MS" --ttft-ms 50 --threads 1 \
      --spread-ms "${SPREAD_MS:-0}" > "$WORK/load.out" 2>&1
    snap "${PID[$m]}" > "$WORK/after"
    events=$(sed -n 's/.* events=\([0-9]*\).*/\1/p' "$WORK/load.out")
    if [ "${events:-0}" -eq 0 ]; then  # no per-event figure to give (a run shorter than a stream)
      echo "ab.sh: $m forwarded no events in round $r (DURATION=$DURATION; see $WORK/load.out)" >&2
      exit 1
    fi
    lat=$(sed -n 's/.*event_latency_p50_us=\([0-9]*\) event_latency_p99_us=\([0-9]*\).*/\1 \2/p' \
      "$WORK/load.out")
    # The busiest thread is the I/O thread.
    join "$WORK/before" "$WORK/after" | awk -v m="$m" -v r="$r" -v e="$events" -v hz="$HZ" \
      -v lat="$lat" '
      { du = $6 - $2; ds = $7 - $3; u += du; s += ds; cs += ($8 - $4) + ($9 - $5)
        if (du + ds > busiest) { busiest = du + ds; iu = du; is = ds } }
      END { k = 1e6 / hz / e
            split(lat, l, " ")
            printf "round %d %-12s total %6.2f  io user %5.2f sys %5.2f  rest %5.2f  ctxsw %.3f" \
                   "  latency p50 %s p99 %s us\n",
                   r, m, (u + s) * k, iu * k, is * k, (u + s - iu - is) * k, cs / e, l[1], l[2] }' |
      tee -a "$WORK/results"
    if [ "${FRESH:-0}" = 1 ]; then stop_proxy "$m"; fi
  done
done
first=${MODES%% *}
echo "difference to $first, per round (µs per event), and the mean with its 95 % confidence interval:"
"$(dirname "$0")/pool.sh" "$first" "$WORK/results"
