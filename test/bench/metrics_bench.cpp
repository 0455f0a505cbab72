// Does observing a prometheus-cpp histogram per token contend across I/O threads?  Compares
// Histogram::Observe per event (a mutex per call) with what the metrics hook does: count into a
// per-stream local bucket array and fold with one ObserveMultiple per batch.
#include <benchmark/benchmark.h>

#include <prometheus/histogram.h>

#include <algorithm>
#include <vector>

#include "hooks/metrics.hpp"

namespace {

const std::vector<double>& bounds() {
  static const auto b = tokentap::hooks::default_buckets().itl;
  return b;
}

prometheus::Histogram& shared_histogram() {
  static prometheus::Histogram h(bounds());
  return h;
}

void BM_ObservePerEvent(benchmark::State& state) {
  auto& h = shared_histogram();
  double v = 0.001;
  for (auto _ : state) {
    h.Observe(v);
    v = v > 1 ? 0.001 : v * 1.01;
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_ObservePerEvent)->Threads(1)->Threads(2)->Threads(4)->UseRealTime();

void BM_LocalTallyFoldedPerBatch(benchmark::State& state) {
  auto& h = shared_histogram();
  const auto& b = bounds();
  std::vector<double> incs(b.size() + 1, 0.0);
  double sum = 0, v = 0.001;
  std::size_t n = 0;
  for (auto _ : state) {
    incs[static_cast<std::size_t>(std::lower_bound(b.begin(), b.end(), v) - b.begin())] += 1;
    sum += v;
    // A stream at 50 tokens/s folds once a second: once per ~50 events; 1000 is a fast decoder.
    if (++n == 50) {
      h.ObserveMultiple(incs, sum);
      std::fill(incs.begin(), incs.end(), 0.0);
      sum = 0;
      n = 0;
    }
    v = v > 1 ? 0.001 : v * 1.01;
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_LocalTallyFoldedPerBatch)->Threads(1)->Threads(2)->Threads(4)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
