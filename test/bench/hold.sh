#!/usr/bin/env bash
# Concurrent streams held past one process's descriptor limit (issue 8: 10,000 streams).
#
#   test/bench/hold.sh [build-dir]     STREAMS=10000 PROCS=2 DURATION=30
#
# Every proxied stream holds two descriptors (client and upstream), so one process under a hard
# limit of 20,000 holds at most ~9,990 streams — nginx's worker and tokentap alike (compare.sh's
# `max` level).  Here each proxy runs PROCS processes on one port: nginx with PROCS workers
# (`reuseport`), tokentap as PROCS `tokentap proxy --reuse-port` processes with everything on
# (decoding, timing, steps, cache, metrics, traces).  STREAMS slow streams (one event a second,
# 20 events) are opened through each; mid-run the script counts each process's descriptors and
# RSS, at the end the load generator's failures and the streams still open.
set -euo pipefail
BUILD=${1:-build}
BIN=$(realpath "$BUILD/tokentap")
LOADGEN=$(realpath "$BUILD/test/tokentap-loadgen")
STREAMS=${STREAMS:-10000}
PROCS=${PROCS:-2}
DURATION=${DURATION:-30}
NGINX=${NGINX:-/usr/sbin/nginx}
WORK=$(mktemp -d /tmp/tokentap-hold-XXXXXX)
ulimit -n "$(ulimit -Hn)"
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT
wait_line() { until grep -q "$2" "$1" 2>/dev/null; do sleep 0.1; done; }
# shellcheck source=test/bench/nginx.sh
. "$(dirname "$0")/nginx.sh"

"$BIN" sim --listen 127.0.0.1:0 --threads 1 --log-level warn > "$WORK/sim.out" &
pids+=($!)
wait_line "$WORK/sim.out" ready
SIM=$(sed -n 's/^ready sim=//p' "$WORK/sim.out")

# nginx: PROCS workers, each with its own listening socket (reuseport) and descriptor limit.
NGINX_PORT=$(free_port)
LISTEN_OPTS=reuseport nginx_conf "$WORK/nginx" "$SIM" "$NGINX_PORT" "$PROCS"
"$NGINX" -p "$WORK/nginx" -c "$WORK/nginx/nginx.conf" -g 'daemon off;' 2> "$WORK/nginx.err" &
NGINX_MASTER=$!
pids+=($NGINX_MASTER)
sleep 0.5
NGINX_PIDS=$(pgrep -P "$NGINX_MASTER" | tr '\n' ' ')

# tokentap: PROCS processes sharing one port, everything on.
TT_PORT=$(free_port)
echo "hooks: [timing, steps, cache, metrics, trace]" > "$WORK/full.yaml"
TT_PIDS=""
for i in $(seq 1 "$PROCS"); do
  "$BIN" proxy --config "$WORK/full.yaml" --listen "127.0.0.1:$TT_PORT" --reuse-port \
    --admin 127.0.0.1:0 --threads 1 --no-access-log --log-level warn --upstream "http://$SIM" \
    --trace-dir "$WORK/traces" > "$WORK/tt$i.out" &
  pids+=($!)
  TT_PIDS="$TT_PIDS $!"
  wait_line "$WORK/tt$i.out" ready
done

per_proc() {  # $1 format (fd | rss), $2.. pids -> "a b ..." per process
  local what=$1
  shift
  for p in "$@"; do
    if [ "$what" = fd ]; then ls /proc/"$p"/fd | wc -l; else awk '/VmRSS/ {print $2}' /proc/"$p"/status; fi
  done | tr '\n' ' '
}

echo "machine: $(nproc) cores, descriptor hard limit $(ulimit -Hn) per process; $STREAMS streams" \
  "(1 event/s, 20 events), $PROCS processes per proxy"
printf "%-10s %8s %8s %22s %22s %14s\n" proxy failed open-end "descriptors/process" "RSS KiB/process" "KiB/stream"
for mode in nginx tokentap; do
  if [ $mode = nginx ]; then target=127.0.0.1:$NGINX_PORT procs=$NGINX_PIDS; else target=127.0.0.1:$TT_PORT procs=$TT_PIDS; fi
  # shellcheck disable=SC2086
  rss0=$(per_proc rss $procs)
  "$LOADGEN" --target "$target" --concurrency "$STREAMS" --duration-s "$DURATION" --tokens 20 \
    --itl-ms 1000 --ttft-ms 50 --spread-ms 1000 --threads 1 > "$WORK/$mode.load" 2>&1 &
  load=$!
  sleep $(( DURATION * 2 / 3 ))
  # shellcheck disable=SC2086
  fds=$(per_proc fd $procs)
  # shellcheck disable=SC2086
  rss=$(per_proc rss $procs)
  wait $load || true
  out=$(cat "$WORK/$mode.load")
  growth=$(awk -v a="$rss0" -v b="$rss" -v n="$STREAMS" 'BEGIN {
    split(a, x, " "); split(b, y, " "); t = 0; for (i in y) t += y[i] - x[i]; printf "%.1f", t / n }')
  printf "%-10s %8s %8s %22s %22s %14s\n" $mode "$(sed -n 's/.*failed=\([0-9]*\).*/\1/p' <<< "$out")" \
    "$(sed -n 's/.*in_flight_at_end=\([0-9]*\).*/\1/p' <<< "$out")" "$fds" "$rss" "$growth"
  grep -h -i "error\|alert" "$WORK/nginx/logs/error.log" 2>/dev/null | head -3 || true
done
echo "(load generator summaries and proxy output in $WORK)"
