#!/usr/bin/env bash
# Soak: N concurrent streams through the real proxy with traces on, for a long time, sampling the
# proxy's resident memory, open file descriptors, CPU and error counters every INTERVAL seconds.
#
#   test/bench/soak.sh [build-dir]            (DURATION=1800 CONCURRENCY=1000 by default)
#
# Prints one CSV row per sample and a verdict: RSS flat after warm-up (the last sample within
# 10 % of the one at WARMUP seconds), descriptors back to the idle baseline plus at most the idle
# upstream pool (64), zero failed streams, zero upstream errors.  Exit status 1 if any fails.
set -euo pipefail
BUILD=${1:-build}
BIN=$BUILD/tokentap
LOADGEN=$BUILD/test/tokentap-loadgen
DURATION=${DURATION:-1800}
CONCURRENCY=${CONCURRENCY:-1000}
INTERVAL=${INTERVAL:-30}
WARMUP=${WARMUP:-300}
TOKENS=${TOKENS:-64}
ITL_MS=${ITL_MS:-100}
OUT=${OUT:-$BUILD/soak}
ulimit -n 65536 2>/dev/null || true
rm -rf "$OUT" && mkdir -p "$OUT/traces" && touch "$OUT/sim.out" "$OUT/proxy.out"

"$BIN" sim --listen 127.0.0.1:0 --threads 1 --log-level warn > "$OUT/sim.out" 2>&1 &
SIM=$!
until grep -q ready "$OUT/sim.out"; do sleep 0.1; done
cat > "$OUT/proxy.yaml" <<YAML
listen: 127.0.0.1:0
admin: 127.0.0.1:0
threads: 1
upstreams: {sim: {url: "http://$(sed -n 's/^ready sim=//p' "$OUT/sim.out")"}}
routes: [{prefix: /, upstream: sim}]
log: {level: warn, access_log: false}
trace: {dir: "$OUT/traces", max_file_bytes: 67108864, max_files: 8}
YAML
"$BIN" proxy --config "$OUT/proxy.yaml" > "$OUT/proxy.out" 2> "$OUT/proxy.err" &
PROXY=$!
trap 'kill $SIM $PROXY $LOAD 2>/dev/null || true' EXIT
until grep -q ready "$OUT/proxy.out"; do sleep 0.1; done
TARGET=$(sed -n 's/^ready proxy=\([^ ]*\).*/\1/p' "$OUT/proxy.out")
ADMIN=$(sed -n 's/.* admin=\([^ ]*\).*/\1/p' "$OUT/proxy.out")
HZ=$(getconf CLK_TCK)
fds() { ls /proc/"$PROXY"/fd | wc -l; }
rss_kib() { awk '/VmRSS/ {print $2}' /proc/"$PROXY"/status; }
ticks() { awk '{print $14 + $15}' /proc/"$PROXY"/stat; }
metric() { curl -s "http://$ADMIN/metrics" | awk -v n="$1" '$1 ~ "^"n {s += $2} END {printf "%d", s}'; }
FD_IDLE=$(fds)

"$LOADGEN" --target "$TARGET" --concurrency "$CONCURRENCY" --duration-s "$DURATION" \
  --tokens "$TOKENS" --itl-ms "$ITL_MS" --ttft-ms 100 --threads 1 > "$OUT/loadgen.out" 2>&1 &
LOAD=$!
echo "elapsed_s,rss_mib,fds,proxy_cpu_pct,requests,upstream_errors,trace_records,trace_dropped" | tee "$OUT/samples.csv"
start=$(date +%s)
prev_t=$(ticks)
prev_s=$start
RSS_WARM=""
while kill -0 $LOAD 2>/dev/null; do
  sleep "$INTERVAL"
  kill -0 $LOAD 2>/dev/null || break
  now=$(date +%s)
  t=$(ticks)
  cpu=$(( 100 * (t - prev_t) / HZ / (now - prev_s > 0 ? now - prev_s : 1) ))
  prev_t=$t
  prev_s=$now
  rss=$(rss_kib)
  [ -z "$RSS_WARM" ] && [ $((now - start)) -ge "$WARMUP" ] && RSS_WARM=$rss
  echo "$((now - start)),$((rss / 1024)),$(fds),$cpu,$(metric tokentap_requests_total),$(metric tokentap_upstream_errors_total),$(metric tokentap_trace_records_total),$(metric tokentap_trace_dropped_total)" | tee -a "$OUT/samples.csv"
done
wait $LOAD || true
sleep 15  # the proxy closes the streams cut at the end and lets pooled upstream connections expire
RSS_END=$(rss_kib)
FD_END=$(fds)
echo "loadgen: $(cat "$OUT/loadgen.out")"
failed=$(sed -n 's/.* failed=\([0-9]*\).*/\1/p' "$OUT/loadgen.out")
uerr=$(metric tokentap_upstream_errors_total)
verdict=0
echo "rss_after_warmup_mib=$(( ${RSS_WARM:-$RSS_END} / 1024 )) rss_end_mib=$((RSS_END / 1024)) fds_idle=$FD_IDLE fds_end=$FD_END failed_streams=${failed:-?} upstream_errors=$uerr"
if [ -n "$RSS_WARM" ] && [ "$RSS_END" -gt $(( RSS_WARM * 11 / 10 )) ]; then echo "FAIL: RSS grew after warm-up"; verdict=1; fi
# Kept after the load: at most the idle upstream pool (max_idle_connections, 64 per I/O thread);
# a leak would grow with the number of requests instead.
if [ "$FD_END" -gt $(( FD_IDLE + 64 + 4 )) ]; then echo "FAIL: file descriptors leaked"; verdict=1; fi
if [ "${failed:-1}" != 0 ] || [ "$uerr" != 0 ]; then echo "FAIL: errors"; verdict=1; fi
[ $verdict = 0 ] && echo "PASS"
exit $verdict
