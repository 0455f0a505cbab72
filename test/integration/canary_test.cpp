// Canaries through the real proxy and two real simulators (the route's upstream and the canary's):
// a slower canary is rolled back by the proxy's own TTFT measurements — its share 0 on the
// metrics, the reason in /api/stats and on the dashboard, every later request on the baseline;
// a healthy one climbs to all traffic, and conversations keep their side while it climbs.
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "hooks/hook.hpp"
#include "hooks/registry.hpp"
#include "test/support/browser.hpp"
#include "test/support/http_client.hpp"
#include "test/support/metrics_text.hpp"
#include "test/support/stack.hpp"

namespace tokentap::test {
namespace {

using namespace std::chrono_literals;

// The route's upstream ("default", the stack's simulator) gets a canary "next" on `port`, with
// these `canary:` knobs.
std::function<void(config::config&)> with_canary(std::uint16_t port, const std::string& knobs) {
  return [=](config::config& cfg) {
    config::upstream_config next;
    next.name = "next";
    std::string err;
    next.endpoints.push_back(*config::parse_url("http://127.0.0.1:" + std::to_string(port), err));
    cfg.upstreams.push_back(next);
    config::set_hook_sections(cfg, "canary: {route: default, upstream: next, " + knobs + "}");
  };
}

// Turn `turn` (1-based) of conversation `id`: the same first user message every turn.
request_options chat(int id, int turn = 1) {
  std::string messages = R"({"role":"user","content":"question )" + std::to_string(id) + R"("})";
  for (int t = 2; t <= turn; ++t)
    messages += R"(,{"role":"assistant","content":"answer"},{"role":"user","content":"more )" +
                std::to_string(t) + R"("})";
  request_options o;
  o.target = "/v1/chat/completions";
  o.body = R"({"model":"sim-small","stream":true,"messages":[)" + messages + "]}";
  o.headers = {{"content-type", "application/json"}};
  return o;
}

std::string admin_get(const stack& s, const std::string& target) {
  request_options o;
  o.method = "GET";
  o.target = target;
  return fetch(s.proxy->admin_endpoint(), o).body;
}

double metric(const stack& s, const std::string& name,
              const std::map<std::string, std::string>& labels) {
  return metric_sum(parse_metrics(admin_get(s, "/metrics")), name, labels);
}

std::unique_ptr<sim::server> started(sim::server_options o) {
  auto sim = std::make_unique<sim::server>(o);
  sim->start();
  return sim;
}

