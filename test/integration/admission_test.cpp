// Admission through the real proxy and simulator: a refused request never reaches the upstream
// and is answered as the provider would (429 or 503, its error shape, retry-after, its
// rate-limit headers); concurrency is held while a stream lasts; refusals are counted by rule.
// Tenants label the request and token counters and have their rows in /api/stats; a route over
// its TTFT SLO sheds its low-priority requests and admits them again once it recovers, on the
// metrics, /api/stats and the dashboard.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <set>
#include <string>
#include <thread>

#include "test/support/browser.hpp"
#include "test/support/http_client.hpp"
#include "test/support/metrics_text.hpp"
#include "test/support/stack.hpp"

namespace tokentap::test {
namespace {

// Admission rules as a file writes them (`[{name: cap, max_concurrent: 1}]`).
std::function<void(config::config&)> rules(const std::string& yaml) {
  return [yaml](config::config& cfg) {
    cfg.tenants.header = "x-tokentap-tenant";
    config::set_hook_sections(cfg, "admission: " + yaml);
  };
}

request_options chat(const std::string& tenant,
                     const std::string& target = "/v1/chat/completions") {
  request_options o;
  o.target = target;
  o.body =
      target == "/v1/messages"
          ? R"({"model":"claude-sim","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"hi"}]})"
          : R"({"model":"sim-small","stream":true,"messages":[{"role":"user","content":"hi"}]})";
  o.headers = {{"content-type", "application/json"},
               {"x-tokentap-tenant", tenant},
               {"x-sim-ttft-ms", "1"},
               {"x-sim-itl-ms", "1"},
               {"x-sim-tokens", "3"}};
  if (target == "/v1/messages") o.headers.push_back({"anthropic-version", "2023-06-01"});
  return o;
}

double rejections(const stack& s, const std::string& rule_name, const std::string& reason) {
  request_options o;
  o.method = "GET";
  o.target = "/metrics";
  return metric_sum(parse_metrics(fetch(s.proxy->admin_endpoint(), o).body),
                    "tokentap_admission_rejections_total",
                    {{"rule", rule_name}, {"reason", reason}});
}

TEST(Admission, ARateLimitedRequestIsAnsweredAsTheProviderWouldAndNeverForwarded) {
  stack s(rules("[{name: per-tenant, requests_per_minute: 2}]"));
  EXPECT_EQ(fetch(s.proxy_ep(), chat("team-a")).status, 200);
  EXPECT_EQ(fetch(s.proxy_ep(), chat("team-a")).status, 200);
  const auto forwarded = s.sim->stats().requests.load();
  const auto r = fetch(s.proxy_ep(), chat("team-a"));
  EXPECT_EQ(r.status, 429);
  EXPECT_EQ(s.sim->stats().requests.load(), forwarded);  // the upstream never saw it
  EXPECT_NE(r.body.find(R"("error":{)"), std::string::npos) << r.body;
  EXPECT_NE(r.body.find("rate_limit_error"), std::string::npos) << r.body;
  const auto retry = std::stoi(r.header("retry-after"));
  EXPECT_GE(retry, 1);
  EXPECT_LE(retry, 30);
  EXPECT_EQ(r.header("x-ratelimit-limit-requests"), "2");
  EXPECT_EQ(r.header("x-ratelimit-remaining-requests"), "0");
  EXPECT_FALSE(r.header("x-ratelimit-reset-requests").empty());
  EXPECT_EQ(r.header("x-tokentap-rejected-by"), "per-tenant");
  // Another tenant is not limited by this one's minute.
  EXPECT_EQ(fetch(s.proxy_ep(), chat("team-b")).status, 200);
  EXPECT_EQ(rejections(s, "per-tenant", "requests"), 1);
  // Anthropic's path: its error shape and its headers.
  const auto a = fetch(s.proxy_ep(), chat("team-a", "/v1/messages"));
  EXPECT_EQ(a.status, 429);
  EXPECT_EQ(a.body.rfind(R"({"type":"error","error":{"type":"rate_limit_error")", 0), 0u) << a.body;
  EXPECT_EQ(a.header("anthropic-ratelimit-requests-limit"), "2");
  EXPECT_EQ(a.header("anthropic-ratelimit-requests-remaining"), "0");
  EXPECT_EQ(a.header("anthropic-ratelimit-requests-reset").size(), 20u)
      << a.header("anthropic-ratelimit-requests-reset");  // 2026-12-04T17:00:00Z
  EXPECT_FALSE(a.header("retry-after").empty());
}

