// Budgets shared by two proxy instances through a real redis-server: a per-tenant limit holds
// across both; when Redis goes away each instance falls back to its own budgets (and says so
// in its metrics) instead of refusing everyone, and shares again once Redis is back.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>

#include "test/support/http_client.hpp"
#include "test/support/metrics_text.hpp"
#include "test/support/redis_server.hpp"
#include "test/support/stack.hpp"

namespace tokentap::test {
namespace {

std::function<void(config::config&)> shared(std::uint16_t redis_port, std::uint32_t rpm,
                                            const std::string& prefix) {
  return [=](config::config& cfg) {
    cfg.tenants.enabled = true;
    cfg.tenants.header = "x-tokentap-tenant";
    config::set_hook_sections(
        cfg, "admission: [{name: per-tenant, requests_per_minute: " + std::to_string(rpm) + "}]");
    cfg.shared_state.redis_host = "127.0.0.1";
    cfg.shared_state.redis_port = redis_port;
    cfg.shared_state.sync = config::ms(20);
    cfg.shared_state.retry_after = config::ms(100);
    cfg.shared_state.key_prefix = prefix;
  };
}

request_options chat(const std::string& tenant) {
  request_options o;
  o.target = "/v1/chat/completions";
  o.body = R"({"model":"sim-small","stream":true,"messages":[{"role":"user","content":"hi"}]})";
  o.headers = {{"content-type", "application/json"},
               {"x-tokentap-tenant", tenant},
               {"x-sim-ttft-ms", "1"},
               {"x-sim-itl-ms", "1"},
               {"x-sim-tokens", "2"}};
  return o;
}

double metric(const stack& s, const std::string& name) {
  request_options o;
  o.method = "GET";
  o.target = "/metrics";
  return metric_sum(parse_metrics(fetch(s.proxy->admin_endpoint(), o).body), name, {});
}

bool wait_for(const std::function<bool()>& cond) {
  for (int i = 0; i < 300; ++i) {
    if (cond()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return cond();
}

// Requests from alternating instances, a sync interval and a little apart, until `n` were sent;
// how many each admitted.
std::pair<int, int> alternate(stack& a, stack& b, const std::string& tenant, int n) {
  int ok_a = 0, ok_b = 0;
  for (int i = 0; i < n; ++i) {
    auto& s = i % 2 == 0 ? a : b;
    const auto status = fetch(s.proxy_ep(), chat(tenant)).status;
    EXPECT_TRUE(status == 200 || status == 429) << status;
    if (status == 200) ++(i % 2 == 0 ? ok_a : ok_b);
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
  }
  return {ok_a, ok_b};
}

TEST(SharedState, ALimitHoldsAcrossTwoInstances) {
  redis_server redis;
  const auto prefix = "it:" + std::to_string(::getpid()) + ":a:";
  stack a(shared(redis.port(), 10, prefix)), b(shared(redis.port(), 10, prefix));
  ASSERT_TRUE(wait_for([&] { return metric(a, "tokentap_shared_state_up") == 1; }));
  ASSERT_TRUE(wait_for([&] { return metric(b, "tokentap_shared_state_up") == 1; }));
  // 10 a minute for the tenant across both; 20 requests over ~1 s refill less than one more.
  const auto [ok_a, ok_b] = alternate(a, b, "team-a", 20);
  EXPECT_GE(ok_a + ok_b, 10);
  EXPECT_LE(ok_a + ok_b, 11);
  EXPECT_GE(ok_a, 4);  // both took their part
  EXPECT_GE(ok_b, 4);
  EXPECT_GT(metric(a, "tokentap_shared_state_syncs_total"), 0);
  EXPECT_EQ(metric(a, "tokentap_shared_state_errors_total"), 0);
}

TEST(SharedState, WithoutRedisEachInstanceKeepsItsOwnLimitAndSaysSo) {
  redis_server redis;
  const auto prefix = "it:" + std::to_string(::getpid()) + ":b:";
  stack a(shared(redis.port(), 5, prefix)), b(shared(redis.port(), 5, prefix));
  ASSERT_TRUE(wait_for([&] { return metric(a, "tokentap_shared_state_up") == 1; }));
  ASSERT_TRUE(wait_for([&] { return metric(b, "tokentap_shared_state_up") == 1; }));
  redis.stop();
  ASSERT_TRUE(wait_for([&] { return metric(a, "tokentap_shared_state_up") == 0; }));
  ASSERT_TRUE(wait_for([&] { return metric(b, "tokentap_shared_state_up") == 0; }));
  EXPECT_GT(metric(a, "tokentap_shared_state_errors_total"), 0);
  // Fail open: nobody is refused for Redis being gone; each instance holds its own limit of 5
  // for a fresh tenant (its local budget), so the two admit up to twice the shared limit.
  const auto [ok_a, ok_b] = alternate(a, b, "team-b", 16);
  EXPECT_EQ(ok_a, 5);
  EXPECT_EQ(ok_b, 5);
  // Redis back: both share again.
  ASSERT_TRUE(redis.start());
  EXPECT_TRUE(wait_for([&] { return metric(a, "tokentap_shared_state_up") == 1; }));
  EXPECT_TRUE(wait_for([&] { return metric(b, "tokentap_shared_state_up") == 1; }));
  const auto [again_a, again_b] = alternate(a, b, "team-c", 12);
  EXPECT_GE(again_a + again_b, 5);
  EXPECT_LE(again_a + again_b, 6);
}

}  // namespace
}  // namespace tokentap::test
