// Upstreams with several endpoints, against real sockets: balancing, and a request that fails on
// one endpoint before any byte reached the client moving to another (DESIGN.md §10).
#include <gtest/gtest.h>
#include <simdjson.h>

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <thread>

#include "sim/sim_server.hpp"
#include "test/support/canned_upstream.hpp"
#include "test/support/http_client.hpp"
#include "test/support/metrics_text.hpp"
#include "test/support/ports.hpp"
#include "test/support/stack.hpp"

namespace tokentap::test {
namespace {

const std::string chunk_hi =
    "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"}}]}\n\n";

canned_response stream_answer() {
  return {"text/event-stream", {chunk_hi, "data: [DONE]\n\n"}};
}

canned_response error_answer(unsigned status) {
  canned_response r{"application/json", {R"({"error":{"message":"busy"}})"}};
  r.status = status;
  return r;
}

std::string url(std::uint16_t port) {
  return "http://127.0.0.1:" + std::to_string(port);
}

// One upstream "fleet" over these endpoints.
std::function<void(config::config&)> fleet(std::vector<std::uint16_t> ports, std::string policy,
                                           unsigned retries) {
  return [=](config::config& cfg) {
    config::set_single_upstream(cfg, url(ports.front()));
    auto& up = cfg.upstreams.front();
    up.name = "fleet";
    cfg.routes.front().upstream = "fleet";
    for (std::size_t i = 1; i < ports.size(); ++i) {
      std::string err;
      up.endpoints.push_back(*config::parse_url(url(ports[i]), err));
    }
    up.balance = policy;
    up.retries = retries;
  };
}

request_options chat() {
  request_options o;
  o.body = R"({"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]})";
  o.headers = {{"content-type", "application/json"}};
  return o;
}

// A metric of the upstream "fleet" as scraped now: the sum of its series with these labels.
double fleet_metric(const stack& s, const std::string& name,
                    std::map<std::string, std::string> labels) {
  request_options o;
  o.method = "GET";
  o.target = "/metrics";
  labels["upstream"] = "fleet";
  return metric_sum(parse_metrics(fetch(s.proxy->admin_endpoint(), o).body), name, labels);
}

double retries_counted(const stack& s, const std::string& reason) {
  return fleet_metric(s, "tokentap_upstream_retries_total", {{"reason", reason}});
}

std::string endpoint_label(std::uint16_t port) {
  return "127.0.0.1:" + std::to_string(port);
}

TEST(Failover, RoundRobinTakesEachEndpointInTurn) {
  canned_upstream a({{"/v1/chat/completions", stream_answer()}});
  canned_upstream b({{"/v1/chat/completions", stream_answer()}});
  stack s(fleet({a.port(), b.port()}, "round_robin", 1));
  for (int i = 0; i < 10; ++i) {
    const auto r = fetch(s.proxy_ep(), chat());
    ASSERT_EQ(r.status, 200);
    EXPECT_EQ(r.body, chunk_hi + "data: [DONE]\n\n");
  }
  EXPECT_EQ(a.requests.load(), 5);
  EXPECT_EQ(b.requests.load(), 5);
  // Each request went with its endpoint's Host.
  for (const auto& req : b.received())
    EXPECT_NE(req.head.find("Host: 127.0.0.1:" + std::to_string(b.port())), std::string::npos)
        << req.head;
}

TEST(Failover, ARefusedEndpointIsLeftForAnotherBeforeAnyByteReachedTheClient) {
  canned_upstream live({{"/v1/chat/completions", stream_answer()}});
  const refusing_port dead;
  stack s(fleet({dead.port(), live.port()}, "round_robin", 1));
  for (int i = 0; i < 6; ++i) {
    const auto r = fetch(s.proxy_ep(), chat());
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_TRUE(r.complete);
    EXPECT_EQ(r.body, chunk_hi + "data: [DONE]\n\n");
  }
  EXPECT_EQ(live.requests.load(), 6);
  EXPECT_EQ(retries_counted(s, "connect"), 3);  // every other request picked the refusing one
}

