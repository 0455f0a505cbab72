// Does observing a prometheus-cpp histogram per token contend across I/O threads?  Compares
// Histogram::Observe per event (a mutex per call) with what the metrics hook does: count into a
// per-stream local bucket array and fold with one ObserveMultiple per batch.
#include <benchmark/benchmark.h>

#include <prometheus/histogram.h>

#include <algorithm>
#include <vector>

#include "hooks/observe/cache_hook.hpp"
#include "hooks/observe/metrics.hpp"
#include "parsers/request_inspector.hpp"

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

// Cache analysis per request, on a 50-message, 100 KB conversation (the budget is 20 µs):
// canonical digests of the body (one parse, texts hashed as read) and the prefix lookup.
std::string conversation_body() {
  std::string b = R"({"model":"m","stream":true,"messages":[{"role":"system","content":")" +
                  std::string(4000, 's') + "\"}";
  for (int i = 0; i < 49; ++i)
    b += R"(,{"role":")" + std::string(i % 2 ? "assistant" : "user") + R"(","content":")" +
         std::string(1950, 'a' + i % 26) + "\"}";
  return b + "]}";
}

void BM_ConversationDigests(benchmark::State& state) {
  const auto body = conversation_body();
  tokentap::parsers::request_inspector in(1u << 22);
  for (auto _ : state) {
    auto info = in.inspect(body, {.digests = true});
    benchmark::DoNotOptimize(info.digests.data());
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * body.size()));
  state.SetLabel(std::to_string(body.size() / 1024) + " KiB, 50 messages");
}
BENCHMARK(BM_ConversationDigests);

void BM_ConversationParseOnly(benchmark::State& state) {  // the same body, no digests
  const auto body = conversation_body();
  tokentap::parsers::request_inspector in(1u << 22);
  for (auto _ : state) benchmark::DoNotOptimize(in.inspect(body).messages);
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * body.size()));
}
BENCHMARK(BM_ConversationParseOnly);

void BM_PrefixTrackerObserve(benchmark::State& state) {
  const auto body = conversation_body();
  tokentap::parsers::request_inspector in(1u << 22);
  const auto digests = in.inspect(body, {.digests = true}).digests;
  tokentap::hooks::prefix_tracker t(tokentap::hooks::cache_settings{});
  std::uint64_t scope = 1;
  for (auto _ : state) {
    const auto now = std::chrono::steady_clock::now();
    auto a = t.observe(++scope % 1000, digests, now, now);
    benchmark::DoNotOptimize(a);
  }
}
BENCHMARK(BM_PrefixTrackerObserve);

}  // namespace

BENCHMARK_MAIN();
