#!/usr/bin/env bash
# Why an event's transit through a proxy took long: was the proxy asleep when it arrived, and
# how late was it woken?  (issue 8: the P99 at 1,000 streams.)
#
#   test/bench/wakeups.sh [build-dir]    MODE=tokentap-off|tokentap-full|nginx  STREAMS=1000
#                                        ITL_MS=100 DURATION=15 SLOW_US=1000  (root: tracefs)
#
# The proxy runs alone on the last core, simulator, load generator and tcpdump on the others
# (as compare.sh PIN=1).  While the load runs, the kernel's scheduler tracepoints record when the
# proxy's thread went to sleep and when it was woken (sched_switch, sched_wakeup; tracefs, with
# the monotonic clock), and tcpdump both legs of the proxy (compare.sh CAPTURE=1).  Each event
# whose transit took at least SLOW_US is then put in one of three kinds, by the state of the
# proxy's thread that serves it (of its threads, the one woken most) when its upstream segment
# arrived:
#   asleep, woken late   — waiting in epoll_wait; the wakeup came > 500 µs after the bytes did
#                          (the wakeup delays' percentiles follow);
#   asleep, woken soon   — woken within 500 µs, yet the event still took SLOW_US;
#   awake                — running, or runnable (woken, or preempted) and not yet switched
#                          out: a backlog being worked off — or a thread not given the CPU,
#                          which the transit line's silences (nothing sent for >= 1 ms while
#                          events were held) tell apart.
# What a wakeup waits for on a VM: the waking CPU sends an IPI; a halted vCPU runs only when the
# host schedules it again.  The script prints the guest's halt-polling setting alongside.
set -euo pipefail
BUILD=${1:-build}
BIN=$(realpath "$BUILD/tokentap")
LOADGEN=$(realpath "$BUILD/test/tokentap-loadgen")
TRANSIT=$(realpath "$BUILD/test/tokentap-transit")
MODE=${MODE:-tokentap-off}
STREAMS=${STREAMS:-1000}
ITL_MS=${ITL_MS:-100}
DURATION=${DURATION:-15}
SLOW_US=${SLOW_US:-1000}
NGINX=${NGINX:-/usr/sbin/nginx}
T=/sys/kernel/tracing
if [ ! -w "$T/tracing_on" ] || ! command -v tcpdump > /dev/null; then
  echo "wakeups.sh: needs root, tracefs at $T and tcpdump" >&2
  exit 2
fi
WORK=$(mktemp -d /tmp/tokentap-wakeups-XXXXXX)
CAPDIR=/dev/shm
[ -d "$CAPDIR" ] && [ -w "$CAPDIR" ] || CAPDIR=/tmp
CAP=$CAPDIR/tokentap-wakeups-$$.pcap
ulimit -n 65536 2> /dev/null || true
pids=()
# Put back at exit what this script changes in tracefs.
SAVED_CLOCK=$(sed -n 's/.*\[\(.*\)\].*/\1/p' "$T/trace_clock")
SAVED_BUFFER=$(cat "$T/buffer_size_kb")
SAVED_CPUMASK=$(cat "$T/tracing_cpumask")
trace_off() {
  echo 0 > "$T/tracing_on"
  for e in sched/sched_wakeup sched/sched_switch; do echo 0 > "$T/events/$e/enable"; done
  echo 0 > "$T/events/sched/sched_wakeup/filter"
}
cleanup() {
  trace_off
  echo > "$T/trace"
  echo "$SAVED_CLOCK" > "$T/trace_clock"
  echo "${SAVED_BUFFER%% *}" > "$T/buffer_size_kb"  # "1408 (expanded: …)" on some kernels
  echo "$SAVED_CPUMASK" > "$T/tracing_cpumask"
  for p in "${pids[@]}"; do kill "$p" 2> /dev/null || true; done
  rm -f "$CAP" "$CAP.err"
}
trap cleanup EXIT
wait_line() { until grep -q "$2" "$1" 2> /dev/null; do sleep 0.1; done; }
# shellcheck source=test/bench/nginx.sh
. "$(dirname "$0")/nginx.sh"
# shellcheck source=test/bench/capture.sh
. "$(dirname "$0")/capture.sh"

last=$(($(nproc) - 1))
LOAD=(taskset -c "0-$((last - 1))") PROXY=(taskset -c "$last")
"${LOAD[@]}" "$BIN" sim --listen 127.0.0.1:0 --threads 1 --log-level warn > "$WORK/sim.out" &
pids+=($!)
wait_line "$WORK/sim.out" ready
SIM=$(sed -n 's/^ready sim=//p' "$WORK/sim.out")
case $MODE in
  nginx)
    PORT=$(free_port)
    nginx_conf "$WORK/nginx" "$SIM" "$PORT"
    "${PROXY[@]}" "$NGINX" -p "$WORK/nginx" -c "$WORK/nginx/nginx.conf" -g 'daemon off;' &
    pids+=($!)
    sleep 0.5
    TARGET=127.0.0.1:$PORT
    TIDS=$(pgrep -P "${pids[-1]}" | tr '\n' ' ')  # the worker
    ;;
  tokentap-off | tokentap-full)
    hooks="[]"
    [ "$MODE" = tokentap-full ] && hooks="[timing, steps, cache, metrics, trace]"
    echo "hooks: $hooks" > "$WORK/proxy.yaml"
    "${PROXY[@]}" "$BIN" proxy --config "$WORK/proxy.yaml" --listen 127.0.0.1:0 --admin 127.0.0.1:0 \
      --threads 1 --no-access-log --log-level warn --upstream "http://$SIM" \
      --trace-dir "$WORK/traces" > "$WORK/proxy.out" &
    pids+=($!)
    wait_line "$WORK/proxy.out" ready
    TARGET=$(sed -n 's/^ready proxy=\([^ ]*\).*/\1/p' "$WORK/proxy.out")
    TIDS=$(cd /proc/"${pids[-1]}"/task && echo *)  # its threads
    ;;
  *)
    echo "wakeups.sh: MODE is tokentap-off, tokentap-full or nginx" >&2
    exit 2
    ;;
