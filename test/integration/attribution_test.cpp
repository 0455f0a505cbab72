// Where the time went (DESIGN.md §13), through the real proxy in front of the simulator's engine
// model: each record's phases add up to its end to end, the engine's own account (in vLLM's,
// llama.cpp's, Ollama's and TGI's shapes) sits beside them, the phase histograms are on /metrics,
// and two runs that change one variable — batch pressure, a system prompt that changes every turn —
// are told apart by `tokentap analyze --attribute --compare`, naming the phase that grew and the
// cache's cause.
#include <gtest/gtest.h>

#include <csignal>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <thread>
#include <vector>

#include <simdjson.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include "replay/trace_reader.hpp"
#include "test/integration/traced_stack.hpp"
#include "test/support/http_client.hpp"
#include "test/support/metrics_text.hpp"
#include "test/support/process.hpp"
#include "test/support/stack.hpp"
#include "test/support/tls_cert.hpp"

namespace tokentap::test {
namespace {

TEST(Attribution, PhasesAddUpToEndToEndAndTheEnginesAccountSitsBeside) {
  traced t(engine_sim(sim::engine_shape::vllm));
  request_options streamed;
  streamed.body = chat_body(true, "attributed stream");
  request_options plain;
  plain.body = chat_body(false, "attributed plain");
  ASSERT_TRUE(fetch(t.s.proxy_ep(), streamed).complete);
  ASSERT_TRUE(fetch(t.s.proxy_ep(), plain).complete);
  const auto rs = t.records(2);
  ASSERT_EQ(rs.size(), 2u);
  for (const auto& r : rs) {
    SCOPED_TRACE(r.path + (r.attribution.phases[decode_] ? " streamed" : " plain"));
    ASSERT_TRUE(r.attribution.present);
    EXPECT_NEAR(phase_sum(r), r.e2e_ms, 1.0);
    for (int p : {proxy_, connect_, failed_attempts_, fault_, upstream_head_, first_token_})
      EXPECT_TRUE(r.attribution.phases[p]) << p;
    EXPECT_EQ(r.attribution.phases[fault_], 0.0);
    EXPECT_TRUE(r.attribution.client_wait_ms);
    // The simulator's engine: no queue to speak of (nothing else ran; a loaded machine may delay
    // its admission), its 30 ms prefill, its decode.
    EXPECT_EQ(r.attribution.engine_source, "vllm");
    const double queue = r.attribution.engine_queue_ms.value_or(-1);
    EXPECT_GE(queue, 0);
    EXPECT_LT(queue, 250);
    EXPECT_NEAR(r.attribution.engine_prefill_ms.value_or(-1), 30, 0.5);
    EXPECT_NEAR(r.attribution.engine_decode_ms.value_or(-1), 7 * 3, 0.5);
    // What neither explains here is loopback and scheduling: the proxy's wait for the first token
    // (a non-streamed answer: for its end) less the engine's queue and prefill (and decode).
    ASSERT_TRUE(r.attribution.unexplained_ms);
    const bool streamed_answer = r.attribution.phases[decode_].has_value();
    EXPECT_NEAR(*r.attribution.unexplained_ms,
                r.attribution.phases[upstream_head_].value_or(0) +
                    r.attribution.phases[first_token_].value_or(0) - queue -
                    *r.attribution.engine_prefill_ms -
                    (streamed_answer ? 0 : *r.attribution.engine_decode_ms),
                0.01);
    EXPECT_GT(*r.attribution.unexplained_ms, -1.0);
    EXPECT_LT(*r.attribution.unexplained_ms, 250.0);
  }
  const auto& s = rs[0].attribution.phases[decode_] ? rs[0] : rs[1];
  const auto& p = rs[0].attribution.phases[decode_] ? rs[1] : rs[0];
  EXPECT_NEAR(s.attribution.phases[proxy_].value_or(0) +
                  s.attribution.phases[connect_].value_or(0) +
                  s.attribution.phases[failed_attempts_].value_or(0) +
                  s.attribution.phases[upstream_head_].value_or(0) +
                  s.attribution.phases[first_token_].value_or(0),
              s.ttft_ms, 1.0);
  EXPECT_FALSE(p.attribution.phases[decode_]);  // its tokens came with its last byte
  // The histograms, labelled by route, model and phase.
  request_options o;
  o.method = "GET";
  o.target = "/metrics";
  const auto m = parse_metrics(fetch(t.s.proxy->admin_endpoint(), o).body);
  for (const char* phase : {"proxy", "connect", "upstream_head", "first_token", "decode",
                            "client_wait", "engine_queue", "engine_prefill", "unexplained"})
    EXPECT_GE(metric_sum(m, "tokentap_latency_phase_seconds_count",
                         {{"route", "default"}, {"model", "sim-small"}, {"phase", phase}}),
              phase == std::string("decode") ? 1 : 2)
        << phase;
  EXPECT_EQ(metric_sum(m, "tokentap_engine_timings_invalid_total"), 0);
}

TEST(Attribution, LlamaCppTimingsOllamaDurationsAndTgiHeadersAreReadToo) {
  {
    traced t(engine_sim(sim::engine_shape::llamacpp));
    request_options o;
    o.body = chat_body(true, "llama shaped");
    ASSERT_TRUE(fetch(t.s.proxy_ep(), o).complete);
    const auto rs = t.records(1);
    ASSERT_EQ(rs.size(), 1u);
    EXPECT_EQ(rs[0].attribution.engine_source, "llama.cpp");
    EXPECT_FALSE(rs[0].attribution.engine_queue_ms);  // llama.cpp reports none
    EXPECT_NEAR(rs[0].attribution.engine_prefill_ms.value_or(-1), 30, 0.5);
    EXPECT_TRUE(rs[0].attribution.unexplained_ms);
  }
  {
    // Ollama's native API: NDJSON, streamed without a `stream` key, its durations in ns on the
    // done line; the wait for a runner (here a batch slot) is in load_duration.
    traced t(engine_sim(sim::engine_shape::ollama));
    request_options o;
    o.target = "/api/chat";
    o.body = R"({"model":"llama3.2","messages":[{"role":"user","content":"ollama shaped"}]})";
    const auto r = fetch(t.s.proxy_ep(), o);
    ASSERT_TRUE(r.complete);
    EXPECT_EQ(r.headers.at("content-type"), "application/x-ndjson");
    const auto rs = t.records(1);
    ASSERT_EQ(rs.size(), 1u);
    EXPECT_EQ(rs[0].provider, "ollama");
    EXPECT_EQ(rs[0].output_tokens, 8);
    EXPECT_GT(rs[0].ttft_ms, 0);
    EXPECT_EQ(rs[0].attribution.engine_source, "ollama");
    EXPECT_FALSE(rs[0].attribution.engine_queue_ms);
    const double load = rs[0].attribution.engine_load_ms.value_or(-1);
    EXPECT_GE(load, 0);
    EXPECT_LT(load, 250);
    EXPECT_NEAR(rs[0].attribution.engine_prefill_ms.value_or(-1), 30, 0.01);
    EXPECT_NEAR(rs[0].attribution.engine_decode_ms.value_or(-1), 7 * 3, 0.01);
    ASSERT_TRUE(rs[0].attribution.unexplained_ms);
    EXPECT_NEAR(*rs[0].attribution.unexplained_ms,
                rs[0].attribution.phases[upstream_head_].value_or(0) +
                    rs[0].attribution.phases[first_token_].value_or(0) - load -
                    *rs[0].attribution.engine_prefill_ms,
                0.01);
    EXPECT_GT(*rs[0].attribution.unexplained_ms, -1.0);
    EXPECT_LT(*rs[0].attribution.unexplained_ms, 250.0);
  }
  {
    traced t(engine_sim(sim::engine_shape::tgi));
    request_options o;
    o.body = chat_body(false, "tgi shaped");
    ASSERT_TRUE(fetch(t.s.proxy_ep(), o).complete);
    const auto rs = t.records(1);
    ASSERT_EQ(rs.size(), 1u);
    EXPECT_EQ(rs[0].attribution.engine_source, "tgi");
    const double queue = rs[0].attribution.engine_queue_ms.value_or(-1);  // whole ms
    EXPECT_GE(queue, 0);
    EXPECT_LT(queue, 250);
    EXPECT_NEAR(rs[0].attribution.engine_inference_ms.value_or(-1), 30 + 7 * 3, 1.5);
    ASSERT_TRUE(rs[0].attribution.unexplained_ms);
    EXPECT_NEAR(*rs[0].attribution.unexplained_ms,
                rs[0].attribution.phases[upstream_head_].value_or(0) +
                    rs[0].attribution.phases[first_token_].value_or(0) - queue -
                    *rs[0].attribution.engine_inference_ms,
                0.01);
    EXPECT_GT(*rs[0].attribution.unexplained_ms, -2.0);  // (TGI's headers are whole ms)
    EXPECT_LT(*rs[0].attribution.unexplained_ms, 250.0);
  }
}

TEST(Attribution, AFailedAttemptIsItsOwnPhase) {
  traced t(engine_sim(sim::engine_shape::vllm), [](config::config& cfg) {
    auto& u = cfg.upstreams[0];
    std::string err;
    u.endpoints.insert(
        u.endpoints.begin(),
        *config::parse_url("http://127.0.0.1:" + std::to_string(closed_port()), err));
    u.balance = "round_robin";
    u.retries = 1;
  });
  for (int i = 0; i < 2; ++i) {
    request_options o;
    o.body = chat_body(true, "failover " + std::to_string(i));
    ASSERT_EQ(fetch(t.s.proxy_ep(), o).status, 200u);
  }
  const auto rs = t.records(2);
  ASSERT_EQ(rs.size(), 2u);
  int failed_over = 0;
  for (const auto& r : rs) {
    EXPECT_NEAR(phase_sum(r), r.e2e_ms, 1.0);
    if (r.attribution.phases[failed_attempts_].value_or(0) > 0.01) ++failed_over;
  }
  EXPECT_EQ(failed_over, 1);  // round robin: one of the two met the closed port first
}

// ---- The seed's story: one variable changed, the phase that grew named.

TEST(AttributionStory, BatchPressureShowsAsTheEnginesQueue) {
  auto so = engine_sim(sim::engine_shape::vllm);
  so.defaults.ttft_ms = 20;
  so.defaults.itl_ms = 4;
  so.defaults.output_tokens = 10;
  so.max_batch = 4;
  so.itl_per_seq_us = 200;
  traced a(so), b(so);
  load(a, 2, 15, "calm");  // never more than the batch holds
  load(b, 16, 3, "rush");  // four times the batch: most requests wait
  ASSERT_EQ(a.records(30).size(), 30u);
  ASSERT_EQ(b.records(48).size(), 48u);
  const auto out = compare_json(a.dir, b.dir);
  simdjson::dom::parser p;
  const auto doc = p.parse(out);
  const double ta = doc["totals"]["ttft_p99"]["a_ms"], tb = doc["totals"]["ttft_p99"]["b_ms"];
  EXPECT_GE(tb, 2 * ta) << out;
  const auto top = doc["ttft"]["p99"].at(0);
  EXPECT_EQ(std::string_view(top["phase"]), "engine_queue") << out;
  EXPECT_GT(double(top["share"]), 0.8) << out;
  // The line for the incident says so.
  const std::string_view line = doc["lines"].at(2);
  EXPECT_EQ(line.rfind("TTFT P99 +", 0), 0u) << line;
  EXPECT_NE(line.find(": engine_queue +"), std::string_view::npos) << line;
}

// Conversations of three turns; in B the application puts the time in its system prompt, so
// every turn's prompt differs from its previous one at the first message and the engine's prefix
// cache cannot serve it.
TEST(AttributionStory, ASystemPromptThatChangesEveryTurnShowsAsPrefillAndItsCause) {
  auto so = engine_sim(sim::engine_shape::vllm);
  so.defaults.ttft_ms = 5;
  so.defaults.itl_ms = 1;
  so.defaults.output_tokens = 4;
  so.defaults.prefill_us_per_token = 40;
  so.cache.capacity_blocks = 100000;
  traced a(so), b(so);
  std::string instructions;
  for (int i = 0; i < 120; ++i) instructions += "Answer carefully and cite your sources. ";
  const auto turn_body = [&](bool clock_in_prompt, int conv, int turns) {
    std::string sys = instructions;
    if (clock_in_prompt) sys = "Now: 12:00:" + std::to_string(10 * conv + turns) + ". " + sys;
    std::string msgs = R"([{"role":"system","content":")" + sys + R"("})";
    for (int t = 0; t < turns; ++t) {
      msgs += R"(,{"role":"user","content":"conversation )" + std::to_string(conv) + " question " +
              std::to_string(t) + R"("})";
      if (t + 1 < turns)
        msgs += R"(,{"role":"assistant","content":"answer )" + std::to_string(t) + R"("})";
    }
    return R"({"model":"sim-small","stream":true,"stream_options":{"include_usage":true},"messages":)" +
           msgs + "]}";
  };
  for (auto* t : {&a, &b}) {
    const bool clock = t == &b;
    // Warm-up, straight to the engine (no trace): its cache holds the instructions.
    request_options warm;
    warm.body = turn_body(false, 99, 1);
    ASSERT_TRUE(fetch(t->s.sim_ep(), warm).complete);
    for (int conv = 0; conv < 12; ++conv)
      for (int turns = 1; turns <= 3; ++turns) {
        request_options o;
        o.body = turn_body(clock, conv, turns);
        ASSERT_TRUE(fetch(t->s.proxy_ep(), o).complete);
      }
  }
  ASSERT_EQ(a.records(36).size(), 36u);
  ASSERT_EQ(b.records(36).size(), 36u);
  const auto out = compare_json(a.dir, b.dir);
  simdjson::dom::parser p;
  const auto doc = p.parse(out);
  EXPECT_GE(double(doc["totals"]["ttft_p99"]["b_ms"]),
            2 * double(doc["totals"]["ttft_p99"]["a_ms"]))
      << out;
  EXPECT_EQ(std::string_view(doc["ttft"]["p50"].at(0)["phase"]), "engine_prefill") << out;
  EXPECT_EQ(std::string_view(doc["ttft"]["p99"].at(0)["phase"]), "engine_prefill") << out;
  // The cause beside it: later turns lost their prefix because the system prompt changed.
  EXPECT_GE(int64_t(doc["cache"]["b"]["causes"]["system prompt changed"]), 24) << out;
  EXPECT_EQ(doc["cache"]["a"]["causes"]["system prompt changed"].error(), simdjson::NO_SUCH_FIELD)
      << out;
  const std::string_view cache_line = doc["lines"].at(6);
  EXPECT_NE(cache_line.find("system prompt changed"), std::string_view::npos) << cache_line;
}