TEST(Failover, AnOverloadedEndpointsAnswerIsNotForwardedWhileAnotherCanTakeTheRequest) {
  for (const unsigned status : {503u, 502u, 429u}) {
    SCOPED_TRACE(status);
    canned_upstream busy({{"/v1/chat/completions", error_answer(status)}});
    canned_upstream live({{"/v1/chat/completions", stream_answer()}});
    stack s(fleet({busy.port(), live.port()}, "round_robin", 1));
    for (int i = 0; i < 4; ++i) {
      const auto r = fetch(s.proxy_ep(), chat());
      ASSERT_EQ(r.status, 200) << r.body;
      EXPECT_EQ(r.body, chunk_hi + "data: [DONE]\n\n");
    }
    EXPECT_EQ(busy.requests.load(), 2);
    EXPECT_EQ(live.requests.load(), 4);
    // The body went again, whole, to the other endpoint.
    for (const auto& req : live.received()) EXPECT_EQ(req.body, chat().body);
    EXPECT_EQ(retries_counted(s, "status_" + std::to_string(status)), 2);
    // Every response head counted on the endpoint that sent it.
    const auto heads = [&](std::uint16_t port, unsigned code) {
      return fleet_metric(s, "tokentap_upstream_endpoint_requests_total",
                          {{"endpoint", endpoint_label(port)}, {"code", std::to_string(code)}});
    };
    EXPECT_EQ(heads(busy.port(), status), 2);
    EXPECT_EQ(heads(live.port(), 200), 4);
    EXPECT_EQ(heads(busy.port(), 200), 0);
  }
}

TEST(Failover, WhenEveryAttemptFailsTheLastAnswerIsTheClients) {
  canned_upstream a({{"/v1/chat/completions", error_answer(503)}});
  canned_upstream b({{"/v1/chat/completions", error_answer(503)}});
  stack s(fleet({a.port(), b.port()}, "round_robin", 1));
  const auto r = fetch(s.proxy_ep(), chat());
  EXPECT_EQ(r.status, 503);
  EXPECT_EQ(r.body, R"({"error":{"message":"busy"}})");
  EXPECT_EQ(a.requests.load() + b.requests.load(), 2);  // one retry, not more
}

TEST(Failover, WithoutRetriesAFailedAttemptIsAnswered) {
  canned_upstream live({{"/v1/chat/completions", stream_answer()}});
  const refusing_port dead;
  stack s(fleet({dead.port(), live.port()}, "round_robin", 0));
  int bad_gateway = 0, ok = 0;
  for (int i = 0; i < 4; ++i) {
    const auto r = fetch(s.proxy_ep(), chat());
    (r.status == 502 ? bad_gateway : ok) += 1;
  }
  EXPECT_EQ(bad_gateway, 2);
  EXPECT_EQ(ok, 2);
  EXPECT_EQ(retries_counted(s, "connect"), 0);
}

TEST(Failover, EveryEndpointRefusingIsA502AfterTheRetries) {
  const refusing_port dead[3];
  stack s(fleet({dead[0].port(), dead[1].port(), dead[2].port()}, "least_request", 2));
  const auto r = fetch(s.proxy_ep(), chat());
  EXPECT_EQ(r.status, 502);
  EXPECT_NE(r.body.find("upstream_connect_error"), std::string::npos) << r.body;
  EXPECT_EQ(retries_counted(s, "connect"), 2);
}

double endpoint_metric(const stack& s, const std::string& name, std::uint16_t port) {
  return fleet_metric(s, name, {{"endpoint", endpoint_label(port)}});
}

