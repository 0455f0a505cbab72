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
#include "test/support/http_client.hpp"
#include "test/support/metrics_text.hpp"
#include "test/support/process.hpp"
#include "test/support/stack.hpp"
#include "test/support/tls_cert.hpp"

namespace tokentap::test {
namespace {

// A stack whose proxy writes traces into its own directory.
struct traced {
  traced(sim::server_options so, std::function<void(config::config&)> tweak = {})
      : dir(temp_dir() + "/traces"),
        s(
            [&](config::config& cfg) {
              cfg.trace.dir = dir;
              if (tweak) tweak(cfg);
            },
            so) {}
  // The records once `n` are written.
  std::vector<replay::record> records(std::size_t n) const {
    std::vector<replay::record> out;
    for (int i = 0; i < 500; ++i) {
      if (std::filesystem::exists(dir)) out = replay::read_traces({dir}).records;
      if (out.size() >= n) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return out;
  }
  std::string dir;
  stack s;
};

sim::server_options engine_sim(sim::engine_shape e) {
  auto so = loopback_sim(30, 3, 8);
  so.engine = e;
  return so;
}

double phase_sum(const replay::record& r) {
  double sum = 0;
  for (const auto& p : r.attribution.phases) sum += p.value_or(0);
  return sum;
}

// hooks::phase's order in recorded_attribution::phases.
enum { proxy_, connect_, failed_attempts_, fault_, upstream_head_, first_token_, decode_ };

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
    u.balance = config::balance_policy::round_robin;
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

// ---- The engine's own metrics, scraped

double admin_metric(const stack& s, const std::string& name,
                    const std::map<std::string, std::string>& labels) {
  request_options o;
  o.method = "GET";
  o.target = "/metrics";
  return metric_sum(parse_metrics(fetch(s.proxy->admin_endpoint(), o).body), name, labels);
}

TEST(EngineMetrics, TheEnginesQueueIsReadWhileItFills) {
  auto so = loopback_sim(200, 100, 15);  // about 1.7 s a stream
  so.max_batch = 2;
  traced t(so, [](config::config& cfg) {
    cfg.upstreams[0].engine_metrics.enabled = true;
    cfg.upstreams[0].engine_metrics.interval = std::chrono::milliseconds(100);
  });
  std::vector<std::future<bool>> f;
  for (int i = 0; i < 5; ++i)
    f.push_back(std::async(std::launch::async, [&, i] {
      request_options o;
      o.body = chat_body(true, "fill " + std::to_string(i));
      return fetch(t.s.proxy_ep(), o).complete;
    }));
  // Two in the engine's batch, three waiting: the engine's own words, on the proxy's metrics
  // and its endpoint table.
  double running = -1, waiting = -1;
  for (int i = 0; i < 100 && !(running == 2 && waiting == 3); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    running = admin_metric(t.s, "tokentap_engine_requests", {{"state", "running"}});
    waiting = admin_metric(t.s, "tokentap_engine_requests", {{"state", "waiting"}});
  }
  EXPECT_EQ(running, 2);
  EXPECT_EQ(waiting, 3);
  request_options stats;
  stats.method = "GET";
  stats.target = "/api/stats";
  const auto body = fetch(t.s.proxy->admin_endpoint(), stats).body;
  EXPECT_NE(body.find("\"engine_running\":"), std::string::npos) << body;
  for (auto& x : f) EXPECT_TRUE(x.get());
  for (int i = 0; i < 60 && admin_metric(t.s, "tokentap_engine_requests", {{"state", "running"}});
       ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(admin_metric(t.s, "tokentap_engine_requests", {{"state", "running"}}), 0);
  EXPECT_GE(admin_metric(t.s, "tokentap_engine_scrapes_total", {{"result", "ok"}}), 3);
}

TEST(EngineMetrics, AScrapeThatFailsOrReadsGarbageIsCountedAndTrafficGoesOn) {
  for (const std::string path : {"/v1/models", "/no/such/metrics"}) {
    traced t(loopback_sim(1, 1, 3), [&](config::config& cfg) {
      cfg.upstreams[0].engine_metrics.enabled = true;
      cfg.upstreams[0].engine_metrics.path = path;
      cfg.upstreams[0].engine_metrics.interval = std::chrono::milliseconds(100);
    });
    const std::string result = path == "/v1/models" ? "garbage" : "error";
    for (int i = 0;
         i < 100 && admin_metric(t.s, "tokentap_engine_scrapes_total", {{"result", result}}) < 2;
         ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    EXPECT_GE(admin_metric(t.s, "tokentap_engine_scrapes_total", {{"result", result}}), 2) << path;
    EXPECT_EQ(admin_metric(t.s, "tokentap_engine_scrapes_total", {{"result", "ok"}}), 0) << path;
    EXPECT_EQ(admin_metric(t.s, "tokentap_engine_requests", {{"state", "waiting"}}), -1) << path;
    request_options o;
    o.body = chat_body(true, "traffic goes on");
    const auto r = fetch(t.s.proxy_ep(), o);
    EXPECT_EQ(r.status, 200u) << path;
    EXPECT_TRUE(r.complete) << path;
  }
}

// An endpoint that takes the connection and never answers: each scrape is given up by the next
// interval and counted, the next one starts on time, and traffic on other upstreams goes on.
TEST(EngineMetrics, AScrapeThatHangsIsGivenUpAtItsIntervalAndCounted) {
  boost::asio::io_context ioc;
  boost::asio::ip::tcp::acceptor silent(ioc, boost::asio::ip::tcp::v4());
  silent.bind({boost::asio::ip::make_address("127.0.0.1"), 0});
  silent.listen(64);  // the kernel completes the handshakes; nothing ever reads or answers
  traced t(loopback_sim(1, 1, 3), [&](config::config& cfg) {
    config::upstream_config up;
    up.name = "silent";
    std::string err;
    up.endpoints.push_back(*config::parse_url(
        "http://127.0.0.1:" + std::to_string(silent.local_endpoint().port()), err));
    up.engine_metrics.enabled = true;
    up.engine_metrics.interval = std::chrono::milliseconds(200);
    cfg.upstreams.push_back(up);
  });
  const auto errors = [&] {
    return admin_metric(t.s, "tokentap_engine_scrapes_total",
                        {{"upstream", "silent"}, {"result", "error"}});
  };
  for (int i = 0; i < 150 && errors() < 4; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_GE(errors(), 4);
  EXPECT_EQ(admin_metric(t.s, "tokentap_engine_scrapes_total",
                         {{"upstream", "silent"}, {"result", "ok"}}),
            0);
  EXPECT_EQ(
      admin_metric(t.s, "tokentap_engine_requests", {{"upstream", "silent"}, {"state", "waiting"}}),
      -1);
  request_options o;
  o.body = chat_body(true, "traffic goes on");
  const auto r = fetch(t.s.proxy_ep(), o);
  EXPECT_EQ(r.status, 200u);
  EXPECT_TRUE(r.complete);
}

// ---- The seed's story: one variable changed, the phase that grew named.

std::string compare_json(const std::string& a, const std::string& b) {
  const auto r = run({"analyze", "--attribute", "--compare", a, b, "--format", "json"});
  EXPECT_EQ(r.status, 0) << r.err;
  return r.out;
}

// Requests at `concurrency`, `each` per client, through the stack.
void load(const traced& t, int concurrency, int each, const std::string& tag) {
  std::vector<std::future<bool>> f;
  for (int c = 0; c < concurrency; ++c)
    f.push_back(std::async(std::launch::async, [&, c] {
      bool ok = true;
      for (int i = 0; i < each; ++i) {
        request_options o;
        o.body = chat_body(true, tag + " " + std::to_string(c) + " " + std::to_string(i));
        ok = fetch(t.s.proxy_ep(), o).complete && ok;
      }
      return ok;
    }));
  for (auto& x : f) EXPECT_TRUE(x.get());
}

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

// ---------------------------------------------------------------- faults (DESIGN.md §13)
// Injected on purpose, they are the ground truth an analysis must recover: each is counted,
// written in its record, and lands in the phase it belongs to while the engine's own account
// stays what it was.

using fault_kind = config::fault_rule::kind_t;

config::fault_rule fault_rule(std::string name, fault_kind k, std::uint32_t value,
                              double percent = 100) {
  config::fault_rule r;
  r.name = std::move(name);
  r.route = "default";
  r.kind = k;
  r.value = value;
  r.percent = percent;
  return r;
}

// /metrics (with the admin token, when the proxy has one).
std::vector<sample> metrics_of(const stack& s) {
  request_options o;
  o.method = "GET";
  o.target = "/metrics";
  if (const auto& token = s.proxy->cfg().admin_token; !token.empty())
    o.headers = {{"authorization", "Bearer " + token}};
  const auto res = fetch(s.proxy->admin_endpoint(), o);
  EXPECT_EQ(res.status, 200u) << res.body;
  return res.status == 200 ? parse_metrics(res.body) : std::vector<sample>{};
}

double injected(const stack& s, const std::string& rule, const std::string& kind) {
  return metric_sum(metrics_of(s), "tokentap_faults_injected_total",
                    {{"rule", rule}, {"kind", kind}});
}

TEST(Faults, ADelayBeforeForwardingIsTheFaultPhase) {
  traced t(engine_sim(sim::engine_shape::vllm), [](config::config& cfg) {
    cfg.faults = {fault_rule("slow-net", fault_kind::delay, 150)};
  });
  request_options o;
  o.body = chat_body(true, "delayed");
  const auto res = fetch(t.s.proxy_ep(), o);
  ASSERT_TRUE(res.complete);
  EXPECT_GE(res.head_ms, 150);
  const auto rs = t.records(1);
  ASSERT_EQ(rs.size(), 1u);
  const auto& r = rs[0];
  ASSERT_TRUE(r.fault);
  EXPECT_EQ(r.fault->rule, "slow-net");
  EXPECT_EQ(r.fault->kind, "delay");
  EXPECT_EQ(r.fault->value, 150);
  const double f = r.attribution.phases[fault_].value_or(-1);
  EXPECT_GE(f, 150);
  EXPECT_LT(f, 400);
  EXPECT_NEAR(phase_sum(r), r.e2e_ms, 1.0);
  EXPECT_GE(r.ttft_ms, 150 + 30);
  // The engine saw none of it.
  EXPECT_NEAR(r.attribution.engine_prefill_ms.value_or(-1), 30, 0.5);
  EXPECT_LT(*r.attribution.unexplained_ms, 100);
  EXPECT_EQ(injected(t.s, "slow-net", "delay"), 1);
}

TEST(Faults, AnEventDelayHoldsBackEveryEventAndLandsOutsideTheEngine) {
  traced t(engine_sim(sim::engine_shape::vllm), [](config::config& cfg) {
    cfg.faults = {fault_rule("jitter", fault_kind::event_delay, 40)};
  });
  request_options o;
  o.body = chat_body(true, "held back");
  const auto direct = fetch(t.s.sim_ep(), o);
  const auto res = fetch(t.s.proxy_ep(), o);
  ASSERT_TRUE(res.complete);
  // Every byte as the upstream sent it, only later (up to the engine's own report, whose
  // queue time differs between two requests).
  const auto report = res.body.find("\"metrics\":");
  ASSERT_NE(report, std::string::npos);
  EXPECT_EQ(res.body.substr(0, report), direct.body.substr(0, report));
  EXPECT_EQ(res.body.size(), direct.body.size());
  const auto events = sse_data(res.body).size();
  ASSERT_GE(events, 8u);
  EXPECT_GE(res.total_ms, 40.0 * static_cast<double>(events));
  const auto rs = t.records(1);
  ASSERT_EQ(rs.size(), 1u);
  const auto& r = rs[0];
  ASSERT_TRUE(r.fault);
  EXPECT_EQ(r.fault->kind, "event_delay");
  EXPECT_EQ(r.fault->value, 40);
  // The tap times each event when the fault lets it go: token gaps of 40 ms and more...
  EXPECT_GE(r.itl_p50, 40);
  EXPECT_EQ(r.attribution.phases[fault_], 0.0);  // (not a delay before forwarding)
  // ...while the engine's account is unchanged: the held-back time is nobody's the engine knows.
  EXPECT_NEAR(r.attribution.engine_prefill_ms.value_or(-1), 30, 0.5);
  EXPECT_NEAR(r.attribution.engine_decode_ms.value_or(-1), 7 * 3, 0.5);
  EXPECT_GE(r.attribution.unexplained_ms.value_or(0), 40);
  EXPECT_NEAR(phase_sum(r), r.e2e_ms, 1.0);
  EXPECT_EQ(injected(t.s, "jitter", "event_delay"), 1);
}

TEST(Faults, ACutEndsTheStreamVisiblyAfterItsEvents) {
  traced t(engine_sim(sim::engine_shape::vllm),
           [](config::config& cfg) { cfg.faults = {fault_rule("cut", fault_kind::cut, 3)}; });
  request_options o;
  o.body = chat_body(true, "cut short");
  const auto direct = fetch(t.s.sim_ep(), o);
  const auto res = fetch(t.s.proxy_ep(), o);
  EXPECT_EQ(res.status, 200u);
  EXPECT_FALSE(res.complete);  // no terminating chunk: the client knows it was cut
  EXPECT_EQ(sse_data(res.body).size(), 3u);
  EXPECT_EQ(direct.body.substr(0, res.body.size()), res.body);
  const auto rs = t.records(1);
  ASSERT_EQ(rs.size(), 1u);
  EXPECT_EQ(rs[0].outcome, "upstream_reset");
  ASSERT_TRUE(rs[0].fault);
  EXPECT_EQ(rs[0].fault->kind, "cut");
  EXPECT_EQ(rs[0].fault->value, 3);
  EXPECT_EQ(injected(t.s, "cut", "cut"), 1);
  // A non-streamed answer has no events to cut: it goes through whole, and nothing is counted.
  request_options plain;
  plain.body = chat_body(false, "whole");
  const auto whole = fetch(t.s.proxy_ep(), plain);
  EXPECT_TRUE(whole.complete);
  const auto both = t.records(2);
  ASSERT_EQ(both.size(), 2u);
  EXPECT_EQ(both[0].fault.has_value() + both[1].fault.has_value(), 1);
  EXPECT_EQ(injected(t.s, "cut", "cut"), 1);
}

TEST(Faults, AnAbortAnswersAsItsProviderWouldAndNothingIsForwarded) {
  traced t(engine_sim(sim::engine_shape::vllm), [](config::config& cfg) {
    cfg.faults = {fault_rule("refuse", fault_kind::abort, 503)};
  });
  request_options o;
  o.body = chat_body(true, "refused");
  const auto res = fetch(t.s.proxy_ep(), o);
  EXPECT_EQ(res.status, 503u);
  simdjson::dom::parser p;
  const auto openai = p.parse(res.body);
  EXPECT_EQ(std::string_view(openai["error"]["type"]), "overloaded_error") << res.body;
  EXPECT_EQ(int64_t(openai["error"]["code"]), 503) << res.body;
  request_options anthropic;
  anthropic.target = "/v1/messages";
  anthropic.body =
      R"({"model":"m","max_tokens":8,"stream":true,"messages":[{"role":"user","content":"hi"}]})";
  const auto res2 = fetch(t.s.proxy_ep(), anthropic);
  EXPECT_EQ(res2.status, 503u);
  const auto a = p.parse(res2.body);
  EXPECT_EQ(std::string_view(a["type"]), "error") << res2.body;
  EXPECT_EQ(std::string_view(a["error"]["type"]), "overloaded_error") << res2.body;
  EXPECT_EQ(t.s.sim->stats().requests.load(), 0u);
  const auto rs = t.records(2);
  ASSERT_EQ(rs.size(), 2u);
  for (const auto& r : rs) {
    EXPECT_EQ(r.outcome, "upstream_error");
    EXPECT_EQ(r.status, 503);
    ASSERT_TRUE(r.fault);
    EXPECT_EQ(r.fault->kind, "abort");
    EXPECT_EQ(r.fault->value, 503);
  }
  EXPECT_EQ(injected(t.s, "refuse", "abort"), 2);
}

TEST(Faults, PerRequestFaultsComeFromHeadersOnlyWithTheAdminToken) {
  const std::string token = "fault-token-7f3a-of-enough-length";
  traced t(engine_sim(sim::engine_shape::vllm), [&](config::config& cfg) {
    cfg.admin_token = token;
    cfg.faults = {fault_rule("by-header", fault_kind::from_header, 0)};
  });
  const auto ask = [&](std::vector<std::pair<std::string, std::string>> headers) {
    request_options o;
    o.body = chat_body(true, "per request");
    o.headers = std::move(headers);
    return fetch(t.s.proxy_ep(), o);
  };
  EXPECT_TRUE(ask({}).complete);  // no fault asked for: none
  EXPECT_EQ(ask({{"x-tokentap-fault-cut-after-events", "2"}}).status, 403u);
  EXPECT_EQ(
      ask({{"x-tokentap-fault-cut-after-events", "2"}, {"x-tokentap-admin-token", "not-the-token"}})
          .status,
      403u);
  EXPECT_EQ(
      ask({{"x-tokentap-fault-cut-after-events", "two"}, {"x-tokentap-admin-token", token}}).status,
      400u);
  EXPECT_EQ(
      ask({{"x-tokentap-fault-abort-status", "200"}, {"x-tokentap-admin-token", token}}).status,
      400u);
  EXPECT_EQ(ask({{"x-tokentap-fault-cut-after-events", "2"},
                 {"x-tokentap-fault-delay-ms", "5"},
                 {"x-tokentap-admin-token", token}})
                .status,
            400u);
  const auto cut = ask({{"x-tokentap-fault-cut-after-events", "2"},
                        {"X-Tokentap-Admin-Token", token},
                        {"x-tokentap-fault-note", "ours too"}});
  EXPECT_EQ(cut.status, 200u);
  EXPECT_FALSE(cut.complete);
  EXPECT_EQ(sse_data(cut.body).size(), 2u);
  const auto rs = t.records(7);
  ASSERT_EQ(rs.size(), 7u);
  int faulted = 0;
  for (const auto& r : rs) {
    if (r.fault) {
      ++faulted;
      EXPECT_EQ(r.fault->rule, "by-header");
      EXPECT_EQ(r.fault->kind, "cut");
      EXPECT_EQ(r.fault->value, 2);
    }
    // The upstream never sees our control headers; the token is redacted where it appears.
    for (const auto& [name, value] : r.request_headers) {
      EXPECT_NE(value, token) << name;
      if (r.outcome != "rejected") {
        EXPECT_FALSE(name.starts_with("x-tokentap-") || name.starts_with("X-Tokentap-")) << name;
      }
    }
  }
  EXPECT_EQ(faulted, 1);
  EXPECT_EQ(injected(t.s, "by-header", "cut"), 1);
  EXPECT_EQ(injected(t.s, "by-header", "delay"), 0);
  for (const auto& f : std::filesystem::recursive_directory_iterator(t.dir)) {
    std::ifstream in(f.path());
    const std::string text((std::istreambuf_iterator<char>(in)), {});
    EXPECT_EQ(text.find(token), std::string::npos) << f.path();
  }
}

TEST(Faults, ARuleFiresForItsShareOfRequests) {
  traced t(engine_sim(sim::engine_shape::none), [](config::config& cfg) {
    cfg.faults = {fault_rule("never", fault_kind::abort, 500, 0),
                  fault_rule("half", fault_kind::delay, 1, 50)};
  });
  constexpr int n = 60;
  for (int i = 0; i < n; ++i) {
    request_options o;
    o.body = chat_body(false, "share " + std::to_string(i));
    ASSERT_EQ(fetch(t.s.proxy_ep(), o).status, 200u);
  }
  const auto rs = t.records(n);
  ASSERT_EQ(rs.size(), static_cast<std::size_t>(n));
  int faulted = 0;
  for (const auto& r : rs) faulted += r.fault.has_value();
  // Binomial(60, 0.5): outside 15..45 once in ten thousand runs.
  EXPECT_GE(faulted, 15);
  EXPECT_LE(faulted, 45);
  EXPECT_EQ(injected(t.s, "half", "delay"), faulted);
  EXPECT_EQ(injected(t.s, "never", "abort"), 0);
}

TEST(Faults, AReloadChangesThem) {
  traced t(engine_sim(sim::engine_shape::none));
  request_options o;
  o.body = chat_body(false, "reloaded");
  EXPECT_EQ(fetch(t.s.proxy_ep(), o).status, 200u);
  auto next = t.s.proxy->cfg();
  next.faults = {fault_rule("limited", fault_kind::abort, 429)};
  ASSERT_TRUE(t.s.proxy->reload(next).applied);
  EXPECT_EQ(fetch(t.s.proxy_ep(), o).status, 429u);
  EXPECT_EQ(injected(t.s, "limited", "abort"), 1);
  next.faults.clear();
  ASSERT_TRUE(t.s.proxy->reload(next).applied);
  EXPECT_EQ(fetch(t.s.proxy_ep(), o).status, 200u);
}

TEST(Faults, HeaderFaultsWithoutAnAdminTokenAreRefused) {
  const auto dir = temp_dir();
  const auto file = dir + "/faults.yaml";
  std::ofstream(file) << "listen: 127.0.0.1:0\nadmin: 127.0.0.1:0\n"
                         "upstreams:\n  local: {url: http://127.0.0.1:9}\n"
                         "routes:\n  - {name: local, prefix: /, upstream: local}\n"
                         "faults:\n  - {name: by-header, from_header: true}\n";
  const auto r = run({"proxy", "--config", file}, std::chrono::seconds(10));
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_NE(r.err.find("need the admin token"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;  // one line
  // With one, it starts.
  process p({"proxy", "--config", file},
            {{"TOKENTAP_ADMIN_TOKEN", "an-admin-token-of-some-length"}});
  EXPECT_NE(p.wait_for_line("ready", std::chrono::seconds(10)), "") << p.err();
  p.signal(SIGTERM);
  EXPECT_EQ(p.wait(std::chrono::seconds(10)), 0) << p.err();
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

// ---- The engine's TTFT beside the proxy's, and the engine's queue as load

// The /api/stats row of the stack's simulator.
std::string endpoint_row(const stack& s) {
  request_options o;
  o.method = "GET";
  o.target = "/api/stats";
  const auto body = fetch(s.proxy->admin_endpoint(), o).body;
  const auto at = body.find("\"endpoint\":\"127.0.0.1:" + std::to_string(s.sim_ep().port()) + "\"");
  return at == std::string::npos ? body : body.substr(at, body.find("\"reasons\"", at) - at);
}

// The gap between the proxy's TTFT and the engine's own, with and without 120 ms injected
// between them: the engine's TTFT stays its 30 ms, the gap takes the fault.
TEST(EngineMetrics, TheTtftGapIsWhatLiesBetweenTheProxyAndTheEngine) {
  for (const int delay : {0, 120}) {
    auto so = engine_sim(sim::engine_shape::vllm);
    so.defaults.output_tokens = 3;
    traced t(so, [&](config::config& cfg) {
      cfg.upstreams[0].engine_metrics.enabled = true;
      cfg.upstreams[0].engine_metrics.interval = std::chrono::milliseconds(100);
      if (delay > 0) cfg.faults = {fault_rule("between", fault_kind::delay, delay)};
    });
    // A first scrape before any request: the window's baseline.
    for (int i = 0;
         i < 100 && admin_metric(t.s, "tokentap_engine_scrapes_total", {{"result", "ok"}}) < 1; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    load(t, 1, 8, "gap");
    double gap = std::nan("");
    for (int i = 0; i < 100 && std::isnan(gap); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      gap = metric_sum(metrics_of(t.s), "tokentap_engine_ttft_gap_seconds", {{"quantile", "0.5"}});
    }
    ASSERT_FALSE(std::isnan(gap)) << delay;
    // The engine said 30 ms (in vLLM's 20–40 ms bucket: 30 at the median); the proxy measured
    // the delay on top.
    EXPECT_GT(gap * 1000, delay - 12) << delay;
    EXPECT_LT(gap * 1000, delay + 25) << delay;
    const auto row = endpoint_row(t.s);
    EXPECT_NE(row.find("\"engine_ttft_ms\":{\"p50\":30.000,"), std::string::npos) << row;
    EXPECT_NE(row.find("\"ttft_gap_ms\":{\"p50\":"), std::string::npos) << row;
  }
}

TEST(EngineMetrics, TheGapIsUnknownWhereTheEngineKeepsNoTtftHistogram) {
  // llama.cpp's /metrics has no histograms: the gap is NaN, the row's engine TTFT null.
  traced t(loopback_sim(5, 1, 3), [](config::config& cfg) {
    cfg.upstreams[0].engine_metrics.enabled = true;
    cfg.upstreams[0].engine_metrics.interval = std::chrono::milliseconds(100);
    cfg.upstreams[0].engine_metrics.kind = "llama.cpp";  // the simulator speaks vLLM: garbage
  });
  load(t, 1, 3, "no histogram");
  for (int i = 0;
       i < 100 && admin_metric(t.s, "tokentap_engine_scrapes_total", {{"result", "garbage"}}) < 2;
       ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_TRUE(std::isnan(
      metric_sum(metrics_of(t.s), "tokentap_engine_ttft_gap_seconds", {{"quantile", "0.99"}})));
  const auto row = endpoint_row(t.s);
  EXPECT_NE(row.find("\"engine_ttft_ms\":null,\"ttft_gap_ms\":null"), std::string::npos) << row;
}

// Two replicas, one of them kept busy by another client: its engine queues what it cannot batch.
// The proxy's own streams in flight are even (none), so only the engine's queue tells them apart:
// without engine_load the power of two choices would send each request to either (all 16 to the
// idle one by chance: 1 in 65,536).
TEST(EngineMetrics, EngineLoadSendsRequestsAwayFromAnEngineWithAQueue) {
  auto busy_options = loopback_sim(2, 1, 3);
  busy_options.max_batch = 1;
  sim::server busy(busy_options);
  busy.start();
  std::vector<std::future<void>> other_client;
  for (int i = 0; i < 4; ++i)
    other_client.push_back(std::async(std::launch::async, [&, i] {
      request_options o;  // long streams, cut short when the replica shuts down below
      o.body = chat_body(true, "long " + std::to_string(i));
      o.headers = {{"x-sim-ttft-ms", "5"}, {"x-sim-itl-ms", "200"}, {"x-sim-tokens", "100"}};
      o.timeout = std::chrono::seconds(60);
      fetch(busy.endpoint(), o);
    }));
  for (int i = 0; i < 200 && busy.stats().waiting.load() < 3; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_EQ(busy.stats().waiting.load(), 3);
  traced t(loopback_sim(2, 1, 3), [&](config::config& cfg) {
    auto& up = cfg.upstreams[0];
    std::string err;
    up.endpoints.push_back(
        *config::parse_url("http://127.0.0.1:" + std::to_string(busy.endpoint().port()), err));
    up.balance = config::balance_policy::least_request;
    up.engine_metrics.enabled = true;
    up.engine_metrics.interval = std::chrono::milliseconds(100);
    up.engine_metrics.engine_load = true;
  });
  for (int i = 0;
       i < 100 && admin_metric(t.s, "tokentap_engine_requests", {{"state", "waiting"}}) < 3; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const auto queued_before = busy.stats().queued.load();
  for (int i = 0; i < 16; ++i) {
    request_options o;
    o.body = chat_body(false, "short " + std::to_string(i));
    o.timeout = std::chrono::seconds(5);  // one sent to the busy replica would wait there
    EXPECT_EQ(fetch(t.s.proxy_ep(), o).status, 200u) << i;
  }
  EXPECT_EQ(busy.stats().queued.load(), queued_before);
  busy.shutdown(std::chrono::milliseconds(0));
  for (auto& f : other_client) f.get();
}
}  // namespace
}  // namespace tokentap::test
