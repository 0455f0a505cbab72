#!/usr/bin/env bash
# One experiment end to end (README, "Benchmarking an endpoint"): does prefix-aware routing pay
# for multi-turn chat?  The same workload (conversations.yaml) through the proxy twice, in front
# of three fresh simulator replicas that each keep their own prefix cache — A spreads requests
# in turn (round-robin.yaml), B sends each conversation back to the replica holding its prefix
# (prefix.yaml) — then `bench compare` and `bench report` on the two runs.
#
#   deploy/experiment/run.sh TOKENTAP [OUT_DIR]      (deploy/quickstart.sh demo --experiment)
#
# Ports 18180 (proxy), 18190 (its admin) and 18181-18183 (the replicas) must be free.
set -euo pipefail

BIN=${1:?usage: deploy/experiment/run.sh TOKENTAP [OUT_DIR]}
OUT=${2:-/tmp/tokentap-experiment-$(date +%Y%m%d-%H%M%S)}
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$OUT"

pids=()
stop_all() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  pids=()
}
trap stop_all EXIT

# Waits until 127.0.0.1:PORT accepts a connection (bash's /dev/tcp: no curl needed).
wait_port() {
  for _ in $(seq 1 100); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return 0; fi
    sleep 0.1
  done
  echo "experiment: nothing answered on 127.0.0.1:$1" >&2
  exit 1
}
for port in 18180 18181 18182 18183 18190; do
  if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
    echo "experiment: port $port is taken; stop what uses it first" >&2
    exit 1
  fi
done

for config in round-robin prefix; do
  echo "==> $config: simulator (3 replicas, fresh caches) + proxy with $config.yaml"
  # Prefill costs 400 µs per prompt token the replica has not cached: a history resent to a
  # replica that has not seen it waits for it again; the replicas report their own queue,
  # prefill and decode as vLLM does, which the report sets beside the tap's phases.
  "$BIN" sim --listen 127.0.0.1:18181 --replicas 3 --ttft-ms 30 --itl-ms 8 --tokens 60 \
    --cache-capacity 4096 --prefill-us-per-token 400 --engine vllm >"$OUT/$config-sim.log" 2>&1 &
  pids+=($!)
  for port in 18181 18182 18183; do wait_port "$port"; done
  "$BIN" proxy --config "$HERE/$config.yaml" >"$OUT/$config-proxy.log" 2>&1 &
  pids+=($!)
  wait_port 18180
  "$BIN" bench run --target http://127.0.0.1:18180 --workload "$HERE/conversations.yaml" \
    --out "$OUT/$config" --model sim-small --concurrency 6 --requests 120 \
    --goodput ttft_ms:200
  stop_all
done

echo "==> bench compare $OUT/round-robin $OUT/prefix"
rc=0
"$BIN" bench compare "$OUT/round-robin" "$OUT/prefix" || rc=$?
"$BIN" bench report "$OUT/round-robin" "$OUT/prefix" --out "$OUT/report.html"
cat <<EOF

  runs     $OUT/round-robin  $OUT/prefix   (run.json, requests.jsonl, summary.json, traces/)
  report   $OUT/report.html   <- open it in a browser (one file, works offline)
  compare  exit status $rc (1: B is worse than A on a latency or an accuracy)
EOF