TEST(AttributionStory, AnInjectedDelayIsFoundAsTheFaultPhase) {
  auto so = engine_sim(sim::engine_shape::vllm);
  so.defaults.ttft_ms = 10;
  so.defaults.itl_ms = 2;
  so.defaults.output_tokens = 6;
  traced a(so), b(so, [](config::config&cfg) {
    cfg.faults = {fault_rule("slow-net", fault_kind::delay, 80)};
  });
  load(a, 2, 10, "baseline");
  load(b, 2, 10, "delayed");
  ASSERT_EQ(a.records(20).size(), 20u);
  ASSERT_EQ(b.records(20).size(), 20u);
  const auto out = compare_json(a.dir, b.dir);
  simdjson::dom::parser p;
  const auto doc = p.parse(out);
  const auto top = doc["ttft"]["p50"].at(0);
  EXPECT_EQ(std::string_view(top["phase"]), "fault") << out;
  EXPECT_NEAR(double(top["delta_ms"]), 80, 20) << out;
  EXPECT_GT(double(top["share"]), 0.8) << out;
  const std::string_view line = doc["lines"].at(0);
  EXPECT_NE(line.find(": fault +"), std::string_view::npos) << line;
  EXPECT_EQ(int64_t(doc["faults"]["b"]["slow-net delay 80 ms"]), 20) << out;
  const std::string_view truth = doc["lines"].at(7);  // (after the six totals and the cache's)
  EXPECT_EQ(truth, "faults injected: B slow-net delay 80 ms x20 (A: none)");
}

}  // namespace
}  // namespace tokentap::test