// A refusing endpoint is ejected after its failures in a row: requests stop trying it (no more
// retries), the metrics say so, and it is tried again once its ejection is over.
TEST(Failover, AnEndpointThatKeepsFailingIsEjectedAndTriedAgainLater) {
  canned_upstream live({{"/v1/chat/completions", stream_answer()}});
  const refusing_port refusing;
  const auto dead = refusing.port();
  stack s([&](config::config& cfg) {
    fleet({dead, live.port()}, "round_robin", 1)(cfg);
    cfg.upstreams.front().outlier.consecutive_failures = 2;
    cfg.upstreams.front().outlier.base_ejection = config::ms(400);
  });
  for (int i = 0; i < 10; ++i) ASSERT_EQ(fetch(s.proxy_ep(), chat()).status, 200);
  EXPECT_EQ(retries_counted(s, "connect"), 2);  // the two failures that ejected it
  EXPECT_EQ(endpoint_metric(s, "tokentap_upstream_endpoint_healthy", dead), 0);
  EXPECT_EQ(endpoint_metric(s, "tokentap_upstream_endpoint_healthy", live.port()), 1);
  EXPECT_EQ(endpoint_metric(s, "tokentap_upstream_ejections_total", dead), 1);
  EXPECT_EQ(endpoint_metric(s, "tokentap_upstream_endpoint_active_streams", live.port()), 0);
  // The endpoint table says when it comes back, then since when it is back; the live one was
  // never ejected.
  auto ejection_ends_in = [&](std::uint16_t port) {
    request_options o;
    o.method = "GET";
    o.target = "/api/stats";
    const auto stats = fetch(s.proxy->admin_endpoint(), o).body;
    simdjson::dom::parser parser;
    simdjson::dom::element doc;
    EXPECT_FALSE(parser.parse(stats).get(doc)) << stats;
    for (auto row : doc["endpoints"].get_array()) {
      std::string_view endpoint;
      if (row["endpoint"].get(endpoint) || endpoint != endpoint_label(port)) continue;
      double t = 0;
      return row["ejection_ends_in_s"].get(t) ? std::optional<double>() : std::optional(t);
    }
    ADD_FAILURE() << "no row for " << port << ": " << stats;
    return std::optional<double>();
  };
  const auto while_ejected = ejection_ends_in(dead);
  ASSERT_TRUE(while_ejected);
  EXPECT_GT(*while_ejected, 0);
  EXPECT_LE(*while_ejected, 0.4);
  EXPECT_FALSE(ejection_ends_in(live.port()));
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_EQ(endpoint_metric(s, "tokentap_upstream_endpoint_healthy", dead), 1);
  const auto back = ejection_ends_in(dead);
  ASSERT_TRUE(back);
  EXPECT_LT(*back, 0);
  for (int i = 0; i < 4; ++i) ASSERT_EQ(fetch(s.proxy_ep(), chat()).status, 200);
  // Tried again: two more failures, ejected again, for twice as long.
  EXPECT_EQ(retries_counted(s, "connect"), 4);
  EXPECT_EQ(endpoint_metric(s, "tokentap_upstream_ejections_total", dead), 2);
  EXPECT_EQ(live.requests.load(), 14);
}

// The trace record says where the exchange went: each attempt, in order, with why it failed.
TEST(Failover, TheTraceRecordListsEveryAttempt) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("tokentap-failover-" + std::to_string(::getpid()));
  canned_upstream busy({{"/v1/chat/completions", error_answer(503)}});
  canned_upstream live({{"/v1/chat/completions", stream_answer()}});
  const refusing_port refusing;
  const auto dead = refusing.port();
  {
    stack s([&](config::config& cfg) {
      fleet({dead, busy.port(), live.port()}, "round_robin", 2)(cfg);
      cfg.trace.dir = dir.string();
    });
    ASSERT_EQ(fetch(s.proxy_ep(), chat()).status, 200);
  }  // (the writer has flushed once the proxy is gone)
  std::string record;
  for (const auto& f : std::filesystem::directory_iterator(dir)) {
    std::ifstream in(f.path());
    std::getline(in, record);
  }
  std::filesystem::remove_all(dir);
  const std::string expected =
      R"("upstream":{"name":"fleet","endpoint":")" + endpoint_label(live.port()) +
      R"(","attempts":[{"endpoint":")" + endpoint_label(dead) +
      R"(","error":"connect"},{"endpoint":")" + endpoint_label(busy.port()) +
      R"(","error":"status_503"},{"endpoint":")" + endpoint_label(live.port()) +
      R"(","error":null}],"decision":{"policy":"round_robin","reason":"round_robin",)"
      R"("matched_messages":0}})";
  EXPECT_NE(record.find(expected), std::string::npos) << record;
}

