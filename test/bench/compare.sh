#!/usr/bin/env bash
# The same streaming load through (a) nothing, (b) nginx as a plain streaming reverse proxy,
# (c) tokentap with everything on (decoding, timing, steps, cache, metrics, traces) and
# (d) tokentap with the tap off — one run, one machine.  Issue 8's harness.
#
#   test/bench/compare.sh [build-dir]        (STREAMS=500 EVENTS=100 ITL_MS=20 DURATION=20)
#   IDLE_STREAMS=1000 (0 skips)  MAX_LEVELS="1000 5000 max 10000" (unset skips; max: the descriptor limit's)  MAX_DURATION=15
#   ROUNDS=1: the load modes take turns this many times (even rounds in reverse order); the table
#   shows medians (and CPU ranges), then each round's CPU ratios to nginx (and full to no-trace)
#   with their mean and its 95 % confidence interval
#   SPREAD_MS=0: streams start together, so at a fixed gap their events arrive in bursts of
#   STREAMS; SPREAD_MS=ITL_MS starts each at a random time within one gap (arrivals spread out).
#   TOKENTAP_ENV="NAME=value ...": environment for the tokentap processes (e.g. GLIBC_TUNABLES)
#   PIN=1: the proxies on the last core, the simulator and the load generator on the others
#   (taskset), so that a proxy's latency is not the time it waited for a core they held.
#   CAPTURE=1: also each proxy's transit time per event from a packet capture of both its legs
#   (tcpdump on lo, Debian's `tcpdump`; tokentap-transit matches the stamps): upstream segment →
#   client segment, kernel timestamps, none of the simulator's or the client's scheduling in it.
#   The capture runs in the senders' system calls (its filter sees every segment), so the CPU
#   columns of such a run include its cost: take CPU ratios from runs without it.
#
# Per mode: events/s, per-event latency P50/P99 (the simulator stamps each event with the
# monotonic time it wrote it; the client subtracts it from the kernel's receive time of the bytes
# at its socket — same clock, without the client's own scheduling delay; the P99 of when the
# client read it is the last column but one), the
# proxy's CPU seconds per million events (/proc), and its RSS per open stream.  Proxies run one
# worker each (nginx worker_processes 1, tokentap --threads 1).  Loopback only; bounded in time.
set -euo pipefail
BUILD=${1:-build}
BIN=$(realpath "$BUILD/tokentap")
LOADGEN=$(realpath "$BUILD/test/tokentap-loadgen")
TRANSIT=$(realpath "$BUILD/test/tokentap-transit")
if [ "${CAPTURE:-0}" = 1 ] && ! command -v tcpdump > /dev/null; then
  echo "compare.sh: CAPTURE=1 needs tcpdump (apt-get install tcpdump)" >&2
  exit 2
fi
CAPDIR=/dev/shm
[ -d "$CAPDIR" ] && [ -w "$CAPDIR" ] || CAPDIR=/tmp
STREAMS=${STREAMS:-500}
EVENTS=${EVENTS:-100}
ITL_MS=${ITL_MS:-20}
DURATION=${DURATION:-20}
NGINX=${NGINX:-/usr/sbin/nginx}
WORK=$(mktemp -d /tmp/tokentap-compare-XXXXXX)
ulimit -n 65536 2>/dev/null || true
HZ=$(getconf CLK_TCK)
# shellcheck source=test/bench/nginx.sh
. "$(dirname "$0")/nginx.sh"
# shellcheck source=test/bench/capture.sh
. "$(dirname "$0")/capture.sh"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  rm -f "$CAPDIR"/tokentap-compare-$$.pcap "$CAPDIR"/tokentap-compare-$$.pcap.err
}
trap cleanup EXIT

wait_line() { until grep -q "$2" "$1" 2>/dev/null; do sleep 0.1; done; }
cpu_ticks() { local t=0; for p in "$@"; do t=$((t + $(awk '{print $14 + $15}' /proc/"$p"/stat))); done; echo $t; }
rss_kib() { local t=0; for p in "$@"; do t=$((t + $(awk '/VmRSS/ {print $2}' /proc/"$p"/status))); done; echo $t; }

