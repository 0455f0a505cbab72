// The engine-metrics scrape (`engine_metrics:`) on a real proxy_server against a server the test
// scripts: an engine's text becomes the endpoint's load figures, its TTFT over the window comes
// from its histogram's growth between reads, `engine_load: true` counts its queue as balancing
// load, and a failed or meaningless read is counted and leaves every figure unknown.
#include "proxy/engine_scraper.hpp"

#include <gtest/gtest.h>

#include <memory>

#include "test/proxy/loopback_proxy.hpp"
#include "test/proxy/scripted_http.hpp"

namespace tokentap::proxy {
namespace {

using namespace std::chrono_literals;
using test::eventually;
using test::scripted_http;

enum scrape_result { ok, failed, garbage };  // endpoint::engine_scrapes' order

struct scraped : test::loopback_proxy {
  explicit scraped(const std::string& url, bool engine_load = false, std::string kind = "auto")
      : loopback_proxy(scraping(url, engine_load, std::move(kind))) {}
  static config::config scraping(const std::string& url, bool engine_load, std::string kind) {
    auto cfg = test::loopback_config(url);
    auto& m = cfg.upstreams.front().engine_metrics;
    m.enabled = true;
    m.interval = 20ms;
    m.kind = std::move(kind);
    m.engine_load = engine_load;
    return cfg;
  }
  endpoint& e() { return first_endpoint(); }
  std::uint64_t scrapes(scrape_result r) { return e().engine_scrapes[r].load(); }
};

std::string vllm_text(double running, double waiting, double kv, int fast, int slow) {
  auto n = [](double v) { return std::to_string(v); };
  return "# TYPE vllm:num_requests_running gauge\n"
         "vllm:num_requests_running{model_name=\"m\"} " +
         n(running) +
         "\n"
         "vllm:num_requests_waiting{model_name=\"m\"} " +
         n(waiting) +
         "\n"
         "vllm:kv_cache_usage_perc{model_name=\"m\"} " +
         n(kv) +
         "\n"
         "vllm:time_to_first_token_seconds_bucket{le=\"0.1\",model_name=\"m\"} " +
         std::to_string(fast) +
         "\n"
         "vllm:time_to_first_token_seconds_bucket{le=\"1.0\",model_name=\"m\"} " +
         std::to_string(fast + slow) +
         "\n"
         "vllm:time_to_first_token_seconds_bucket{le=\"+Inf\",model_name=\"m\"} " +
         std::to_string(fast + slow) + "\n";
}

TEST(EngineScraper, AnEnginesTextBecomesTheEndpointsFigures) {
  scripted_http up;
  up.body([] { return vllm_text(3, 7, 0.25, 0, 0); });
  scraped s(up.url("/v1"));
  ASSERT_TRUE(eventually([&] { return s.scrapes(ok) >= 2; }));
  EXPECT_DOUBLE_EQ(s.e().engine_running.load(), 3);
  EXPECT_DOUBLE_EQ(s.e().engine_waiting.load(), 7);
  EXPECT_DOUBLE_EQ(s.e().engine_kv_usage.load(), 0.25);
  EXPECT_EQ(s.e().engine_queue.load(), 0u);  // not balancing load unless asked
  EXPECT_EQ(s.scrapes(failed) + s.scrapes(garbage), 0u);
  const auto heads = up.heads();
  EXPECT_EQ(heads.front().rfind("GET /metrics HTTP/1.1\r\n", 0), 0u) << heads.front();
}

TEST(EngineScraper, EngineLoadCountsTheQueueAsBalancingLoad) {
  scripted_http up;
  up.body([] { return vllm_text(1, 12, 0.5, 0, 0); });
  scraped s(up.url(), /*engine_load=*/true);
  ASSERT_TRUE(eventually([&] { return s.e().engine_queue.load() == 12; }));
  EXPECT_EQ(s.e().load(), 12u);  // nothing in flight here, twelve waiting there
}

// Every read the histogram has grown by ten: nine under 100 ms and one under a second, so the
// window's P50 sits in the first bucket and its P99 in the second.
TEST(EngineScraper, TheEnginesTtftOverTheWindowComesFromItsHistogramsGrowth) {
  scripted_http up;
  std::atomic<int> reads{0};
  up.body([&] {
    const int n = reads++;
    return vllm_text(1, 0, 0.1, 9 * n, n);
  });
  scraped s(up.url());
  ASSERT_TRUE(eventually([&] { return s.e().engine_ttft_s[0].load() >= 0; }));
  ASSERT_TRUE(eventually([&] { return s.e().engine_ttft_s[2].load() > 0.1; }));
  EXPECT_GT(s.e().engine_ttft_s[0].load(), 0);
  EXPECT_LE(s.e().engine_ttft_s[0].load(), 0.1);
  EXPECT_LE(s.e().engine_ttft_s[2].load(), 1.0);
}

TEST(EngineScraper, AFailedOrMeaninglessReadIsCountedAndLeavesTheFiguresUnknown) {
  scripted_http up;
  up.body([] { return vllm_text(3, 7, 0.25, 0, 0); });
  scraped s(up.url());
  ASSERT_TRUE(eventually([&] { return s.scrapes(ok) >= 1; }));
  up.status = 500;
  ASSERT_TRUE(eventually([&] { return s.scrapes(failed) >= 1 && s.e().engine_running < 0; }));
  EXPECT_LT(s.e().engine_waiting.load(), 0);
  EXPECT_LT(s.e().engine_kv_usage.load(), 0);
  up.body([] { return std::string("<html>not an engine</html>\n"); });
  up.status = 200;
  ASSERT_TRUE(eventually([&] { return s.scrapes(garbage) >= 1; }));
  EXPECT_LT(s.e().engine_running.load(), 0);
  EXPECT_LT(s.e().engine_ttft_s[0].load(), 0);
  up.body([] { return vllm_text(2, 0, 0.5, 0, 0); });
  ASSERT_TRUE(eventually([&] { return s.e().engine_running.load() == 2; }));
}

// `kind: tgi` reads TGI's names only: vLLM's text then holds no figure of that engine.
TEST(EngineScraper, AnExplicitKindReadsOnlyThatEnginesNames) {
  scripted_http up;
  up.body([] { return vllm_text(3, 7, 0.25, 0, 0); });
  scraped s(up.url(), false, "tgi");
  ASSERT_TRUE(eventually([&] { return s.scrapes(garbage) >= 2; }));
  EXPECT_EQ(s.scrapes(ok), 0u);
  EXPECT_LT(s.e().engine_running.load(), 0);
}

}  // namespace
}  // namespace tokentap::proxy
