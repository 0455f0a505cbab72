// The active probe (`health:`) on a real proxy_server against a server the test scripts: an
// endpoint leaves balancing only after its threshold of failures in a row and comes back only
// after its threshold of passes; an answer later than the timeout, a non-2xx and a refused
// connection each fail; the probe asks for its own path, not under the endpoint's base path;
// without `health:` nothing is probed.
#include "proxy/health_checker.hpp"

#include <gtest/gtest.h>

#include <memory>

#include "test/proxy/loopback_proxy.hpp"
#include "test/proxy/scripted_http.hpp"

namespace tokentap::proxy {
namespace {

using namespace std::chrono_literals;
using test::eventually;
using test::scripted_http;

struct probed : test::loopback_proxy {
  probed(const std::string& url, const config::health_config& h)
      : loopback_proxy(with_health(url, h)) {}
  static config::config with_health(const std::string& url, const config::health_config& h) {
    auto cfg = test::loopback_config(url);
    cfg.upstreams.front().health = h;
    return cfg;
  }
  endpoint& e() { return first_endpoint(); }
};

config::health_config every(std::chrono::milliseconds interval, unsigned out_after,
                            unsigned back_after, std::chrono::milliseconds timeout = 500ms) {
  config::health_config h;
  h.enabled = true;
  h.interval = interval;
  h.timeout = timeout;
  h.unhealthy_threshold = out_after;
  h.healthy_threshold = back_after;
  return h;
}

// Read in this order the flag implies its count: a probe is counted before it moves the flag.
TEST(HealthChecker, ThresholdsInARowTakeAnEndpointOutAndBringItBack) {
  scripted_http up;
  up.status = 503;
  probed p(up.url(), every(20ms, 3, 2));
  auto& e = p.e();
  EXPECT_TRUE(e.available(0));
  bool early = false;
  ASSERT_TRUE(eventually([&] {
    const bool failing = e.probe_failing.load();
    if (failing && e.probes_failed.load() < 3) early = true;
    return failing;
  }));
  EXPECT_FALSE(early) << "out before three failures in a row";
  EXPECT_EQ(e.probes_passed.load(), 0u);
  EXPECT_FALSE(e.available(0));

  const auto failed_before = e.probes_failed.load();
  up.status = 204;  // any 2xx passes
  ASSERT_TRUE(eventually([&] {
    const bool failing = e.probe_failing.load();
    if (!failing && e.probes_passed.load() < 2) early = true;
    return !failing;
  }));
  EXPECT_FALSE(early) << "back before two passes in a row";
  EXPECT_TRUE(e.available(0));
  // Passing, it stays in; the failures counted are those before the switch (one in flight).
  std::this_thread::sleep_for(100ms);
  EXPECT_FALSE(e.probe_failing.load());
  EXPECT_LE(e.probes_failed.load(), failed_before + 1);
}

TEST(HealthChecker, AnAnswerLaterThanTheTimeoutFails) {
  scripted_http up;
  up.delay_ms = 400;
  probed p(up.url(), every(50ms, 1, 1, 60ms));
  ASSERT_TRUE(eventually([&] { return p.e().probe_failing.load(); }));
  EXPECT_EQ(p.e().probes_passed.load(), 0u);
  up.delay_ms = 0;
  ASSERT_TRUE(eventually([&] { return !p.e().probe_failing.load(); }));
}

TEST(HealthChecker, ARefusedConnectionFails) {
  std::string url;
  {
    scripted_http gone;
    url = gone.url();
  }  // its port now refuses
  probed p(url, every(20ms, 2, 1));
  ASSERT_TRUE(eventually([&] { return p.e().probe_failing.load(); }));
  EXPECT_GE(p.e().probes_failed.load(), 2u);
}

// The endpoint serves its API under /v1; the probe asks for `path` as written.
TEST(HealthChecker, TheProbeAsksForItsPathNotUnderTheBasePath) {
  scripted_http up;
  auto h = every(20ms, 1, 1);
  h.path = "/healthz";
  probed p(up.url("/v1"), h);
  ASSERT_TRUE(eventually([&] { return p.e().probes_passed.load() >= 2; }));
  const auto heads = up.heads();
  ASSERT_FALSE(heads.empty());
  EXPECT_EQ(heads.front().rfind("GET /healthz HTTP/1.1\r\n", 0), 0u) << heads.front();
  EXPECT_NE(heads.front().find("tokentap-health-check"), std::string::npos) << heads.front();
  EXPECT_FALSE(p.e().probe_failing.load());
}

TEST(HealthChecker, WithoutHealthNothingIsProbed) {
  scripted_http up;
  auto h = every(10ms, 1, 1);
  h.enabled = false;
  probed p(up.url(), h);
  std::this_thread::sleep_for(150ms);  // fifteen intervals
  EXPECT_TRUE(up.heads().empty());
  EXPECT_EQ(p.e().probes_passed.load() + p.e().probes_failed.load(), 0u);
}

}  // namespace
}  // namespace tokentap::proxy