esac

capture_start "$CAP" "${SIM##*:}" "${TARGET##*:}" "${LOAD[@]}"
pids+=("$CAPTURE_PID")

echo 0 > "$T/tracing_on"
echo > "$T/trace"
echo mono > "$T/trace_clock"
printf '%x\n' $(((1 << $(nproc)) - 1)) > "$T/tracing_cpumask"  # every CPU
echo 65536 > "$T/buffer_size_kb"
filter=""
for t in $TIDS; do filter="${filter:+$filter || }pid == $t"; done
echo "$filter" > "$T/events/sched/sched_wakeup/filter"
echo 1 > "$T/events/sched/sched_wakeup/enable"
echo 1 > "$T/events/sched/sched_switch/enable"
echo 1 > "$T/tracing_on"
"${LOAD[@]}" "$LOADGEN" --target "$TARGET" --concurrency "$STREAMS" --duration-s "$DURATION" \
  --tokens 100 --itl-ms "$ITL_MS" --ttft-ms 50 --threads 1 --spread-ms "$ITL_MS" > "$WORK/load.out" 2>&1
echo 0 > "$T/tracing_on"
capture_stop
# The capture's timestamps are the wall clock, the trace's the monotonic one.
python3 -c 'import time; print(time.clock_gettime_ns(time.CLOCK_REALTIME) - time.clock_gettime_ns(time.CLOCK_MONOTONIC))' > "$WORK/offset"
cat "$T/trace" > "$WORK/trace.txt"
trace_off
"$TRANSIT" "$CAP" --upstream-port "${SIM##*:}" --client-port "${TARGET##*:}" --slowest 1000000 > "$WORK/transit.txt"
rm -f "$CAP"

echo "$MODE on cpu $last; $STREAMS streams, ${ITL_MS} ms apart, spread; ${DURATION} s"
echo "guest halt polling: $(cat /sys/module/haltpoll/parameters/guest_halt_poll_ns 2> /dev/null || echo n/a) ns; cpuidle: $(cat /sys/devices/system/cpu/cpuidle/current_driver 2> /dev/null || echo n/a)"
tail -1 "$WORK/load.out"
echo "$(head -1 "$WORK/transit.txt") dropped=$CAPTURE_DROPPED"
python3 - "$WORK" "$SLOW_US" "$TIDS" <<'PY'
import bisect, collections, re, sys
work, slow_us = sys.argv[1], float(sys.argv[2])
tids = {int(t) for t in sys.argv[3].split()}
offset = int(open(f"{work}/offset").read())
wakes, outs = collections.defaultdict(list), collections.defaultdict(list)
line = re.compile(r"\s(\d+\.\d+): (sched_wakeup|sched_switch): (.*)$")
for l in open(f"{work}/trace.txt"):
    m = line.search(l)
    if not m:
        continue
    t = int(round(float(m.group(1)) * 1e9))
    if m.group(2) == "sched_wakeup":
        pid = int(re.search(r" pid=(\d+)", m.group(3)).group(1))
        if pid in tids:
            wakes[pid].append(t)
    else:
        f = re.search(r"prev_pid=(\d+) .*prev_state=(\S+)", m.group(3))
        if int(f.group(1)) in tids:
            outs[int(f.group(1))].append((t, f.group(2)))
if not wakes:
    sys.exit("no wakeups traced")
tid = max(wakes, key=lambda k: len(wakes[k]))  # the thread that serves the streams
wt, ot = wakes[tid], outs[tid]
ots = [t for t, _ in ot]
kinds, delays, n = collections.Counter(), [], 0
for l in open(f"{work}/transit.txt"):
    if not l.startswith("slow "):
        continue
    d = dict(kv.split("=") for kv in l.split()[1:])
    us = float(d["transit_us"])
    if us < slow_us:
        continue
    n += 1
    arrived = int(d["client_ns"]) - offset - int(us * 1000)
    i, j = bisect.bisect_right(ots, arrived) - 1, bisect.bisect_right(wt, arrived) - 1
    asleep = i >= 0 and ot[i][1].startswith(("S", "D")) and (j < 0 or wt[j] < ot[i][0])
    if not asleep:
        kinds["awake"] += 1
        continue
    k = bisect.bisect_right(wt, arrived)
    if k == len(wt):
        kinds["asleep, not woken in the trace"] += 1
        continue
    delay = (wt[k] - arrived) / 1e3
    kinds["asleep, woken late (> 500 us)" if delay > 500 else "asleep, woken soon"] += 1
    delays.append(delay)
print(f"events with transit >= {slow_us:.0f} us: {n} (thread {tid}: {len(wt)} wakeups, {len(ot)} switches out)")
for k, v in kinds.most_common():
    print(f"  {k:32s} {v:7d}  {100 * v / max(n, 1):5.1f} %")
if delays:
    delays.sort()
    q = lambda p: delays[min(len(delays) - 1, int(p * len(delays)))]
    print(f"  wakeup delay of those asleep, us: p50 {q(0.5):.0f}  p90 {q(0.9):.0f}  max {delays[-1]:.0f}")
PY
