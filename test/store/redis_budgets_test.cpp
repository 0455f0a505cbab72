// The Redis budgets against a real redis-server: a budget starts full, takes what each exchange
// used (into debt if need be), refills on Redis's clock up to its capacity, survives a script
// cache flush, and an unreachable Redis is an error, never a wait.
#include "store/redis_budgets.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "test/support/redis_server.hpp"

namespace tokentap::store {
namespace {

config::shared_state_config at(std::uint16_t port) {
  config::shared_state_config c;
  c.redis_host = "127.0.0.1";
  c.redis_port = port;
  c.timeout = config::ms(200);
  c.key_prefix = "test:" + std::to_string(::getpid()) + ":";
  return c;
}

TEST(RedisBudgets, TwoClientsDrawOnOneBudget) {
  test::redis_server redis;
  redis_budgets a(at(redis.port())), b(at(redis.port()));
  // 60 a minute: one a second.
  auto levels = a.exchange({{"rule:t1:r", 60, 60 / 60000.0, 10}});
  ASSERT_TRUE(levels) << a.last_error();
  EXPECT_NEAR((*levels)[0], 50, 0.1);
  levels = b.exchange({{"rule:t1:r", 60, 60 / 60000.0, 45}, {"rule:t2:r", 60, 0.001, 0}});
  ASSERT_TRUE(levels) << b.last_error();
  EXPECT_NEAR((*levels)[0], 5, 0.2);    // both clients' use is taken from one budget
  EXPECT_NEAR((*levels)[1], 60, 0.01);  // another key is another budget
  // Into debt, then a negative use (a settlement giving back) — never above capacity.
  levels = a.exchange({{"rule:t1:r", 60, 60 / 60000.0, 20}});
  ASSERT_TRUE(levels);
  EXPECT_NEAR((*levels)[0], -15, 0.3);
  levels = a.exchange({{"rule:t1:r", 60, 60 / 60000.0, -1000}});
  ASSERT_TRUE(levels);
  EXPECT_DOUBLE_EQ((*levels)[0], 60);
}

TEST(RedisBudgets, BudgetsRefillOnRedissClock) {
  test::redis_server redis;
  redis_budgets a(at(redis.port()));
  // 60,000 a minute: 1 a millisecond.
  auto levels = a.exchange({{"tpm:x:t", 60000, 1, 60000}});
  ASSERT_TRUE(levels);
  EXPECT_NEAR((*levels)[0], 0, 5);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  levels = a.exchange({{"tpm:x:t", 60000, 1, 0}});
  ASSERT_TRUE(levels);
  EXPECT_GT((*levels)[0], 190);
  EXPECT_LT((*levels)[0], 400);
}

TEST(RedisBudgets, AFlushedScriptCacheOrARestartIsOneFailedExchange) {
  test::redis_server redis;
  redis_budgets a(at(redis.port()));
  ASSERT_TRUE(a.exchange({{"k:r", 10, 0.001, 1}}));
  redis.stop();
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_FALSE(a.exchange({{"k:r", 10, 0.001, 1}}));
  EXPECT_FALSE(a.last_error().empty());
  EXPECT_FALSE(a.exchange({{"k:r", 10, 0.001, 1}}));  // refused at once: no wait
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(500));
  ASSERT_TRUE(redis.start());
  // A new Redis has no script and no budget: loaded again, the budget starts full.
  const auto levels = a.exchange({{"k:r", 10, 0.001, 1}});
  ASSERT_TRUE(levels) << a.last_error();
  EXPECT_NEAR((*levels)[0], 9, 0.01);
}

TEST(RedisBudgets, AnUnreachableRedisFailsWithinTheTimeout) {
  auto cfg = at(1);  // nothing listens on port 1
  redis_budgets a(cfg);
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_FALSE(a.exchange({{"k:r", 10, 0.001, 1}}));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(300));
  EXPECT_NE(a.last_error().find("127.0.0.1:1"), std::string::npos) << a.last_error();
}

}  // namespace
}  // namespace tokentap::store
