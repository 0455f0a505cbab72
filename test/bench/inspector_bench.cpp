// The request inspector on long conversations (BENCHMARKS.md): 1, 4 and 16 MiB of chat history,
// without and with the digests the cache hook asks for; bytes per second of request body.
//
//   build/test/tokentap_inspector_bench --benchmark_repetitions=5
//   --benchmark_report_aggregates_only
#include <benchmark/benchmark.h>

#include <string>

#include "parsers/request_inspector.hpp"

namespace {

using tokentap::parsers::inspect_options;
using tokentap::parsers::request_inspector;

// A growing chat: a system prompt, then user and assistant turns of ~2 KB (some with escapes and
// non-ASCII text, as real conversations have), until `bytes`.
std::string conversation(std::size_t bytes) {
  std::string body =
      R"({"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[)"
      R"({"role":"system","content":"You are a careful assistant. Answer briefly."})";
  // ~70-byte units with escapes and non-ASCII text, as real conversations have; a turn is
  // 20 to 30 of them (cut between units: never inside an escape).
  const std::string unit =
      "The quick brown fox jumps over the lazy dog; \\\"quoted\\\" \\u00e9t\\u00e9 ";
  for (std::size_t i = 0; body.size() < bytes; ++i) {
    body += std::string(R"(,{"role":")") + (i % 2 ? "assistant" : "user") + R"(","content":")";
    for (std::size_t u = 0; u < 20 + i % 11; ++u) body += unit;
    body += R"("})";
  }
  return body + "]}";
}

void BM_Inspect(benchmark::State& state) {
  const auto body = conversation(static_cast<std::size_t>(state.range(0)) << 20);
  const inspect_options opts{.digests = state.range(1) != 0};
  request_inspector in(64u << 20);
  std::size_t messages = 0;
  for (auto _ : state) {
    const auto info = in.inspect(body, opts);
    if (!info.error.empty()) {
      state.SkipWithError(std::string(info.error).c_str());
      break;
    }
    messages = info.messages;
    benchmark::DoNotOptimize(info);
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * body.size()));
  state.counters["messages"] = static_cast<double>(messages);
}
BENCHMARK(BM_Inspect)
    ->ArgNames({"MiB", "digests"})
    ->ArgsProduct({{1, 4, 16}, {0, 1}})
    ->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
