// The timing hook fed by the chain as the proxy feeds it: TTFT, inter-token gaps and end to end
// from the reads' timestamps, per choice when there are several, tokens timed by their read's
// arrival and the overhead from read to written, exact samples up to a cap then a sketch, and
// the nearest-rank quantiles behind them.
#include "hooks/observe/timing_hook.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "hooks/hook_chain.hpp"
#include "test/hooks/chain_helpers.hpp"

namespace tokentap::hooks {
namespace {

using namespace chain_test;

TEST(TimingHook, ItsSectionSetsTheStallThresholdAndTheExactSamples) {
  const auto read = [](const std::string& yaml) {
    return timing_settings::parse(config::parse_config(yaml, false).hook_section("timing"));
  };
  const auto t = read("timing: {stall_threshold_ms: 250, exact_samples: 512}\n");
  EXPECT_EQ(t.stall_threshold, std::chrono::milliseconds(250));
  EXPECT_EQ(t.exact_samples, 512u);
  const auto defaults = read("{}");
  EXPECT_EQ(defaults.stall_threshold, std::chrono::milliseconds(1000));
  EXPECT_EQ(defaults.exact_samples, 4096u);
}

TEST(HookChain, TimingFiguresFromReadTimestamps) {
  timed_stream ts({.stall_threshold = std::chrono::milliseconds(100)});
  auto& tap = ts.tap;
  auto& cap = ts.cap;
  const mono_ns t0 = timed_stream::t0;
  auto body = [&](const std::string& b, mono_ns at, mono_ns write_cost = ms / 10) {
    tap->on_body({b.data(), b.size()}, {at, at, at + write_cost});
  };
  body(chunk("reasoning_content", "First,"), t0 + 50 * ms);             // TTFT 50
  body(chunk("reasoning_content", " so"), t0 + 60 * ms);                // gap 10
  body(chunk("content", "Yes") + chunk("content", "!"), t0 + 80 * ms);  // gap 20, then 0
  body(chunk("content", " Done"), t0 + 280 * ms);                       // gap 200: a stall
  body(
      "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":5}}\n\ndata: "
      "[DONE]\n\n",
      t0 + 281 * ms);
  tap->on_stream_end(stream_outcome::ok, t0 + 300 * ms);

  const auto& s = cap->summary;
  EXPECT_EQ(s.outcome, stream_outcome::ok);
  EXPECT_EQ(s.provider, parsers::provider::openai_chat);
  EXPECT_EQ(s.usage.input_tokens, 9);
  EXPECT_EQ(s.usage.output_tokens, 5);
  EXPECT_EQ(s.usage.reasoning_tokens, 2);
  const auto& t = s.timing;
  EXPECT_DOUBLE_EQ(t.upstream_headers_ms, 5);
  EXPECT_DOUBLE_EQ(t.ttft_ms, 50);
  EXPECT_DOUBLE_EQ(t.ttft_answer_ms, 80);
  EXPECT_DOUBLE_EQ(t.e2e_ms, 300);
  EXPECT_DOUBLE_EQ(t.decode_ms, 230);
  EXPECT_DOUBLE_EQ(t.tpot_ms, 230.0 / 4);
  EXPECT_EQ(t.stalls, 1u);
  EXPECT_EQ(t.itl.count, 4u);  // 10, 20, 0, 200
  EXPECT_DOUBLE_EQ(t.itl.p50, 10);
  EXPECT_DOUBLE_EQ(t.itl.max, 200);
  EXPECT_EQ(t.itl_reasoning.count, 1u);
  EXPECT_EQ(t.itl_content.count, 3u);
  EXPECT_EQ(t.overhead.count, 5u);
  EXPECT_NEAR(t.overhead.p50, 0.1, 1e-9);
  // Every token carries the time of the read that brought it.
  ASSERT_EQ(cap->tokens.size(), 5u);
  EXPECT_EQ(cap->tokens[2].second, cap->tokens[3].second);
}

