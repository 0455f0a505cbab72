// The engine's own metrics through the real proxy: its queue read while it fills, a scrape that
// fails, reads garbage or hangs counted while traffic goes on, the engine's TTFT beside the
// proxy's with the gap between them, and the engine's queue as load for the balancers.
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

double admin_metric(const stack& s, const std::string& name,
                    const std::map<std::string, std::string>& labels) {
  return metric_sum(metrics_of(s), name, labels);
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
    up.balance = "least_request";
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