// An upstream none of whose endpoints can take a request hands it to its fallback: after its
// own endpoints failed (within the retries), and at once while all of them are ejected.
TEST(Failover, AnUpstreamWithNoEndpointLeftFallsBackToAnother) {
  canned_upstream backup({{"/v1/chat/completions", stream_answer()}});
  const refusing_port refusing[2];
  const auto dead1 = refusing[0].port(), dead2 = refusing[1].port();
  const auto dir =
      std::filesystem::temp_directory_path() / ("tokentap-fallback-" + std::to_string(::getpid()));
  {
    stack s([&](config::config& cfg) {
      fleet({dead1, dead2}, "round_robin", 2)(cfg);
      auto& up = cfg.upstreams.front();
      up.outlier.consecutive_failures = 1;
      up.outlier.max_ejected_percent = 100;
      up.fallback = "backup";
      config::upstream_config b;
      b.name = "backup";
      std::string err;
      b.endpoints.push_back(*config::parse_url(url(backup.port()), err));
      cfg.upstreams.push_back(b);
      cfg.trace.dir = dir.string();
    });
    for (int i = 0; i < 3; ++i) {
      const auto r = fetch(s.proxy_ep(), chat());
      ASSERT_EQ(r.status, 200) << i << ": " << r.body;
      EXPECT_EQ(r.body, chunk_hi + "data: [DONE]\n\n");
    }
    // The first request failed on both endpoints (ejecting them), then went to the fallback; the
    // next ones went there at once.
    EXPECT_EQ(retries_counted(s, "connect"), 2);
    EXPECT_EQ(backup.requests.load(), 3);
    const auto decisions = [&](const char* reason) {
      return fleet_metric(s, "tokentap_routing_decisions_total",
                          {{"policy", "round_robin"}, {"reason", reason}});
    };
    EXPECT_EQ(decisions("round_robin"), 1);  // the first request's first pick
    EXPECT_EQ(decisions("fallback"), 3);
  }
  std::vector<std::string> records;
  for (const auto& f : std::filesystem::directory_iterator(dir)) {
    std::ifstream in(f.path());
    for (std::string line; std::getline(in, line);) records.push_back(line);
  }
  std::filesystem::remove_all(dir);
  ASSERT_EQ(records.size(), 3u);
  int fell_back_at_once = 0, fell_back_after_two = 0;
  for (const auto& r : records) {
    EXPECT_NE(
        r.find(R"("decision":{"policy":"round_robin","reason":"fallback","matched_messages":0})"),
        std::string::npos)
        << r;
    if (r.find(R"("attempts":[{"endpoint":")" + endpoint_label(backup.port()) +
               R"(","error":null}])") != std::string::npos)
      ++fell_back_at_once;
    if (r.find(R"(","error":"connect"},{"endpoint":")" + endpoint_label(backup.port())) !=
        std::string::npos)
      ++fell_back_after_two;
  }
  EXPECT_EQ(fell_back_at_once, 2);
  EXPECT_EQ(fell_back_after_two, 1);
}