TEST(Canary, ASlowerCanaryIsRolledBackAndTheBaselineTakesEveryRequestAgain) {
  auto next = started(loopback_sim(120, 2, 4));
  stack s(
      with_canary(next->endpoint().port(),
                  "steps: [50, 100], interval_s: 600, min_requests: 8, max_ttft_p99_ratio: 1.5"),
      loopback_sim(5, 2, 4));
  const std::map<std::string, std::string> which{{"route", "default"}, {"upstream", "next"}};
  EXPECT_EQ(metric(s, "tokentap_canary_weight", which), 50);
  // Distinct conversations, until the canary's TTFT P99 (~120 ms against ~5) has its sample.
  int i = 0;
  for (; i < 200 && metric(s, "tokentap_canary_weight", which) > 0; ++i) {
    ASSERT_EQ(fetch(s.proxy_ep(), chat(i)).status, 200);
    if (next->stats().requests.load() >= 8 && s.sim->stats().requests.load() >= 8)
      std::this_thread::sleep_for(100ms);  // (a verdict at most once a second)
  }
  ASSERT_EQ(metric(s, "tokentap_canary_weight", which), 0) << "no rollback after " << i;
  EXPECT_EQ(metric(s, "tokentap_canary_rollbacks_total", {{"reason", "ttft"}}), 1);
  EXPECT_EQ(metric(s, "tokentap_canary_rollbacks_total", {{"reason", "error_rate"}}), 0);
  // Every request now goes to the baseline, those of conversations the canary had included.
  const auto canary_requests = next->stats().requests.load();
  for (int k = 0; k < 20; ++k) ASSERT_EQ(fetch(s.proxy_ep(), chat(k, 2)).status, 200);
  EXPECT_EQ(next->stats().requests.load(), canary_requests);
  const auto stats = admin_get(s, "/api/stats");
  EXPECT_NE(
      stats.find(
          R"("canaries":[{"route":"default","upstream":"next","baseline":"default","phase":"rolled_back")"),
      std::string::npos)
      << stats;
  EXPECT_NE(stats.find(R"("reason":"ttft","evidence":"TTFT P99 )"), std::string::npos) << stats;
  // The canary's requests are counted under its upstream.
  EXPECT_EQ(metric(s, "tokentap_upstream_endpoint_requests_total", {{"upstream", "next"}}),
            static_cast<double>(canary_requests));
  const auto dom = dump_dom("http://127.0.0.1:" + std::to_string(s.proxy->admin_endpoint().port()) +
                            "/dashboard");
  ASSERT_FALSE(dom.empty()) << "chromium failed";
  EXPECT_NE(dom.find("<td>next</td><td class=\"err\">ROLLED BACK (ttft)</td><td>0.0 %</td>"),
            std::string::npos)
      << dom;
}

TEST(Canary, AHealthyCanaryClimbsToAllTrafficAndConversationsKeepTheirSide) {
  auto next = started(loopback_sim(5, 2, 4));
  stack s(with_canary(next->endpoint().port(),
                      "steps: [30, 100], interval_s: 4, min_requests: 5, max_error_rate_delta: 0, "
                      "max_ttft_p99_ratio: 20, max_itl_p99_ratio: 20, max_truncated_delta: 0"),
          loopback_sim(5, 2, 4));
  const std::map<std::string, std::string> which{{"route", "default"}, {"upstream", "next"}};
  // The first turn of 30 conversations, then their second: each stays on its side.
  const auto side_of = [&](const request_options& o) {
    const auto before = next->stats().requests.load();
    EXPECT_EQ(fetch(s.proxy_ep(), o).status, 200);
    return next->stats().requests.load() > before;
  };
  std::vector<bool> first;
  int on_canary = 0;
  for (int i = 0; i < 30; ++i) {
    first.push_back(side_of(chat(i)));
    on_canary += first.back();
  }
  EXPECT_GT(on_canary, 0);
  EXPECT_LT(on_canary, 30);
  ASSERT_EQ(metric(s, "tokentap_canary_weight", which), 30) << "promoted too soon";
  for (int i = 0; i < 30; ++i) EXPECT_EQ(side_of(chat(i, 2)), first[i]) << i;
  // Gates held with both sides measured: past the interval, all traffic goes to the canary.
  for (int i = 100; i < 400 && metric(s, "tokentap_canary_weight", which) < 100; ++i) {
    ASSERT_EQ(fetch(s.proxy_ep(), chat(i)).status, 200);
    std::this_thread::sleep_for(20ms);
  }
  ASSERT_EQ(metric(s, "tokentap_canary_weight", which), 100);
  const auto baseline = s.sim->stats().requests.load();
  for (int i = 0; i < 10; ++i) EXPECT_TRUE(side_of(chat(i, 3)));
  EXPECT_EQ(s.sim->stats().requests.load(), baseline);
  EXPECT_NE(admin_get(s, "/api/stats").find(R"("phase":"promoted")"), std::string::npos);
  for (const char* reason : {"error_rate", "truncated", "ttft", "itl"})
    EXPECT_EQ(metric(s, "tokentap_canary_rollbacks_total", {{"reason", reason}}), 0) << reason;
}

// The request phase's set_upstream, as any hook may use it: a configured name takes the request
// there; a name the configuration does not have leaves it on its route's upstream.
TEST(HookRouting, AHookSendsARequestToAnotherUpstreamByName) {
  auto other = started(loopback_sim(5, 2, 4));
  class chooser final : public hooks::hook {
   public:
    hooks::request_status on_request_phase(const hooks::request_view& r,
                                           hooks::request_callbacks& cb) override {
      for (const auto& h : r.headers)
        if (h.name == "x-upstream") cb.set_upstream(h.value);
      return hooks::request_status::proceed;
    }
  };
  class chooser_factory final : public hooks::hook_factory {
   public:
    std::unique_ptr<hooks::hook> create() override { return std::make_unique<chooser>(); }
  };
  stack s(
      [&](config::config& cfg) {
        config::upstream_config o;
        o.name = "other";
        std::string err;
        o.endpoints.push_back(*config::parse_url(
            "http://127.0.0.1:" + std::to_string(other->endpoint().port()), err));
        cfg.upstreams.push_back(o);
        cfg.hooks.push_back("chooser");
      },
      loopback_sim(5, 2, 4), {},
      [](hooks::hook_registry& r) {
        r.add("chooser", [](const config::config&) { return std::make_shared<chooser_factory>(); });
      });
  auto to = [](const char* upstream) {
    auto o = chat(1);
    o.headers.push_back({"x-upstream", upstream});
    return o;
  };
  ASSERT_EQ(fetch(s.proxy_ep(), to("other")).status, 200);
  EXPECT_EQ(other->stats().requests.load(), 1u);
  EXPECT_EQ(s.sim->stats().requests.load(), 0u);
  ASSERT_EQ(fetch(s.proxy_ep(), to("nope")).status, 200);
  EXPECT_EQ(other->stats().requests.load(), 1u);
  EXPECT_EQ(s.sim->stats().requests.load(), 1u);
}

}  // namespace
}  // namespace tokentap::test