TEST(Admission, ConcurrencyIsHeldWhileAStreamLasts) {
  stack s(rules("[{name: one-stream, max_concurrent: 1}]"));
  auto slow = chat("t");  // 40 tokens 20 ms apart: 0.8 s in flight
  for (auto& h : slow.headers)
    if (h.first == "x-sim-tokens") h.second = "40";
  for (auto& h : slow.headers)
    if (h.first == "x-sim-itl-ms") h.second = "20";
  auto first = std::async(std::launch::async, [&] { return fetch(s.proxy_ep(), slow); });
  // Wait until the first stream is in flight.
  for (int i = 0; i < 200 && s.sim->stats().requests.load() == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  const auto refused = fetch(s.proxy_ep(), chat("t"));
  EXPECT_EQ(refused.status, 429) << refused.body;
  EXPECT_EQ(refused.header("retry-after"), "1");
  EXPECT_EQ(fetch(s.proxy_ep(), chat("other")).status, 200);
  EXPECT_TRUE(first.get().complete);
  EXPECT_EQ(fetch(s.proxy_ep(), chat("t")).status, 200);  // released at stream end
  EXPECT_EQ(rejections(s, "one-stream", "concurrency"), 1);
}

TEST(Admission, ATokenBudgetSettlesFromTheReportedUsage) {
  // 1,000 tokens a minute; each request reserves its prompt estimate + max_tokens 300.
  stack s(rules("[{name: tpm, tokens_per_minute: 1000}]"));
  auto o = chat("t");
  o.body =
      R"({"model":"sim-small","stream":true,"max_tokens":300,)"
      R"("stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]})";
  // Each stream uses a handful of tokens: settled from usage, the budget comes back, so far
  // more than 1000 / 300 requests pass.
  for (int i = 0; i < 8; ++i) EXPECT_EQ(fetch(s.proxy_ep(), o).status, 200) << i;
  EXPECT_EQ(rejections(s, "tpm", "tokens"), 0);
  // A request that asks for more than is left (what those streams used is gone for the
  // minute) waits.
  o.body =
      R"({"model":"sim-small","stream":true,"max_tokens":990,"messages":[{"role":"user","content":"hi"}]})";
  const auto r = fetch(s.proxy_ep(), o);
  EXPECT_EQ(r.status, 429);
  EXPECT_EQ(r.header("x-ratelimit-limit-tokens"), "1000");
  EXPECT_LT(std::stoi(r.header("x-ratelimit-remaining-tokens")), 990);
  EXPECT_GT(std::stoi(r.header("x-ratelimit-remaining-tokens")), 800);
  EXPECT_EQ(rejections(s, "tpm", "tokens"), 1);
}

std::string admin_get(const stack& s, const std::string& target) {
  request_options o;
  o.method = "GET";
  o.target = target;
  return fetch(s.proxy->admin_endpoint(), o).body;
}