LOAD_CPUS=() PROXY_CPUS=()
if [ "${PIN:-0}" = 1 ]; then
  last=$(($(nproc) - 1))
  LOAD_CPUS=(taskset -c "0-$((last - 1))") PROXY_CPUS=(taskset -c "$last")
fi
"${LOAD_CPUS[@]}" "$BIN" sim --listen 127.0.0.1:0 --threads 1 --log-level warn > "$WORK/sim.out" &
pids+=($!)
wait_line "$WORK/sim.out" ready
SIM=$(sed -n 's/^ready sim=//p' "$WORK/sim.out")

# (b) nginx, configured as a plain streaming reverse proxy (test/bench/nginx.sh).
NGINX_PORT=$(free_port)
nginx_conf "$WORK/nginx" "$SIM" "$NGINX_PORT"
"${PROXY_CPUS[@]}" "$NGINX" -p "$WORK/nginx" -c "$WORK/nginx/nginx.conf" -g 'daemon off;' &
NGINX_MASTER=$!
pids+=($NGINX_MASTER)
sleep 0.5

# (c) tokentap, everything on; (c') everything but traces (what traces cost); (d) tap off.
echo "hooks: [timing, steps, cache, metrics, trace]" > "$WORK/full.yaml"
echo "hooks: [timing, steps, cache, metrics]" > "$WORK/notrace.yaml"
echo "hooks: []" > "$WORK/off.yaml"
start_tokentap() {  # $1 name, $2 config
  # shellcheck disable=SC2086  # TOKENTAP_ENV is a list of NAME=value words
  "${PROXY_CPUS[@]}" env ${TOKENTAP_ENV:-} "$BIN" proxy --config "$2" --listen 127.0.0.1:0 --admin 127.0.0.1:0 --threads 1 --no-access-log \
    --log-level warn --upstream "http://$SIM" ${3:-} > "$WORK/$1.out" &
  pids+=($!)
  wait_line "$WORK/$1.out" ready
}
start_tokentap full "$WORK/full.yaml" "--trace-dir $WORK/traces"
FULL_PID=${pids[-1]}
FULL=$(sed -n 's/^ready proxy=\([^ ]*\).*/\1/p' "$WORK/full.out")
start_tokentap notrace "$WORK/notrace.yaml"
NOTRACE_PID=${pids[-1]}
NOTRACE=$(sed -n 's/^ready proxy=\([^ ]*\).*/\1/p' "$WORK/notrace.out")
start_tokentap off "$WORK/off.yaml"
OFF_PID=${pids[-1]}
OFF=$(sed -n 's/^ready proxy=\([^ ]*\).*/\1/p' "$WORK/off.out")