// Several choices (n > 1) interleaved: gaps are measured within a choice (choice 0's tokens at
// 50, 70, 90 ms and choice 1's at 60, 100 ms give gaps 20, 20 and 40 — never the 10 ms between
// two choices), TTFT is the first token of any choice, and the summary has each choice's count
// and finish reason.
TEST(HookChain, SeveralChoicesAreTimedEachOnItsOwn) {
  timed_stream ts;
  auto& tap = ts.tap;
  const mono_ns t0 = timed_stream::t0;
  auto body = [&](int choice, std::string_view text, mono_ns at, std::string_view finish = "") {
    const std::string b =
        R"(data: {"choices":[{"index":)" + std::to_string(choice) + R"(,"delta":{"content":")" +
        std::string(text) + R"("},"finish_reason":)" +
        (finish.empty() ? std::string("null") : "\"" + std::string(finish) + "\"") + "}]}\n\n";
    tap->on_body({b.data(), b.size()}, {at, at, at});
  };
  body(0, "a", t0 + 50 * ms);
  body(1, "x", t0 + 60 * ms);
  body(0, "b", t0 + 70 * ms);
  body(0, "c", t0 + 90 * ms, "stop");
  body(1, "y", t0 + 100 * ms, "length");
  tap->on_stream_end(stream_outcome::ok, t0 + 120 * ms);
  const auto& s = ts.cap->summary;
  EXPECT_DOUBLE_EQ(s.timing.ttft_ms, 50);
  EXPECT_EQ(s.timing.itl_values_ms, (std::vector<double>{20, 20, 40}));
  EXPECT_DOUBLE_EQ(s.timing.itl.max, 40);
  EXPECT_DOUBLE_EQ(s.timing.decode_ms, 50);  // first to last token of any choice
  EXPECT_EQ(s.token_events, 5u);
  EXPECT_EQ(s.choices, 2u);
  ASSERT_EQ(s.by_choice.size(), 2u);
  EXPECT_EQ(s.by_choice[0].index, 0u);
  EXPECT_EQ(s.by_choice[0].token_events, 3u);
  EXPECT_EQ(s.by_choice[0].finish_reason, "stop");
  EXPECT_EQ(s.by_choice[1].index, 1u);
  EXPECT_EQ(s.by_choice[1].token_events, 2u);
  EXPECT_EQ(s.by_choice[1].finish_reason, "length");
  EXPECT_EQ(s.finish_reason, "length");  // the last reported
}

// One choice: no per-choice rows, and the count says so.
TEST(HookChain, OneChoiceHasNoPerChoiceRows) {
  timed_stream ts;
  const std::string b = chunk("content", "a") + chunk("content", "b");
  ts.tap->on_body({b.data(), b.size()},
                  {timed_stream::t0 + ms, timed_stream::t0 + ms, timed_stream::t0 + ms});
  ts.tap->on_stream_end(stream_outcome::ok, timed_stream::t0 + 2 * ms);
  EXPECT_EQ(ts.cap->summary.choices, 1u);
  EXPECT_TRUE(ts.cap->summary.by_choice.empty());
}

