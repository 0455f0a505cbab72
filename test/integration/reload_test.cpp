// Hot reload (DESIGN.md §11) through the real proxy and two real simulators: streams in flight
// when a new configuration is applied finish on the one they began with, byte for byte, while
// new requests — on new and on kept-alive connections — take the new one; and through the real
// binary: SIGHUP and POST /admin/reload apply a valid file, refuse an invalid one or one that
// changes a restart-only setting with the reason, and keep the running configuration.
#include <gtest/gtest.h>

#include <signal.h>

#include <chrono>
#include <fstream>
#include <future>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "test/support/canned_upstream.hpp"
#include "test/support/http_client.hpp"
#include "test/support/metrics_text.hpp"
#include "test/support/ports.hpp"
#include "test/support/process.hpp"
#include "test/support/stack.hpp"
#include "test/support/tls_cert.hpp"

namespace tokentap::test {
namespace {

using namespace std::chrono_literals;

std::unique_ptr<sim::server> started(sim::server_options o) {
  auto sim = std::make_unique<sim::server>(o);
  sim->start();
  return sim;
}

// A stream of `tokens` tokens `itl_ms` apart, the same bytes from the simulator every time.
request_options stream_request(int tokens, int itl_ms) {
  return sim_stream(tokens, 10, itl_ms, "reload me");
}

std::string label_of(const sim::server& s) {
  return "127.0.0.1:" + std::to_string(s.endpoint().port());
}

// Waits until `done` holds (polling), at most `within`.
template <class F>
bool eventually(F done, std::chrono::milliseconds within = 5000ms) {
  const auto until = std::chrono::steady_clock::now() + within;
  while (!done()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(5ms);
  }
  return true;
}

std::vector<sample> admin_metrics(const stack& s) {
  request_options m;
  m.method = "GET";
  m.target = "/metrics";
  return parse_metrics(fetch(s.proxy->admin_endpoint(), m).body);
}

TEST(Reload, StreamsInFlightFinishOnTheirConfigWhileNewRequestsTakeTheNewOne) {
  auto b = started(loopback_sim(5, 1, 4));
  stack s({}, loopback_sim(5, 1, 4));
  auto& a = *s.sim;
  const auto long_stream = stream_request(60, 25);  // ~1.5 s
  const auto reference = fetch(a.endpoint(), long_stream);
  ASSERT_TRUE(reference.complete);
  const auto short_stream = stream_request(5, 1);

  // A kept-alive client connection, first used before the reload; and one used only before
  // it, idle from then on (it must not keep the old configuration alive).
  connection kept(s.proxy_ep());
  ASSERT_EQ(kept.request(short_stream).status, 200);
  connection idle(s.proxy_ep());
  ASSERT_EQ(idle.request(short_stream).status, 200);

  const auto a_requests = a.stats().requests.load();
  ASSERT_TRUE(eventually([&] { return a.stats().streams_completed.load() == 3; }));
  const auto a_completed = a.stats().streams_completed.load();
  constexpr int in_flight = 6;
  std::vector<std::future<response>> streams;
  for (int i = 0; i < in_flight; ++i)
    streams.push_back(
        std::async(std::launch::async, [&] { return fetch(s.proxy_ep(), long_stream); }));
  ASSERT_TRUE(eventually([&] { return a.stats().requests.load() == a_requests + in_flight; }));

  // The route's upstream now points at the other simulator.
  auto next = s.proxy->cfg();
  std::string err;
  next.upstreams[0].endpoints = {*config::parse_url("http://" + label_of(*b), err)};
  const auto r = s.proxy->reload(next);
  ASSERT_TRUE(r.applied) << r.reason;
  EXPECT_EQ(r.generation, 2u);
  EXPECT_EQ(a.stats().streams_completed.load(), a_completed)
      << "the streams must still be in flight when the reload is applied";

  // New requests, on a new connection and on the kept-alive one, go to the new upstream.
  const auto b_requests = b->stats().requests.load();
  EXPECT_EQ(fetch(s.proxy_ep(), short_stream).status, 200);
  const auto again = kept.request(short_stream);
  EXPECT_EQ(again.status, 200);
  EXPECT_TRUE(again.complete);
  EXPECT_EQ(b->stats().requests.load(), b_requests + 2);
  EXPECT_EQ(a.stats().requests.load(), a_requests + in_flight);

  // The streams in flight finished on the old one, none dropped, none altered.
  for (auto& f : streams) {
    const auto got = f.get();
    EXPECT_TRUE(got.complete) << got.error.message();
    EXPECT_EQ(got.status, 200);
    EXPECT_EQ(got.body, reference.body);
  }
  EXPECT_EQ(a.stats().disconnects.load(), 0u);
  EXPECT_EQ(s.proxy->stats().client_disconnects.value(), 0u);
  // Their upstream connections are not kept for reuse: no configuration names that endpoint.
  EXPECT_TRUE(eventually([&] { return a.stats().open_connections.load() == 0; }))
      << a.stats().open_connections.load() << " connections to the removed endpoint still open";

  // The reload is counted; the endpoint no configuration names leaves the metrics once its
  // last exchange ended, and the new one is there.
  std::vector<sample> metrics;
  ASSERT_TRUE(eventually([&] {
    metrics = admin_metrics(s);
    return metric_sum(metrics, "tokentap_upstream_endpoint_healthy", {{"endpoint", label_of(a)}}) ==
               0 &&
           metric_sum(metrics, "tokentap_upstream_endpoint_healthy",
                      {{"endpoint", label_of(*b)}}) == 1;
  }));
  for (const auto& x : metrics)
    EXPECT_FALSE(x.labels.count("endpoint") && x.labels.at("endpoint") == label_of(a))
        << x.name << ": a series of an endpoint no configuration names";
  EXPECT_EQ(metric_sum(metrics, "tokentap_config_reloads_total", {{"result", "success"}}), 1);
  // The connection idle since before the reload serves its next request on the new one.
  const auto b_before_idle = b->stats().requests.load();
  EXPECT_EQ(idle.request(short_stream).status, 200);
  EXPECT_EQ(b->stats().requests.load(), b_before_idle + 1);
  EXPECT_EQ(metric_sum(metrics, "tokentap_config_generation"), 2);
  // Counters of the upstream kept their count across the reload (never back to 0): every
  // request of both generations was routed.
  EXPECT_EQ(metric_sum(metrics, "tokentap_routing_decisions_total", {{"upstream", "default"}}),
            2 + in_flight + 2);
}

// Active probes follow the configuration: an endpoint a reload removed is probed no more, a new
// one is, and one the reload kept keeps what its probes found (out of balancing stays out).
TEST(Reload, ProbesFollowTheNewEndpointsAndAKeptEndpointKeepsItsState) {
  const canned_response ok{"application/json", {"{}"}};
  canned_response sick_answer{"application/json", {"{}"}};
  sick_answer.status = 503;
  canned_upstream sick({{"/health", sick_answer}});
  canned_upstream removed({{"/health", ok}});
  canned_upstream added({{"/health", ok}});
  const auto endpoint = [](const canned_upstream& u) {
    std::string err;
    return *config::parse_url("http://127.0.0.1:" + std::to_string(u.port()), err);
  };
  stack s([&](config::config& cfg) {
    auto& up = cfg.upstreams.front();
    up.endpoints = {endpoint(sick), endpoint(removed)};
    up.health.enabled = true;
    up.health.interval = 50ms;
    up.health.timeout = 40ms;
    up.health.unhealthy_threshold = 2;
    up.health.healthy_threshold = 2;
  });
  const auto healthy = [&](const canned_upstream& u) {
    return metric_sum(admin_metrics(s), "tokentap_upstream_endpoint_healthy",
                      {{"endpoint", "127.0.0.1:" + std::to_string(u.port())}});
  };
  ASSERT_TRUE(eventually([&] { return healthy(sick) == 0; }));

  auto next = s.proxy->cfg();
  next.upstreams.front().endpoints = {endpoint(sick), endpoint(added)};
  next.upstreams.front().retries = 2;
  ASSERT_TRUE(s.proxy->reload(next).applied);
  EXPECT_EQ(healthy(sick), 0) << "a kept endpoint forgot that it fails its probe";
  ASSERT_TRUE(eventually([&] { return healthy(added) == 1 && added.requests.load() >= 2; }));
  // The removed endpoint's probe loop ended (at most one probe was already under way).
  const auto probes = removed.requests.load();
  std::this_thread::sleep_for(300ms);
  EXPECT_LE(removed.requests.load(), probes + 1);
  EXPECT_GE(sick.requests.load(), 4);
}

// Timeouts belong to the configuration an exchange runs on, also on a connection kept alive from
// before the reload.
TEST(Reload, AKeptAliveConnectionTakesTheNewTimeouts) {
  stack s({}, loopback_sim(5, 1, 4));
  const auto long_stream = stream_request(60, 25);  // ~1.5 s
  connection kept(s.proxy_ep());
  const auto whole = kept.request(long_stream);
  ASSERT_TRUE(whole.complete);
  auto next = s.proxy->cfg();
  next.timeouts.total = 300ms;
  ASSERT_TRUE(s.proxy->reload(next).applied);
  const auto cut = kept.request(long_stream);
  EXPECT_FALSE(cut.complete);
  EXPECT_LT(cut.body.size(), whole.body.size());
  EXPECT_LT(cut.total_ms, 1000);
}

// Admission state outlives a reload that leaves its rules alone (a budget spent stays spent) and
// starts afresh with new rules.
TEST(Reload, AdmissionBudgetsCarryOverUnlessTheRulesChange) {
  stack s([](config::config& cfg) {
    config::set_hook_sections(cfg,
                              "admission: [{name: cap, scope: global, requests_per_minute: 2}]");
  });
  const auto req = stream_request(3, 1);
  EXPECT_EQ(fetch(s.proxy_ep(), req).status, 200);
  EXPECT_EQ(fetch(s.proxy_ep(), req).status, 200);
  auto next = s.proxy->cfg();
  next.timeouts.idle = 30s;  // something else changes
  ASSERT_TRUE(s.proxy->reload(next).applied);
  EXPECT_EQ(fetch(s.proxy_ep(), req).status, 429) << "the reload refilled the budget";
  config::set_hook_sections(next,
                            "admission: [{name: cap, scope: global, requests_per_minute: 5}]");
  ASSERT_TRUE(s.proxy->reload(next).applied);
  EXPECT_EQ(fetch(s.proxy_ep(), req).status, 200);
  // One series per rule and reason, counted across both states, never back to zero.
  EXPECT_EQ(metric_sum(admin_metrics(s), "tokentap_admission_rejections_total",
                       {{"rule", "cap"}, {"reason", "requests"}}),
            1);
}

TEST(Reload, RestartOnlyChangesAndBrokenConfigsAreRefusedAndTheRunningOneKept) {
  stack s(
      [](config::config& cfg) {
        config::set_hook_sections(
            cfg, "admission: [{name: cap, scope: global, requests_per_minute: 1000}]");
      },
      loopback_sim(5, 1, 4));
  const auto before = s.proxy->cfg();
  auto next = before;
  next.metrics.max_models = 3;
  next.trace.dir = "/tmp";
  auto r = s.proxy->reload(next);
  EXPECT_FALSE(r.applied);
  EXPECT_EQ(r.generation, 1u);
  EXPECT_EQ(r.reason, "changes settings that need a restart: metrics, trace");
  // A hook chain that cannot be built (a name no hook has).
  next = before;
  next.hooks = {"timing", "no-such-hook"};
  r = s.proxy->reload(next);
  EXPECT_FALSE(r.applied);
  EXPECT_NE(r.reason.find("no-such-hook"), std::string::npos) << r.reason;
  // Cross references that do not hold.
  next = before;
  next.routes.front().upstream = "nowhere";
  r = s.proxy->reload(next);
  EXPECT_FALSE(r.applied);
  EXPECT_NE(r.reason.find("unknown upstream 'nowhere'"), std::string::npos) << r.reason;
  // An upstream whose TLS trust cannot be read, beside new admission rules: refused before the
  // new rules replace the running ones' series.
  next = before;
  std::string err;
  config::upstream_config tls;
  tls.name = "secure";
  tls.endpoints = {*config::parse_url("https://127.0.0.1:1", err)};
  tls.ca_file = "/nonexistent/ca.pem";
  next.upstreams.push_back(tls);
  config::set_hook_sections(
      next, "admission: [{name: other-cap, scope: global, requests_per_minute: 1000}]");
  r = s.proxy->reload(next);
  EXPECT_FALSE(r.applied);
  EXPECT_NE(r.reason.find("/nonexistent/ca.pem"), std::string::npos) << r.reason;

  // Still the first configuration: requests reach the first simulator, its series are all there.
  const auto a_requests = s.sim->stats().requests.load();
  EXPECT_EQ(fetch(s.proxy_ep(), stream_request(3, 1)).status, 200);
  EXPECT_EQ(s.sim->stats().requests.load(), a_requests + 1);
  EXPECT_EQ(s.proxy->current()->number, 1u);
  const auto metrics = admin_metrics(s);
  EXPECT_EQ(
      metric_sum(metrics, "tokentap_upstream_endpoint_healthy", {{"endpoint", label_of(*s.sim)}}),
      1);
  bool running_rule = false, new_rule = false;
  for (const auto& x : metrics)
    if (x.name == "tokentap_admission_rejections_total") {
      running_rule = running_rule || x.labels.at("rule") == "cap";
      new_rule = new_rule || x.labels.at("rule") == "other-cap";
    }
  EXPECT_TRUE(running_rule);
  EXPECT_FALSE(new_rule);
  EXPECT_EQ(metric_sum(metrics, "tokentap_config_reloads_total", {{"result", "failure"}}), 4);
  EXPECT_EQ(metric_sum(metrics, "tokentap_config_last_reload_successful"), 0);
}

// The binary: a config file, SIGHUP and POST /admin/reload.
struct binary_proxy {
  explicit binary_proxy(const std::string& config_file)
      : p({"proxy", "--config", config_file, "--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0",
           "--threads", "2", "--no-access-log"},
          {{"TOKENTAP_ADMIN_TOKEN", token}}) {
    const auto ready = p.wait_for_line("ready ", 10s);
    proxy = ready_address(ready, "proxy");
    admin = ready_address(ready, "admin");
  }
  response admin_call(const std::string& method, const std::string& target,
                      bool with_token = true) {
    request_options o;
    o.method = method;
    o.target = target;
    if (with_token) o.headers = {{"authorization", "Bearer " + token}};
    return fetch(admin, o);
  }
  double metric(const std::string& name, const std::map<std::string, std::string>& labels = {}) {
    return metric_sum(parse_metrics(admin_call("GET", "/metrics").body), name, labels);
  }
  const std::string token = "reload-test-token-0123456789";
  process p;
  tcp::endpoint proxy, admin;
};

void write_config(const std::string& path, const std::string& yaml) {
  std::ofstream(path) << yaml;
}

std::string routed_to(const sim::server& s) {
  return "upstreams:\n  default: {url: http://" + label_of(s) +
         "}\nroutes:\n  - {name: chat, prefix: /, upstream: default}\n";
}

TEST(Reload, SighupAndAdminReloadApplyAValidFileAndRefuseAnInvalidOneWithTheReason) {
  auto a = started(loopback_sim(5, 1, 4));
  auto b = started(loopback_sim(5, 1, 4));
  const auto file = temp_dir() + "/tokentap.yaml";
  write_config(file, routed_to(*a));
  binary_proxy bp(file);
  const auto short_stream = stream_request(3, 1);
  ASSERT_EQ(fetch(bp.proxy, short_stream).status, 200);
  EXPECT_EQ(a->stats().requests.load(), 1u);

  // An invalid file, by SIGHUP: refused with the reason, logged; the proxy keeps routing to a.
  write_config(file, routed_to(*a) + "  - {name: other, prefix: /x, upstream: nowhere}\n");
  bp.p.signal(SIGHUP);
  ASSERT_TRUE(eventually([&] {
    return bp.metric("tokentap_config_reloads_total", {{"result", "failure"}}) == 1;
  }));
  EXPECT_EQ(bp.metric("tokentap_config_last_reload_successful"), 0);
  ASSERT_EQ(fetch(bp.proxy, short_stream).status, 200);
  EXPECT_EQ(a->stats().requests.load(), 2u);

  // The same by POST: 400 with the reason, as JSON.
  auto res = bp.admin_call("POST", "/admin/reload");
  EXPECT_EQ(res.status, 400);
  EXPECT_NE(res.body.find("\"applied\":false"), std::string::npos) << res.body;
  EXPECT_NE(res.body.find("\"generation\":1"), std::string::npos) << res.body;
  EXPECT_NE(res.body.find("route 'other' names unknown upstream 'nowhere'"), std::string::npos)
      << res.body;
  // Only POST, only with the token.
  EXPECT_EQ(bp.admin_call("GET", "/admin/reload").status, 405);
  EXPECT_EQ(bp.admin_call("POST", "/admin/reload", false).status, 401);
  // A restart-only setting changed: refused, named.
  write_config(file, routed_to(*b) + "metrics: {max_models: 3}\n");
  res = bp.admin_call("POST", "/admin/reload");
  EXPECT_EQ(res.status, 400);
  EXPECT_NE(res.body.find("need a restart: metrics"), std::string::npos) << res.body;

  // A valid file by SIGHUP while a stream is in flight: the stream finishes on a, byte for
  // byte; new requests go to b.
  const auto long_stream = stream_request(40, 25);
  const auto reference = fetch(a->endpoint(), long_stream);
  const auto a_requests = a->stats().requests.load();
  auto in_flight = std::async(std::launch::async, [&] { return fetch(bp.proxy, long_stream); });
  ASSERT_TRUE(eventually([&] { return a->stats().requests.load() == a_requests + 1; }));
  write_config(file, routed_to(*b));
  bp.p.signal(SIGHUP);
  ASSERT_TRUE(eventually([&] { return bp.metric("tokentap_config_generation") == 2; }));
  EXPECT_EQ(in_flight.wait_for(0s), std::future_status::timeout) << "finished before the reload";
  ASSERT_EQ(fetch(bp.proxy, short_stream).status, 200);
  EXPECT_EQ(b->stats().requests.load(), 1u);
  const auto got = in_flight.get();
  EXPECT_TRUE(got.complete);
  EXPECT_EQ(got.body, reference.body);

  // POST applies the same file again: a new generation.
  res = bp.admin_call("POST", "/admin/reload");
  EXPECT_EQ(res.status, 200) << res.body;
  EXPECT_NE(res.body.find("\"applied\":true,\"generation\":3"), std::string::npos) << res.body;
  EXPECT_EQ(bp.metric("tokentap_config_reloads_total", {{"result", "success"}}), 2);
  EXPECT_EQ(bp.metric("tokentap_config_reloads_total", {{"result", "failure"}}), 3);
  EXPECT_EQ(bp.metric("tokentap_config_last_reload_successful"), 1);

  bp.p.signal(SIGTERM);
  EXPECT_EQ(bp.p.wait(10s), 0);
  const auto log = bp.p.err();
  EXPECT_NE(log.find("configuration reload refused, generation 1 stays in use"), std::string::npos)
      << log;
  EXPECT_NE(log.find("configuration reloaded: generation 2"), std::string::npos) << log;
}

}  // namespace
}  // namespace tokentap::test
