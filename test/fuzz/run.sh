#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan + UBSan) and runs each for a set time.
#
#   test/fuzz/run.sh [SECONDS_PER_TARGET] [PARALLEL] [TARGET...]
#
# Defaults: 600 s per target (10 CPU-minutes), 2 targets at a time, every target.  The seed corpus
# in test/fuzz/corpus/<target> is copied into build-fuzz/corpus/<target>, which grows as the fuzzer
# finds new coverage; crashes land in build-fuzz/crashes/<target>/ and make the run fail.
# SECONDS_PER_TARGET=0 only replays the seeds and test/fuzz/regressions/ (what .ci/run does).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
secs="${1:-600}"
par="${2:-2}"
shift $(( $# > 2 ? 2 : $# )) || true
build="${FUZZ_BUILD_DIR:-$root/build-fuzz}"

if [ ! -f "$build/build.ninja" ]; then
  CXX=clang++ cmake -S "$root" -B "$build" -G Ninja -DTOKENTAP_FUZZ=ON \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
fi
# The build's output is kept in a file, and shown when it fails.
cmake --build "$build" >"$build/build.log" 2>&1 ||
  { echo "fuzz build failed ($build/build.log):"; grep -E "error|FAILED" "$build/build.log" | head -40; exit 1; }

targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  targets=(sse ndjson http_body decoder_openai_chat decoder_openai_responses decoder_anthropic decoder_ollama
           decoder_tgi decoder_llamacpp request_inspector gen_ai_messages step_tagger trace_reader config cache_hints
           engine_metrics)
fi

run_one() {
  local t="$1" secs="$2" build="$3" here="$4"
  local bin="$build/test/fuzz/fuzz_$t" work="$build/corpus/$t" crashes="$build/crashes/$t"
  mkdir -p "$work" "$crashes"
  cp -n "$here/corpus/$t/"* "$work/" 2>/dev/null || true
  # Regressions: every input that ever broke this target must pass.
  local regs=()
  for f in "$here/regressions/$t"-*; do [ -e "$f" ] && regs+=("$f"); done
  if [ ${#regs[@]} -gt 0 ]; then
    "$bin" -runs=0 "${regs[@]}" >"$build/$t.regressions.log" 2>&1 ||
      { echo "$t: a regression input fails (see $build/$t.regressions.log)"; return 1; }
  fi
  if [ "$secs" = 0 ]; then
    "$bin" -runs=0 "$work" >"$build/$t.log" 2>&1 ||
      { echo "$t: a seed input fails (see $build/$t.log)"; return 1; }
    printf '%-26s seeds and %d regression input(s) pass\n' "$t" "${#regs[@]}"
    return 0
  fi
  local rc=0 TIMEFORMAT='%U %S'
  { time "$bin" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
      -artifact_prefix="$crashes/" -print_final_stats=1 "$work" >"$build/$t.log" 2>&1 || rc=$?; } \
    2>"$build/$t.cpu"
  local execs cov cpu
  execs=$(grep -E '^stat::number_of_executed_units' "$build/$t.log" | awk '{print $2}')
  cov=$(grep -oE 'cov: [0-9]+' "$build/$t.log" | tail -1 | awk '{print $2}')
  cpu=$(awk '{printf "%.0f", $1 + $2}' "$build/$t.cpu")
  # Running totals across runs (the corpus carries over, so CPU time and executions add up).
  echo "$cpu ${execs:-0}" >>"$build/$t.totals"
  printf '%-26s %6ss wall %6s CPU-s  %12s execs  cov %5s  corpus %5d  %s\n' "$t" "$secs" "$cpu" \
    "${execs:-?}" "${cov:-?}" "$(ls "$work" | wc -l)" "$([ $rc = 0 ] && echo ok || echo "FAILED rc=$rc")"
  return $rc
}
export -f run_one

status=0
printf '%s\n' "${targets[@]}" |
  xargs -P "$par" -I{} bash -c 'run_one "$@"' _ {} "$secs" "$build" "$here" || status=$?
if [ "$secs" != 0 ]; then
  echo "totals over every run so far (CPU-s, executions):"
  for t in "${targets[@]}"; do
    [ -f "$build/$t.totals" ] &&
      awk -v t="$t" '{c += $1; e += $2} END {printf "  %-26s %7.0f CPU-s %12.0f execs\n", t, c, e}' "$build/$t.totals"
  done
fi
exit $status
