#!/usr/bin/env bash
# Streams held and events per second through the real proxy, on this machine.
#
#   test/bench/load.sh [build-dir]
#
# Starts `tokentap sim` and `tokentap proxy` (one I/O thread each, so the load generator gets the
# other core), then drives N concurrent streaming clients for 15 s per level.  Prints one line per
# level plus the proxy's CPU use (from /proc) and resident memory.  Loopback only; bounded in time.
set -euo pipefail
BUILD=${1:-build}
BIN=$BUILD/tokentap
LOADGEN=$BUILD/test/tokentap-loadgen
DURATION=${DURATION:-15}
LEVELS=${LEVELS:-"100 500 1000 2000"}
TOKENS=${TOKENS:-64}
ITL_MS=${ITL_MS:-20}
ulimit -n 65536 2>/dev/null || true

: > /tmp/tokentap-bench-sim.out
: > /tmp/tokentap-bench-proxy.out
"$BIN" sim --listen 127.0.0.1:0 --threads 1 --log-level warn > /tmp/tokentap-bench-sim.out &
SIM=$!
"$BIN" proxy --listen 127.0.0.1:0 --admin 127.0.0.1:0 --threads 1 --no-access-log \
  --upstream "http://$(until grep -q ready /tmp/tokentap-bench-sim.out; do sleep 0.1; done; sed -n 's/^ready sim=//p' /tmp/tokentap-bench-sim.out)" \
  --log-level warn > /tmp/tokentap-bench-proxy.out &
PROXY=$!
trap 'kill $SIM $PROXY 2>/dev/null || true' EXIT
until grep -q ready /tmp/tokentap-bench-proxy.out; do sleep 0.1; done
TARGET=$(sed -n 's/^ready proxy=\([^ ]*\).*/\1/p' /tmp/tokentap-bench-proxy.out)
HZ=$(getconf CLK_TCK)

cpu_ticks() { awk '{print $14 + $15}' /proc/"$1"/stat; }
rss_kib() { awk '/VmRSS/ {print $2}' /proc/"$1"/status; }

echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo); ${TOKENS} tokens per stream, ${ITL_MS} ms apart"
for N in $LEVELS; do
  before=$(cpu_ticks $PROXY)
  t0=$(date +%s.%N)
  result=$("$LOADGEN" --target "$TARGET" --concurrency "$N" --duration-s "$DURATION" \
             --tokens "$TOKENS" --itl-ms "$ITL_MS" --ttft-ms 100 --threads 1 || true)
  after=$(cpu_ticks $PROXY)
  t1=$(date +%s.%N)
  # CPU over the whole run, including the drain of the last in-flight streams.
  cpu=$(awk -v a="$after" -v b="$before" -v hz="$HZ" -v t0="$t0" -v t1="$t1" 'BEGIN {printf "%.0f", 100 * (a - b) / hz / (t1 - t0)}')
  echo "$result proxy_cpu=${cpu}% proxy_rss_mib=$(( $(rss_kib $PROXY) / 1024 ))"
done