cpu_split() { local u=0 k=0; for p in "$@"; do read -r a b < <(awk '{print $14, $15}' /proc/"$p"/stat); u=$((u + a)); k=$((k + b)); done; echo "$u $k"; }
# One run of one mode; appends "eps failed p50 p99 user_s sys_s rss_per_stream read_p99" to
# $WORK/$name.runs.
run_mode() {  # $1 name, $2 target, $3.. pids to measure (none for direct)
  local name=$1 target=$2
  shift 2
  local before="0 0" after="0 0" rss_idle=0 rss_mid=0
  local cap=""  # set while both legs are captured (not for direct: no proxy)
  if [ "${CAPTURE:-0}" = 1 ] && [ $# -gt 0 ]; then
    cap=$CAPDIR/tokentap-compare-$$.pcap
    capture_start "$cap" "${SIM##*:}" "${target##*:}" "${LOAD_CPUS[@]}"
  fi
  [ $# -gt 0 ] && before=$(cpu_split "$@") && rss_idle=$(rss_kib "$@")
  "${LOAD_CPUS[@]}" "$LOADGEN" --target "$target" --concurrency "$STREAMS" --duration-s "$DURATION" \
    --tokens "$EVENTS" --itl-ms "$ITL_MS" --ttft-ms 50 --threads 1 --spread-ms "${SPREAD_MS:-0}" > "$WORK/load.out" 2>&1 &
  local load=$!
  sleep $((DURATION / 2))
  [ $# -gt 0 ] && rss_mid=$(rss_kib "$@")
  wait $load || true
  [ $# -gt 0 ] && after=$(cpu_split "$@")
  if [ -n "$cap" ]; then
    capture_stop
    echo "$("$TRANSIT" "$cap" --upstream-port "${SIM##*:}" --client-port "${target##*:}") dropped=$CAPTURE_DROPPED" \
      >> "$WORK/$name.transit"
    rm -f "$cap"
  fi
  local out
  out=$(cat "$WORK/load.out")
  read -r ub sb <<< "$before"
  read -r ua sa <<< "$after"
  echo "$(sed -n 's/.*events_per_s=\([0-9.]*\).*/\1/p' <<< "$out") $(sed -n 's/.*failed=\([0-9]*\).*/\1/p' <<< "$out")" \
    "$(sed -n 's/.*event_latency_p50_us=\([0-9.]*\).*/\1/p' <<< "$out") $(sed -n 's/.*event_latency_p99_us=\([0-9.]*\).*/\1/p' <<< "$out")" \
    "$(awk -v a="$ua" -v b="$ub" -v hz="$HZ" 'BEGIN { printf "%.3f", (a - b) / hz }')" \
    "$(awk -v a="$sa" -v b="$sb" -v hz="$HZ" 'BEGIN { printf "%.3f", (a - b) / hz }')" \
    "$([ $# -gt 0 ] && echo $(( (rss_mid - rss_idle) / STREAMS )) || echo -)" \
    "$(sed -n 's/.*read_latency_p99_us=\([0-9.]*\).*/\1/p' <<< "$out")" >> "$WORK/$name.runs"
}
NGINX_WORKERS=$(pgrep -P "$NGINX_MASTER" | tr '\n' ' ')
# Idle streams first, on fresh processes (after a load run the allocator keeps freed memory and
# new streams reuse it): each gets its head and one event, then nothing.
if [ "${IDLE_STREAMS:-1000}" -gt 0 ]; then
  echo "idle: ${IDLE_STREAMS:-1000} open streams after their first event (RSS growth per stream, KiB)"
  idle_rss() {  # $1 target, $2.. pids
    local target=$1
    shift
    local base
    base=$(rss_kib "$@")
    "$LOADGEN" --target "$target" --concurrency "${IDLE_STREAMS:-1000}" --duration-s 8 \
      --tokens 2 --itl-ms 600000 --ttft-ms 10 --threads 1 > /dev/null 2>&1 &
    local load=$!
    sleep 6
    local now
    now=$(rss_kib "$@")
    wait $load || true
    echo $(( (now - base) / ${IDLE_STREAMS:-1000} ))
  }
  # shellcheck disable=SC2086
  printf "%-16s %s\n" nginx "$(idle_rss "127.0.0.1:$NGINX_PORT" $NGINX_MASTER $NGINX_WORKERS)"
  printf "%-16s %s\n" tokentap-full "$(idle_rss "$FULL" "$FULL_PID")"
  printf "%-16s %s\n" tokentap-tap-off "$(idle_rss "$OFF" "$OFF_PID")"
  echo
fi

ROUNDS=${ROUNDS:-1}
echo "machine: $(nproc) cores; $STREAMS streams x $EVENTS events, ${ITL_MS} ms apart, ${DURATION} s per mode; $ROUNDS round(s)${PROXY_CPUS:+; proxies on cpu ${PROXY_CPUS[2]}, load on ${LOAD_CPUS[2]}}"
# The modes take turns, ROUNDS times over: CPU time varies by ~15 % between identical runs on a
# shared VM, so a comparison is only as good as its rounds.  Each figure is the median over the
# rounds (CPU: the range too); CPU per million events, split into user and system time.  RSS
# per stream is the first round's (later rounds reuse what the allocator kept from it).
# Even rounds run the modes in reverse order: on this VM whichever proxy ran earlier in a round
# measured up to ~1 µs per event more than when it ran later (test/bench/ab.sh), so a fixed
# order favours the modes that come last.  Use an even ROUNDS.
run_nth() {
  case $1 in
    0) run_mode direct "$SIM" ;;
    # shellcheck disable=SC2086
    1) run_mode nginx "127.0.0.1:$NGINX_PORT" $NGINX_MASTER $NGINX_WORKERS ;;
    2) run_mode tokentap-full "$FULL" "$FULL_PID" ;;
    3) run_mode tokentap-no-trace "$NOTRACE" "$NOTRACE_PID" ;;
    4) run_mode tokentap-tap-off "$OFF" "$OFF_PID" ;;
  esac
}
for r in $(seq 1 "$ROUNDS"); do
  if [ $((r % 2)) -eq 1 ]; then order="0 1 2 3 4"; else order="4 3 2 1 0"; fi
  for i in $order; do run_nth "$i"; done
