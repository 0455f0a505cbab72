// The life of an endpoint's periodic request (the health probe here; the engine scrape shares
// it): a reload stops the replaced generation's polls and starts the new one's; a stop ends them,
// and one waiting for a slow answer is closed rather than waited for.
#include "proxy/endpoint_poller.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>

#include "test/proxy/loopback_proxy.hpp"
#include "test/proxy/scripted_http.hpp"

namespace tokentap::proxy {
namespace {

using namespace std::chrono_literals;
using test::eventually;
using test::scripted_http;

config::config probing(const std::string& url, const std::string& path,
                       std::chrono::milliseconds timeout = 500ms) {
  auto cfg = test::loopback_config(url);
  auto& h = cfg.upstreams.front().health;
  h.enabled = true;
  h.path = path;
  h.interval = 20ms;
  h.timeout = timeout;
  config::validate(cfg);
  return cfg;
}

std::size_t asked_for(scripted_http& up, const std::string& path) {
  const auto heads = up.heads();
  return static_cast<std::size_t>(std::count_if(heads.begin(), heads.end(), [&](const auto& h) {
    return h.rfind("GET " + path + " ", 0) == 0;
  }));
}

TEST(EndpointPoller, AReloadStopsTheReplacedGenerationsPolls) {
  scripted_http up;
  proxy_server s(probing(up.url(), "/old"));
  s.start();
  ASSERT_TRUE(eventually([&] { return asked_for(up, "/old") >= 2; }));
  ASSERT_TRUE(s.reload(probing(up.url(), "/new")).applied);
  ASSERT_TRUE(eventually([&] { return asked_for(up, "/new") >= 2; }));
  const auto old_polls = asked_for(up, "/old");
  std::this_thread::sleep_for(150ms);  // several intervals
  EXPECT_EQ(asked_for(up, "/old"), old_polls);
  EXPECT_GE(asked_for(up, "/new"), 4u);
  s.shutdown(0ms);
  s.join();
}

TEST(EndpointPoller, AStopEndsThePollsAndClosesOneInFlight) {
  scripted_http up;
  up.delay_ms = 2000;  // every answer comes late
  proxy_server s(probing(up.url(), "/health", 10s));
  s.start();
  ASSERT_TRUE(eventually([&] { return asked_for(up, "/health") >= 1; }));
  const auto t0 = std::chrono::steady_clock::now();
  s.shutdown(0ms);
  s.join();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 1500ms);  // not the answer's 2 s
  const auto polls = asked_for(up, "/health");
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(asked_for(up, "/health"), polls);
}

}  // namespace
}  // namespace tokentap::proxy