// Tokens are timed by their bytes' arrival at the proxy, the overhead by the proxy's own work
// (read done → written): bytes that waited in the socket while the proxy was busy elsewhere
// move neither the gaps between tokens nor TTFT, and do not count as overhead.
TEST(HookChain, TokensAreTimedByArrivalTheOverheadByReadToWritten) {
  timed_stream ts;
  auto& tap = ts.tap;
  auto& cap = ts.cap;
  const mono_ns t0 = timed_stream::t0;
  // Arrivals 10 ms apart; the second and third reads completed 7 and 1 ms after theirs.
  const mono_ns arrived[] = {t0 + 50 * ms, t0 + 60 * ms, t0 + 70 * ms};
  const mono_ns waited[] = {0, 7 * ms, 1 * ms};
  for (int i = 0; i < 3; ++i) {
    const auto b = chunk("content", "t");
    const mono_ns read = arrived[i] + waited[i];
    tap->on_body({b.data(), b.size()}, {arrived[i], read, read + ms / 10});
  }
  tap->on_stream_end(stream_outcome::ok, t0 + 100 * ms);
  ASSERT_EQ(cap->tokens.size(), 3u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(cap->tokens[i].second, arrived[i]);
  const auto& t = cap->summary.timing;
  EXPECT_DOUBLE_EQ(t.ttft_ms, 50);
  EXPECT_EQ(t.itl.count, 2u);
  EXPECT_DOUBLE_EQ(t.itl.p50, 10);
  EXPECT_DOUBLE_EQ(t.itl.max, 10);
  EXPECT_EQ(t.overhead.count, 3u);
  EXPECT_NEAR(t.overhead.max, 0.1, 1e-9);
}

TEST(HookChain, TimingKeepsExactSamplesUpToItsCapThenASketch) {
  // A long stream: 1,000 tokens with gaps of 1..100 ms, but only 50 samples kept exactly.  The
  // count and max stay exact, the quantiles within the sketch's 2 %, itl_values_ms is the first
  // 50 gaps in order — and the stream's memory no longer grows with its length.
  config::config cfg;
  auto cap = std::make_shared<capture_factory>();
  hook_chain_factory f(
      cfg, {std::make_shared<timing_hook_factory>(timing_settings{.exact_samples = 50}), cap});
  auto tap = f.create();
  const mono_ns t0 = 1000 * ms;
  tap->on_request(request(t0));
  tap->on_response_head({200, "text/event-stream", "", t0, {}});
  std::vector<double> gaps;
  mono_ns at = t0 + 10 * ms;
  for (int i = 0; i < 1000; ++i) {
    if (i > 0) {
      const int g = 1 + (i * 37) % 100;
      gaps.push_back(g);
      at += g * ms;
    }
    const auto b = chunk("content", "x");
    tap->on_body({b.data(), b.size()}, {at, at, at + ms / 10});
  }
  tap->on_stream_end(stream_outcome::ok, at + ms);
  const auto& t = cap->summary.timing;
  EXPECT_EQ(t.itl.count, 999u);
  EXPECT_EQ(t.itl_content.count, 999u);
  EXPECT_EQ(t.overhead.count, 1000u);
  ASSERT_EQ(t.itl_values_ms.size(), 50u);
  for (std::size_t i = 0; i < 50; ++i) EXPECT_DOUBLE_EQ(t.itl_values_ms[i], gaps[i]) << i;
  std::vector<double> sorted = gaps;
  const auto exact = quantiles_of(sorted);
  EXPECT_DOUBLE_EQ(t.itl.max, exact.max);
  EXPECT_NEAR(t.itl.p50, exact.p50, 0.021 * exact.p50);
  EXPECT_NEAR(t.itl.p95, exact.p95, 0.021 * exact.p95);
  EXPECT_NEAR(t.itl.p99, exact.p99, 0.021 * exact.p99);
  EXPECT_NEAR(t.overhead.p50, 0.1, 0.021 * 0.1);
}

TEST(Quantiles, NearestRank) {
  std::vector<double> v;
  for (int i = 100; i >= 1; --i) v.push_back(i);
  const auto q = quantiles_of(v);
  EXPECT_EQ(q.p50, 50);
  EXPECT_EQ(q.p95, 95);
  EXPECT_EQ(q.p99, 99);
  EXPECT_EQ(q.max, 100);
  std::vector<double> one{7};
  EXPECT_EQ(quantiles_of(one).p99, 7);
  // Selection gives what sorting gives, for every size and with repeated values.
  std::mt19937 rng(8);
  for (std::size_t n = 1; n <= 300; ++n) {
    std::vector<double> x(n);
    for (auto& e : x) e = static_cast<double>(rng() % (n < 50 ? 5 : 1000));
    auto sorted = x;
    std::sort(sorted.begin(), sorted.end());
    auto at = [&](double p) {
      const auto r = static_cast<std::size_t>(std::ceil(p * static_cast<double>(n)));
      return sorted[std::min(n - 1, r == 0 ? 0 : r - 1)];
    };
    const auto got = quantiles_of(x);
    EXPECT_EQ(got.p50, at(0.50)) << n;
    EXPECT_EQ(got.p95, at(0.95)) << n;
    EXPECT_EQ(got.p99, at(0.99)) << n;
    EXPECT_EQ(got.max, sorted.back()) << n;
    EXPECT_EQ(got.count, n);
  }
}

}  // namespace
}  // namespace tokentap::hooks
