// The attribution of one exchange's time (DESIGN.md §13): the proxy's phases partition its end to
// end whatever the exchange reached, and the engine's account is set against the proxy's own.
#include "hooks/observe/attribution.hpp"

#include <gtest/gtest.h>

namespace tokentap::hooks {
namespace {

constexpr mono_ns ms = 1'000'000;

double sum_of_phases(const attribution& a) {
  double s = 0;
  for (const auto& p : a.phases)
    if (p) s += *p;
  return s;
}

// A streamed exchange: 1 ms of our work, a 2 ms failed attempt, 3 ms connecting, 40 ms to the
// head, 10 ms to the first token, 100 ms decoding.
phase_marks streamed_marks() {
  return {.routed = 1 * ms, .fault_done = 1 * ms, .attempt = 3 * ms, .connected = 6 * ms};
}
attribution_input streamed_input() {
  return {.start_ns = 0,
          .head_ns = 46 * ms,
          .first_token_ns = 56 * ms,
          .end_ns = 156 * ms,
          .client_wait_ns = 2 * ms};
}

TEST(Attribution, PhasesOfAStreamAddUpToItsEndToEnd) {
  const auto a = attribute(streamed_marks(), streamed_input());
  EXPECT_EQ(a[phase::proxy], 1.0);
  EXPECT_EQ(a[phase::fault], 0.0);
  EXPECT_EQ(a[phase::failed_attempts], 2.0);
  EXPECT_EQ(a[phase::connect], 3.0);
  EXPECT_EQ(a[phase::upstream_head], 40.0);
  EXPECT_EQ(a[phase::first_token], 10.0);
  EXPECT_EQ(a[phase::decode], 100.0);
  EXPECT_EQ(a.client_wait_ms, 2.0);
  EXPECT_DOUBLE_EQ(sum_of_phases(a), 156.0);
  EXPECT_EQ(a.ttft_ms(), 56.0);
  EXPECT_FALSE(a.engine.reported());
  EXPECT_FALSE(a.unexplained_ms);
}

TEST(Attribution, ANonStreamedAnswerHasItsTokensAtItsEnd) {
  auto in = streamed_input();
  in.first_token_ns = -1;
  const auto a = attribute(streamed_marks(), in);
  EXPECT_EQ(a[phase::first_token], 110.0);  // head -> end
  EXPECT_FALSE(a[phase::decode]);
  EXPECT_FALSE(a.ttft_ms());
  EXPECT_DOUBLE_EQ(sum_of_phases(a), 156.0);
}

TEST(Attribution, WhatTheExchangeNeverReachedIsUnknownAndTheRestStillAddsUp) {
  // Answered by a hook: never forwarded.
  auto a = attribute({}, {.start_ns = 5 * ms, .end_ns = 9 * ms});
  EXPECT_EQ(a[phase::proxy], 4.0);
  for (auto p : {phase::fault, phase::failed_attempts, phase::connect, phase::upstream_head,
                 phase::first_token, phase::decode})
    EXPECT_FALSE(a[p]) << to_string(p);
  EXPECT_FALSE(a.client_wait_ms);
  // The connection was refused: its attempt runs to the end (the 502 answered).
  a = attribute({.routed = 1 * ms, .fault_done = 1 * ms, .attempt = 1 * ms},
                {.start_ns = 0, .end_ns = 8 * ms});
  EXPECT_EQ(a[phase::connect], 7.0);
  EXPECT_FALSE(a[phase::upstream_head]);
  EXPECT_DOUBLE_EQ(sum_of_phases(a), 8.0);
  // Connected, but no head came (a timeout).
  a = attribute({.routed = 1 * ms, .fault_done = 1 * ms, .attempt = 1 * ms, .connected = 2 * ms},
                {.start_ns = 0, .end_ns = 30 * ms});
  EXPECT_EQ(a[phase::upstream_head], 28.0);
  EXPECT_FALSE(a[phase::first_token]);
  EXPECT_DOUBLE_EQ(sum_of_phases(a), 30.0);
}

// A token's arrival is the kernel's stamp, which can precede the head's read: no phase is
// negative, and the sum is still the end to end.
TEST(Attribution, StampsOutOfOrderNeverMakeANegativePhase) {
  auto in = streamed_input();
  in.first_token_ns = 45 * ms;  // before the head (46)
  const auto a = attribute(streamed_marks(), in);
  EXPECT_EQ(a[phase::first_token], 0.0);
  EXPECT_EQ(a[phase::decode], 110.0);
  EXPECT_DOUBLE_EQ(sum_of_phases(a), 156.0);
  for (const auto& p : a.phases) EXPECT_GE(p.value_or(0), 0);
}

TEST(Attribution, TheEngineAccountLeavesTheNetworkAndItsFrontEndUnexplained) {
  // llama.cpp: no queue field; its prefill against head + first token (50 ms).
  parsers::engine_account llama;
  llama.source = parsers::engine_account::source_t::llamacpp;
  llama.prefill_ms = 35;
  llama.decode_ms = 98;
  auto in = streamed_input();
  in.engine = &llama;
  in.prompt_tokens = 2048;
  in.cached_tokens = 1920;
  auto a = attribute(streamed_marks(), in);
  EXPECT_EQ(a.engine.source, parsers::engine_account::source_t::llamacpp);
  EXPECT_EQ(a.engine_prompt_tokens, 2048);
  EXPECT_EQ(a.engine_cached_tokens, 1920);
  EXPECT_DOUBLE_EQ(*a.unexplained_ms, 15.0);
  // vLLM: its queue too.
  parsers::engine_account vllm;
  vllm.source = parsers::engine_account::source_t::vllm;
  vllm.queue_ms = 30;
  vllm.prefill_ms = 15;
  in.engine = &vllm;
  a = attribute(streamed_marks(), in);
  EXPECT_DOUBLE_EQ(*a.unexplained_ms, 5.0);
  // More than the proxy saw: a negative figure, said as it is.
  vllm.queue_ms = 45;
  a = attribute(streamed_marks(), in);
  EXPECT_DOUBLE_EQ(*a.unexplained_ms, -10.0);
  // A non-streamed answer: the engine's decode is inside head -> end too (150 ms).
  in.first_token_ns = -1;
  vllm.queue_ms = 30;
  vllm.decode_ms = 100;
  a = attribute(streamed_marks(), in);
  EXPECT_DOUBLE_EQ(*a.unexplained_ms, 150.0 - 145.0);
  // TGI's headers: queue and inference.
  parsers::engine_account tgi;
  tgi.source = parsers::engine_account::source_t::tgi;
  tgi.queue_ms = 20;
  tgi.inference_ms = 120;
  in.engine = &tgi;
  a = attribute(streamed_marks(), in);
  EXPECT_DOUBLE_EQ(*a.unexplained_ms, 10.0);
}

TEST(Attribution, NoPrefillOrNoHeadNoUnexplained) {
  parsers::engine_account vllm;
  vllm.source = parsers::engine_account::source_t::vllm;
  vllm.queue_ms = 30;  // and no prefill: a guess is not made
  auto in = streamed_input();
  in.engine = &vllm;
  auto a = attribute(streamed_marks(), in);
  EXPECT_TRUE(a.engine.reported());
  EXPECT_FALSE(a.unexplained_ms);
  vllm.prefill_ms = 10;
  in.head_ns = 0;
  in.first_token_ns = -1;
  a = attribute(streamed_marks(), in);
  EXPECT_FALSE(a.unexplained_ms);
}

}  // namespace
}  // namespace tokentap::hooks