done
python3 - "$WORK" "$DURATION" <<'PY'
import statistics, sys
work, duration = sys.argv[1], float(sys.argv[2])
modes = ["direct", "nginx", "tokentap-full", "tokentap-no-trace", "tokentap-tap-off"]
med = lambda xs: statistics.median(xs) if xs else None
def num(x):
    try: return float(x)
    except ValueError: return None
rows = {}
for m in modes:
    runs = [[num(f) for f in l.split()] for l in open(f"{work}/{m}.runs") if l.strip()]
    usr, sys_, by_round = [], [], []  # by_round: each round's CPU per event (None: not measured)
    for eps, _, _, _, u, s, _, _ in runs:
        by_round.append(None)
        if m != "direct" and eps:
            per = eps * duration / 1e6
            by_round[-1] = (u + s) / per; usr.append(u / per); sys_.append(s / per)
    cpu = [c for c in by_round if c is not None]
    rows[m] = dict(eps=med([r[0] for r in runs if r[0] is not None]),
                   failed=sum(r[1] or 0 for r in runs), p50=med([r[2] for r in runs if r[2] is not None]),
                   p99=med([r[3] for r in runs if r[3] is not None]), cpu=cpu, by_round=by_round,
                   usr=med(usr), sys=med(sys_),
                   read_p99=med([r[7] for r in runs if r[7] is not None]),
                   # the first round's: later runs reuse memory the allocator kept from the first
                   rss=runs[0][6] if runs else None)
fmt = "%-18s %9s %7s %9s %9s %21s %11s %8s %11s %8s"
print(fmt % ("mode", "events/s", "errors", "p50 us", "p99 us", "cpu s/M events", "user/sys", "vs nginx",
             "read p99 us", "KiB/str"))
base = med(rows["nginx"]["cpu"])
for m in modes:
    r = rows[m]
    c = med(r["cpu"])
    cpu = "-" if c is None else ("%.2f" % c) + ("" if len(r["cpu"]) < 2 else " (%.2f-%.2f)" % (min(r["cpu"]), max(r["cpu"])))
    split = "-" if c is None else "%.1f/%.1f" % (r["usr"], r["sys"])
    ratio = "-" if c is None or not base else "%.2f" % (c / base)
    g = lambda v, f="%.0f": "-" if v is None else f % v
    print(fmt % (m, g(r["eps"]), r["failed"], g(r["p50"]), g(r["p99"]), cpu, split, ratio,
                 g(r["read_p99"]), g(r["rss"])))
full, notrace = med(rows["tokentap-full"]["cpu"]), med(rows["tokentap-no-trace"]["cpu"])
if full and notrace:
    print("traces cost: %+.1f %% CPU (full vs no-trace, medians)" % (100 * (full / notrace - 1)))