TEST(Tenants, RequestsAndTokensAreCountedPerTenantAndStatsHaveTheirRows) {
  stack s(rules("[{name: per-tenant, requests_per_minute: 1}]"));
  auto with_usage = [](request_options o) {
    o.body = R"({"model":"sim-small","stream":true,"stream_options":{"include_usage":true},)"
             R"("messages":[{"role":"user","content":"hi"}]})";
    return o;
  };
  EXPECT_EQ(fetch(s.proxy_ep(), with_usage(chat("team-a"))).status, 200);
  EXPECT_EQ(fetch(s.proxy_ep(), with_usage(chat("team-b"))).status, 200);
  EXPECT_EQ(fetch(s.proxy_ep(), with_usage(chat("team-b"))).status, 429);
  // No tenant header: the credential names the tenant, by a salted hash, never the key.
  auto keyed = with_usage(chat(""));
  std::erase_if(keyed.headers, [](const auto& h) { return h.first == "x-tokentap-tenant"; });
  keyed.headers.push_back({"authorization", "Bearer sk-test-SECRETSECRET"});
  EXPECT_EQ(fetch(s.proxy_ep(), keyed).status, 200);
  // (A stream is counted at its end, which may come just after the client read its last byte.)
  std::string text;
  for (int i = 0; i < 200; ++i) {
    text = admin_get(s, "/metrics");
    if (metric_sum(parse_metrics(text), "tokentap_requests_total") >= 4) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const auto m = parse_metrics(text);
  EXPECT_EQ(metric_sum(m, "tokentap_requests_total", {{"tenant", "team-a"}, {"code", "200"}}), 1);
  EXPECT_EQ(metric_sum(m, "tokentap_requests_total", {{"tenant", "team-b"}, {"code", "200"}}), 1);
  EXPECT_EQ(metric_sum(m, "tokentap_requests_total", {{"tenant", "team-b"}, {"code", "429"}}), 1);
  EXPECT_EQ(
      metric_sum(m, "tokentap_tokens_total", {{"tenant", "team-a"}, {"type", "output_answer"}}), 3);
  EXPECT_EQ(text.find("SECRET"), std::string::npos);
  const auto key_at = text.find("tenant=\"key-");
  ASSERT_NE(key_at, std::string::npos) << text;
  // Every request and token series carries the label (none without it).
  for (const auto& x : m) {
    if (x.name == "tokentap_requests_total" || x.name == "tokentap_tokens_total") {
      EXPECT_EQ(x.labels.count("tenant"), 1u) << x.name;
    }
  }
  const auto stats = admin_get(s, "/api/stats");
  EXPECT_EQ(stats.find("SECRET"), std::string::npos);
  const auto b = stats.find(R"({"tenant":"team-b")");
  ASSERT_NE(b, std::string::npos) << stats;
  EXPECT_NE(stats.find(R"("requests":2,"rejected":1,"errors":0)", b), std::string::npos)
      << stats.substr(b, 200);
  EXPECT_NE(stats.find(R"({"tenant":"team-a")"), std::string::npos);
  EXPECT_NE(stats.find(R"({"tenant":"key-)"), std::string::npos);
}

TEST(Tenants, AnAbsurdTenantHeaderIsBoundedAndEscapedAndTenantsPastMaxShareOther) {
  stack s([](config::config& cfg) {
    cfg.tenants.enabled = true;
    cfg.tenants.header = "x-tokentap-tenant";
    cfg.tenants.max = 3;
  });
  EXPECT_EQ(fetch(s.proxy_ep(), chat(std::string(4000, 'x') + "\"} evil")).status, 200);
  for (int i = 0; i < 6; ++i)
    EXPECT_EQ(fetch(s.proxy_ep(), chat("t" + std::to_string(i))).status, 200);
  const auto m = parse_metrics(admin_get(s, "/metrics"));
  std::set<std::string> tenants;
  for (const auto& x : m)
    if (x.name == "tokentap_requests_total") tenants.insert(x.labels.at("tenant"));
  EXPECT_EQ(tenants, (std::set<std::string>{std::string(64, 'x'), "t0", "t1", "other"}));
  EXPECT_EQ(metric_sum(m, "tokentap_requests_total", {{"tenant", "other"}}), 4);
}

// A chat request of priority `prio` the simulator answers after `ttft_ms`.
request_options prioritized(const std::string& prio, int ttft_ms) {
  auto o = chat("t");
  for (auto& h : o.headers)
    if (h.first == "x-sim-ttft-ms") h.second = std::to_string(ttft_ms);
  o.headers.push_back({"x-tokentap-priority", prio});
  return o;
}

TEST(Shedding, ARouteOverItsTtftSloShedsLowPriorityUntilItRecovers) {
  stack s([](config::config& cfg) {
    config::set_hook_sections(cfg,
                              "priority: {}\n"
                              "shed: {route: default, when: {ttft_p95_ms: 100, window_s: 3, "
                              "min_requests: 5}, drop: [low]}\n");
    cfg.metrics.window = std::chrono::seconds(3600);
  });
  const auto shed_active = [&] {
    return metric_sum(parse_metrics(admin_get(s, "/metrics")), "tokentap_shed_active",
                      {{"route", "default"}});
  };
  // Fast: low goes through.
  for (int i = 0; i < 5; ++i) ASSERT_EQ(fetch(s.proxy_ep(), prioritized("high", 5)).status, 200);
  EXPECT_EQ(fetch(s.proxy_ep(), prioritized("low", 5)).status, 200);
  EXPECT_EQ(shed_active(), 0);
  // The upstream slows down past the SLO: within a second (a verdict a second), low is
  // refused; high is not.
  for (int i = 0; i < 6; ++i) ASSERT_EQ(fetch(s.proxy_ep(), prioritized("high", 250)).status, 200);
  for (int i = 0; i < 15 && shed_active() == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ASSERT_EQ(shed_active(), 1);
  const auto forwarded = s.sim->stats().requests.load();
  const auto refused = fetch(s.proxy_ep(), prioritized("low", 5));
  EXPECT_EQ(refused.status, 429) << refused.body;
  EXPECT_EQ(s.sim->stats().requests.load(), forwarded);
  EXPECT_EQ(refused.header("x-tokentap-rejected-by"), "shed-default");
  EXPECT_NE(refused.body.find("latency SLO"), std::string::npos) << refused.body;
  EXPECT_EQ(refused.header("retry-after"), "1");
  EXPECT_EQ(fetch(s.proxy_ep(), prioritized("normal", 5)).status, 200);
  EXPECT_EQ(rejections(s, "shed-default", "slo"), 1);
  const auto stats = admin_get(s, "/api/stats");
  EXPECT_NE(stats.find(R"({"route":"default","active":true)"), std::string::npos) << stats;
  // The dashboard shows it as it happens (the upstream stays slow while Chromium looks).
  std::atomic<bool> looking{true};
  auto slow = std::async(std::launch::async, [&] {
    while (looking) fetch(s.proxy_ep(), prioritized("high", 250));
  });
  const auto dom = dump_dom("http://127.0.0.1:" + std::to_string(s.proxy->admin_endpoint().port()) +
                            "/dashboard");
  looking = false;
  slow.get();
  ASSERT_FALSE(dom.empty()) << "chromium failed";
  EXPECT_NE(dom.find("<td>default</td><td class=\"err\">SHEDDING</td>"), std::string::npos) << dom;
  // Fast again: once the slow answers leave the 3 s window, low is admitted again.
  for (int i = 0; i < 40 && shed_active() == 1; ++i) {
    ASSERT_EQ(fetch(s.proxy_ep(), prioritized("high", 5)).status, 200);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    fetch(s.proxy_ep(), prioritized("low", 5));
  }
  EXPECT_EQ(shed_active(), 0);
  EXPECT_EQ(fetch(s.proxy_ep(), prioritized("low", 5)).status, 200);
}

// Degrade instead of refuse: while the route breaks its SLO, low priority goes to a smaller
// model's upstream, its body asking for that model; nothing of it reaches the route's upstream.
TEST(Shedding, AReroutingRuleSendsWhatItWouldDropToAnotherUpstreamAndModel) {
  sim::server small(loopback_sim(1, 1, 3));
  small.start();
  stack s([&](config::config& cfg) {
    config::upstream_config up;
    up.name = "small";
    std::string err;
    up.endpoints.push_back(
        *config::parse_url("http://127.0.0.1:" + std::to_string(small.endpoint().port()), err));
    cfg.upstreams.push_back(up);
    config::set_hook_sections(cfg,
                              "priority: {}\n"
                              "shed: {route: default, when: {ttft_p95_ms: 100, window_s: 3, "
                              "min_requests: 5}, drop: [low], reroute: small, model: sim-tiny}\n");
  });
  const auto metric = [&](const std::string& name, std::map<std::string, std::string> labels) {
    return metric_sum(parse_metrics(admin_get(s, "/metrics")), name, labels);
  };
  // Before: low is served where its route says, as it asked.
  const auto before = fetch(s.proxy_ep(), prioritized("low", 5));
  EXPECT_EQ(before.status, 200);
  EXPECT_NE(before.body.find("\"model\":\"sim-small\""), std::string::npos) << before.body;
  EXPECT_EQ(small.stats().requests.load(), 0u);
  for (int i = 0; i < 6; ++i) ASSERT_EQ(fetch(s.proxy_ep(), prioritized("high", 250)).status, 200);
  for (int i = 0; i < 15 && metric("tokentap_shed_active", {{"route", "default"}}) == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ASSERT_EQ(metric("tokentap_shed_active", {{"route", "default"}}), 1);
  const auto at_route = s.sim->stats().requests.load();
  const auto degraded = fetch(s.proxy_ep(), prioritized("low", 5));
  EXPECT_EQ(degraded.status, 200) << degraded.body;
  EXPECT_TRUE(degraded.complete);
  EXPECT_NE(degraded.body.find("\"model\":\"sim-tiny\""), std::string::npos) << degraded.body;
  EXPECT_EQ(s.sim->stats().requests.load(), at_route);
  EXPECT_EQ(small.stats().requests.load(), 1u);
  // High priority still goes to the route's upstream.
  EXPECT_EQ(fetch(s.proxy_ep(), prioritized("high", 5)).status, 200);
  EXPECT_EQ(s.sim->stats().requests.load(), at_route + 1);
  EXPECT_EQ(metric("tokentap_shed_rerouted_total", {{"route", "default"}, {"upstream", "small"}}),
            1);
  EXPECT_EQ(rejections(s, "shed-default", "slo"), 0);
  const auto stats = admin_get(s, "/api/stats");
  EXPECT_NE(stats.find(R"("reroute":"small","rerouted":1)"), std::string::npos) << stats;
}

}  // namespace
}  // namespace tokentap::test