// Every endpoint ejected and no fallback: the request is answered 503 at once, without an
// attempt, and names the upstream; nothing hangs.
TEST(Failover, NoEndpointLeftAndNoFallbackIsA503AtOnce) {
  const refusing_port refusing[2];
  const auto dead1 = refusing[0].port(), dead2 = refusing[1].port();
  stack s([&](config::config& cfg) {
    fleet({dead1, dead2}, "least_request", 1)(cfg);
    auto& up = cfg.upstreams.front();
    up.outlier.consecutive_failures = 1;
    up.outlier.max_ejected_percent = 100;
  });
  const auto first = fetch(s.proxy_ep(), chat());
  EXPECT_EQ(first.status, 502) << first.body;  // both tried (and ejected)
  const auto t0 = std::chrono::steady_clock::now();
  const auto r = fetch(s.proxy_ep(), chat());
  const auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_EQ(r.status, 503) << r.body;
  EXPECT_NE(r.body.find("\"no_upstream_endpoint\""), std::string::npos) << r.body;
  EXPECT_NE(r.body.find("no endpoint of upstream 'fleet' can take the request"), std::string::npos)
      << r.body;
  EXPECT_LT(took, std::chrono::seconds(1));
  EXPECT_EQ(retries_counted(s, "connect"), 1);  // the first request's; none for the second
  EXPECT_EQ(fleet_metric(s, "tokentap_upstream_ejections_total", {}), 2);
}

// The active probe: an endpoint that takes requests but says it is unhealthy (a draining
// server) leaves balancing; one that refuses connections leaves it and comes back when it
// answers again.
TEST(Failover, AnEndpointFailingItsHealthProbeLeavesBalancingAndRejoins) {
  canned_upstream good(
      {{"/v1/chat/completions", stream_answer()}, {"/health", {"application/json", {"{}"}}}});
  canned_upstream draining(
      {{"/v1/chat/completions", stream_answer()}, {"/health", error_answer(503)}});
  auto so = loopback_sim(1, 1, 3);
  auto restarted = std::make_unique<sim::server>(so);
  restarted->start();
  const auto sim_port = restarted->endpoint().port();
  stack s([&](config::config& cfg) {
    fleet({good.port(), draining.port(), sim_port}, "round_robin", 1)(cfg);
    auto& h = cfg.upstreams.front().health;
    h.enabled = true;
    h.interval = std::chrono::milliseconds(100);
    h.timeout = std::chrono::milliseconds(80);
    h.unhealthy_threshold = 2;
    h.healthy_threshold = 2;
  });
  const auto healthy = [&](std::uint16_t port) {
    return fleet_metric(s, "tokentap_upstream_endpoint_healthy",
                        {{"endpoint", endpoint_label(port)}});
  };
  const auto wait_for = [&](auto done) {
    for (int i = 0; i < 100 && !done(); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    return done();
  };
  ASSERT_TRUE(wait_for([&] { return healthy(draining.port()) == 0; }));
  EXPECT_EQ(healthy(good.port()), 1);
  EXPECT_EQ(healthy(sim_port), 1);
  for (int i = 0; i < 6; ++i) ASSERT_EQ(fetch(s.proxy_ep(), chat()).status, 200);
  // Its probes reached it; no request did.
  ASSERT_FALSE(draining.received().empty());
  for (const auto& r : draining.received())
    EXPECT_EQ(r.head.rfind("GET /health HTTP/1.1", 0), 0u) << r.head;
  EXPECT_GT(fleet_metric(s, "tokentap_upstream_health_checks_total",
                         {{"endpoint", endpoint_label(draining.port())}, {"result", "failure"}}),
            1);
  // The simulator goes away: out after two failed probes; back on its port: in after two passes.
  restarted.reset();
  ASSERT_TRUE(wait_for([&] { return healthy(sim_port) == 0; }));
  for (int i = 0; i < 4; ++i) ASSERT_EQ(fetch(s.proxy_ep(), chat()).status, 200);
  EXPECT_EQ(retries_counted(s, "connect"), 0);  // no request tried it
  so.port = sim_port;
  restarted = std::make_unique<sim::server>(so);
  restarted->start();
  ASSERT_TRUE(wait_for([&] { return healthy(sim_port) == 1; }));
  for (int i = 0; i < 6; ++i) ASSERT_EQ(fetch(s.proxy_ep(), chat()).status, 200);
  EXPECT_GE(restarted->stats().streams_completed.load(), 2u);  // its turns of six
}

}  // namespace
}  // namespace tokentap::test