# Paired by round (the modes of one round ran minutes apart, under the same neighbours): each
# round's ratio, their mean and its 95 % confidence interval (Student's t).  A target such as
# "<= 1.0x nginx" is shown when the interval's upper end is below it, not by one median.
T975 = [12.71, 4.30, 3.18, 2.78, 2.57, 2.45, 2.36, 2.31, 2.26, 2.23, 2.20, 2.18, 2.16, 2.14, 2.13]
def paired(a, b, label):
    xs = [x / y for x, y in zip(rows[a]["by_round"], rows[b]["by_round"]) if x and y]
    if len(xs) < 2:
        return
    mean, sd = statistics.mean(xs), statistics.stdev(xs)
    half = T975[min(len(xs) - 2, len(T975) - 1)] * sd / len(xs) ** 0.5
    print("%-28s %s  mean %.3f (95 %% CI %.3f-%.3f)" % (label, " ".join("%.3f" % x for x in xs), mean, mean - half, mean + half))
print("per round, CPU per event:")
for m in modes[2:]:
    paired(m, "nginx", "  %s / nginx" % m)
paired("tokentap-full", "tokentap-no-trace", "  full / no-trace")
PY
if [ "${CAPTURE:-0}" = 1 ]; then
  echo
  echo "transit per event (capture: upstream segment -> client segment), us; each round:"
  for m in nginx tokentap-full tokentap-no-trace tokentap-tap-off; do
    [ -f "$WORK/$m.transit" ] || continue
    sed -e "s/^transit /$m /" -e 's/ packets=[0-9]*//; s/ upstream_stamps=[0-9]*//; s/ client_stamps=[0-9]*//' \
      "$WORK/$m.transit"
  done
fi

# Max concurrent streams before errors: slow streams (one event per second) at rising levels.
# A level "max" is the most this machine's descriptor limit lets a proxy hold: two descriptors a
# stream plus 20 of the process's own (listeners, epoll, eventfds, timers, logs).
if [ -n "${MAX_LEVELS:-}" ]; then
  FD_MAX=$(( ($(ulimit -Hn) - 20) / 2 ))
  echo
  echo "max concurrent streams (1 event/s each, ${MAX_DURATION:-15} s per level):"
  echo "  level:failed/open-at-end/proxy-descriptors-mid-level"
  echo "(each proxied stream needs two descriptors; this machine's hard limit is $(ulimit -Hn) per process: max = $FD_MAX)"
  fd_count() { local t=0; for p in "$@"; do t=$((t + $(ls /proc/"$p"/fd | wc -l))); done; echo $t; }
  for mode in direct nginx tokentap-full; do
    target="127.0.0.1:$NGINX_PORT" procs=$(pgrep -P "$NGINX_MASTER" | tr '\n' ' ')
    [ $mode = direct ] && target=$SIM && procs=""
    [ $mode = tokentap-full ] && target=$FULL && procs=$FULL_PID
    line="$mode"
    for n in $MAX_LEVELS; do
      [ "$n" = max ] && n=$FD_MAX
      "$LOADGEN" --target "$target" --concurrency "$n" --duration-s "${MAX_DURATION:-15}" \
        --tokens 10 --itl-ms 1000 --ttft-ms 50 --threads 1 > "$WORK/max.out" 2>&1 &
      load=$!
      sleep $(( ${MAX_DURATION:-15} * 2 / 3 ))
      # shellcheck disable=SC2086
      fds=$([ -n "$procs" ] && fd_count $procs || echo -)
      wait $load || true
      out=$(cat "$WORK/max.out")
      line="$line  $n:$(sed -n 's/.*failed=\([0-9]*\).*/\1/p' <<< "$out")/$(sed -n 's/.*in_flight_at_end=\([0-9]*\).*/\1/p' <<< "$out")/$fds"
    done
    echo "$line"
  done
fi
