// Faults injected on purpose (DESIGN.md §13) through the real proxy: they are the ground truth
// an analysis must recover, so each is counted, written in its record, and lands in the phase it
// belongs to while the engine's own account stays what it was.  Per-request faults come from
// headers only with the admin token; a reload changes the rules.
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

}  // namespace
}  // namespace tokentap::test
