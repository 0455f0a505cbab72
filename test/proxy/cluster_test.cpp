// Clusters and their load balancers: endpoints numbered across clusters, named as metrics name
// them; least-request picks by the power of two choices, round-robin in turn; retries skip the
// endpoints tried and stay within the retry budget.
#include "proxy/cluster.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/clock.hpp"
#include "test/proxy/upstreams.hpp"

namespace tokentap::proxy {
namespace {

// An upstream "fleet" of those endpoints with the configuration's defaults.
config::upstream_config upstream_of(std::initializer_list<const char*> urls) {
  const config::upstream_config defaults;
  return test::upstream_of("fleet", urls, defaults.retries, defaults.balance);
}

TEST(Cluster, EndpointsAreNumberedOnFromTheFirstIdAndNamedByHostAndPort) {
  const auto up = upstream_of({"http://10.0.0.1:8000/v", "http://[::1]:9000", "http://gpu-3"});
  cluster c(up, 5, nullptr);
  ASSERT_EQ(c.endpoints().size(), 3u);
  EXPECT_EQ(c.endpoints()[0]->id, 5u);
  EXPECT_EQ(c.endpoints()[2]->id, 7u);
  EXPECT_EQ(c.endpoints()[0]->label, "10.0.0.1:8000");
  EXPECT_EQ(c.endpoints()[1]->label, "[::1]:9000");
  EXPECT_EQ(c.endpoints()[2]->label, "gpu-3:80");
  EXPECT_EQ(c.endpoints()[0]->host_header, "10.0.0.1:8000");
  EXPECT_EQ(c.endpoints()[2]->host_header, "gpu-3");
  EXPECT_EQ(c.endpoints()[0]->target.base_path, "/v");
  EXPECT_EQ(c.tls(), nullptr);
  EXPECT_EQ(&c.cfg(), &up);
}

// The policies an upstream may name, and the reasons each gives; any other name is refused with
// the line that wrote it and the names there are.
TEST(Cluster, ItsPolicyIsNamedByItsBalanceAndAnUnknownNameIsRefused) {
  const auto reasons = [](const std::string& policy) {
    auto up = test::upstream_of("a", {"http://h:1", "http://g:2"}, 0, policy);
    return cluster(up, 0, nullptr).reasons();
  };
  EXPECT_EQ(reasons("round_robin"), std::vector{routing_reason::round_robin});
  EXPECT_EQ(reasons("least_request"), std::vector{routing_reason::least_request});
  EXPECT_EQ(reasons("prefix"),
            (std::vector{routing_reason::prefix_match, routing_reason::least_request,
                         routing_reason::load_bound}));
  auto up = test::upstream_of("a", {"http://h:1"}, 0, "prefix");
  up.prefix.new_conversations = config::prefix_config::placement::hash;
  EXPECT_EQ(cluster(up, 0, nullptr).reasons().back(), routing_reason::hash);
  EXPECT_TRUE(cluster(up, 0, nullptr).routes_by_conversation());
  EXPECT_FALSE(
      cluster(test::upstream_of("a", {"http://h:1"}, 0), 0, nullptr).routes_by_conversation());

  auto cfg = config::parse_config(
      "upstreams:\n  a: {url: http://h}\n  b:\n    url: http://g\n    balance: random\n"
      "routes: [{prefix: /, upstream: a}]\n");
  for (const auto& check : {std::function<void()>([&] { check_balancing(cfg); }),
                            std::function<void()>([&] { make_balancer(cfg.upstreams[1]); })}) {
    try {
      check();
      ADD_FAILURE() << "took balance: random";
    } catch (const config::config_error& e) {
      EXPECT_STREQ(e.what(),
                   "line 5: upstream 'b': balance must be one of least_request, round_robin, "
                   "prefix, not 'random'");
    }
  }
}

TEST(LeastRequest, OneEndpointIsAlwaysPicked) {
  const auto up = upstream_of({"http://h"});
  cluster c(up, 0, nullptr);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(c.pick({}), c.endpoints()[0].get());
}

// Of two endpoints drawn, the one with fewer exchanges in flight: the busiest endpoint loses to
// every other, and equally loaded endpoints all get requests.
TEST(LeastRequest, TheBusiestEndpointIsNeverPickedTheOthersShare) {
  const auto up = upstream_of({"http://a", "http://b", "http://c", "http://d"});
  cluster c(up, 0, nullptr);
  auto& eps = c.endpoints();
  active_exchange busy[5];
  for (auto& b : busy) b.reset(eps[2].get());
  EXPECT_EQ(eps[2]->active.load(), 5u);
  std::map<endpoint*, int> picks;
  for (int i = 0; i < 3000; ++i)
    ++picks[c.pick({.route_key = "k", .conversation = {}, .tried = {}})];
  EXPECT_EQ(picks.count(eps[2].get()), 0u);
  for (std::size_t i : {0u, 1u, 3u}) {
    EXPECT_GT(picks[eps[i].get()], 700) << i;  // ~1000 each
    EXPECT_LT(picks[eps[i].get()], 1300) << i;
  }
}

// A retry: the least busy endpoint not tried yet; none left, none.
TEST(LeastRequest, ARetryTakesTheLeastBusyEndpointNotTriedYet) {
  const auto up = upstream_of({"http://a", "http://b", "http://c"});
  cluster c(up, 0, nullptr);
  auto& eps = c.endpoints();
  active_exchange busy_b[2], busy_c[1];
  for (auto& x : busy_b) x.reset(eps[1].get());
  for (auto& x : busy_c) x.reset(eps[2].get());
  endpoint* tried[] = {eps[0].get(), eps[1].get(), eps[2].get()};
  EXPECT_EQ(c.pick({.route_key = {}, .conversation = {}, .tried = {tried, 1}}), eps[2].get());
  EXPECT_EQ(c.pick({.route_key = {}, .conversation = {}, .tried = {tried + 2, 1}}), eps[0].get());
  EXPECT_EQ(c.pick({.route_key = {}, .conversation = {}, .tried = {tried, 3}}), nullptr);
}

TEST(RoundRobin, EachEndpointInTurnFromEveryThread) {
  auto up = upstream_of({"http://a", "http://b", "http://c"});
  up.balance = "round_robin";
  cluster c(up, 4, nullptr);
  std::map<endpoint*, int> picks;
  std::mutex mu;
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 1000; ++i) {
        auto* e = c.pick({.route_key = {}, .conversation = {}, .tried = {}});
        std::lock_guard lk(mu);
        ++picks[e];
      }
    });
  for (auto& t : threads) t.join();
  for (const auto& e : c.endpoints()) EXPECT_EQ(picks[e.get()], 1000);
  // In turn, one after the other.
  const auto* first = c.pick({.route_key = {}, .conversation = {}, .tried = {}});
  EXPECT_EQ(c.pick({.route_key = {}, .conversation = {}, .tried = {}})->id,
            4 + (first->id - 4 + 1) % 3);
}

TEST(RoundRobin, ARetryTakesTheNextEndpointNotTriedWithoutTakingTheNextRequestsTurn) {
  auto up = upstream_of({"http://a", "http://b", "http://c"});
  up.balance = "round_robin";
  cluster c(up, 0, nullptr);
  auto& eps = c.endpoints();
  EXPECT_EQ(c.pick({.route_key = {}, .conversation = {}, .tried = {}}), eps[0].get());
  endpoint* tried[] = {eps[0].get(), eps[1].get()};
  EXPECT_EQ(c.pick({.route_key = {}, .conversation = {}, .tried = {tried, 1}}), eps[1].get());
  EXPECT_EQ(c.pick({.route_key = {}, .conversation = {}, .tried = {tried, 2}}), eps[2].get());
  EXPECT_EQ(c.pick({.route_key = {}, .conversation = {}, .tried = {tried + 1, 1}}), eps[2].get());
  EXPECT_EQ(c.pick({.route_key = {}, .conversation = {}, .tried = {}}),
            eps[1].get());  // the next request's turn
  endpoint* all[] = {eps[0].get(), eps[1].get(), eps[2].get()};
  EXPECT_EQ(c.pick({.route_key = {}, .conversation = {}, .tried = {all, 3}}), nullptr);
}

// A reload keeps each endpoint's id (its pooled connections, its state) and numbers new ones
// after all the ids ever given: a cluster's ids need not be consecutive nor in its order.  A
// retry still takes the endpoint after the failed one in the cluster's order.
TEST(RoundRobin, ARetryTakesTheNextEndpointWhateverTheIds) {
  auto up = upstream_of({"http://a", "http://b", "http://c"});
  up.balance = "round_robin";
  cluster c(up, 0, nullptr);
  auto& eps = c.endpoints();
  eps[0]->id = 7;
  eps[1]->id = 2;
  eps[2]->id = 5;
  for (std::size_t i = 0; i < 3; ++i) {
    endpoint* tried[] = {eps[i].get()};
    EXPECT_EQ(c.pick({.route_key = {}, .conversation = {}, .tried = {tried, 1}}),
              eps[(i + 1) % 3].get())
        << "after endpoint " << i;
  }
  // A retry on a fallback failed on another cluster: it is the fallback's first attempt and
  // takes the next turn (the retries above took none), like a new request.
  auto other_up = upstream_of({"http://x"});
  cluster other(other_up, 9, nullptr);
  endpoint* elsewhere[] = {other.endpoints()[0].get()};
  EXPECT_EQ(c.pick({.route_key = {}, .conversation = {}, .tried = {elsewhere, 1}}), eps[0].get());
  EXPECT_EQ(c.pick({.route_key = {}, .conversation = {}, .tried = {}}), eps[1].get());
}

// Retries in flight stay under 20 % of the exchanges in flight, and at least 3 may run.
TEST(RetryBudget, RetriesInFlightStayUnderAFifthOfTheExchangesAndAtLeastThree) {
  const auto up = upstream_of({"http://a", "http://b"});
  cluster c(up, 0, nullptr);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(c.begin_retry()) << i;
  EXPECT_FALSE(c.begin_retry());
  c.end_retry();
  EXPECT_TRUE(c.begin_retry());
  for (int i = 0; i < 3; ++i) c.end_retry();
  std::vector<active_exchange> busy(40);
  for (std::size_t i = 0; i < busy.size(); ++i) busy[i].reset(c.endpoints()[i % 2].get());
  for (int i = 0; i < 8; ++i) EXPECT_TRUE(c.begin_retry()) << i;  // 20 % of 40
  EXPECT_FALSE(c.begin_retry());
  for (int i = 0; i < 8; ++i) c.end_retry();
}

// Outlier detection: failures in a row eject an endpoint from balancing for base × the times it
// was ejected, never more than max_ejected_percent of the endpoints at once; it rejoins by itself.
TEST(Outlier, FailuresInARowEjectAnEndpointUntilItRejoinsByItself) {
  auto up = upstream_of({"http://a", "http://b", "http://c", "http://d"});
  up.balance = "round_robin";
  up.outlier.consecutive_failures = 3;
  up.outlier.base_ejection = config::ms(150);
  cluster c(up, 0, nullptr);
  auto& eps = c.endpoints();
  auto& a = *eps[0];
  EXPECT_FALSE(c.record_failure(a));
  EXPECT_FALSE(c.record_failure(a));
  c.record_success(a);  // a success breaks the run
  EXPECT_FALSE(c.record_failure(a));
  EXPECT_FALSE(c.record_failure(a));
  EXPECT_TRUE(c.record_failure(a));
  EXPECT_EQ(c.ejections(a), 1u);
  EXPECT_TRUE(a.ejected(base::mono_now_ns()));
  for (int i = 0; i < 40; ++i)
    EXPECT_NE(c.pick({.route_key = {}, .conversation = {}, .tried = {}}), &a);
  // Half may be out (max_ejected_percent 50): b goes too, c does not.
  for (int i = 0; i < 3; ++i) c.record_failure(*eps[1]);
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(c.record_failure(*eps[2]));
  EXPECT_TRUE(eps[1]->ejected(base::mono_now_ns()));
  EXPECT_FALSE(eps[2]->ejected(base::mono_now_ns()));
  // Back after the base ejection time; the second ejection lasts twice as long.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_FALSE(a.ejected(base::mono_now_ns()));
  std::map<endpoint*, int> picks;
  for (int i = 0; i < 40; ++i) ++picks[c.pick({.route_key = {}, .conversation = {}, .tried = {}})];
  EXPECT_EQ(picks[&a], 10);
  for (int i = 0; i < 3; ++i) c.record_failure(a);
  EXPECT_EQ(c.ejections(a), 2u);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_TRUE(a.ejected(base::mono_now_ns()));  // 300 ms this time
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_FALSE(a.ejected(base::mono_now_ns()));
}

TEST(Outlier, ALoneEndpointIsNeverEjectedAndZeroFailuresTurnsItOff) {
  auto one = upstream_of({"http://a"});
  cluster c1(one, 0, nullptr);
  for (int i = 0; i < 20; ++i) EXPECT_FALSE(c1.record_failure(*c1.endpoints()[0]));
  EXPECT_EQ(c1.pick({.route_key = {}, .conversation = {}, .tried = {}}), c1.endpoints()[0].get());
  auto two = upstream_of({"http://a", "http://b"});
  two.outlier.consecutive_failures = 0;
  cluster c2(two, 0, nullptr);
  for (int i = 0; i < 20; ++i) EXPECT_FALSE(c2.record_failure(*c2.endpoints()[0]));
}

// Least request leaves ejected endpoints out whichever two it draws.
TEST(Outlier, LeastRequestNeverPicksAnEjectedEndpoint) {
  auto up = upstream_of({"http://a", "http://b", "http://c"});
  up.outlier.consecutive_failures = 1;
  cluster c(up, 0, nullptr);
  ASSERT_TRUE(c.record_failure(*c.endpoints()[1]));
  for (int i = 0; i < 300; ++i)
    EXPECT_NE(c.pick({.route_key = {}, .conversation = {}, .tried = {}}), c.endpoints()[1].get());
}

TEST(ActiveExchange, CountsWhileItLivesAndMovesWithReset) {
  const auto up = upstream_of({"http://a", "http://b"});
  cluster c(up, 0, nullptr);
  auto& a = *c.endpoints()[0];
  auto& b = *c.endpoints()[1];
  {
    active_exchange x(&a);
    EXPECT_EQ(a.active.load(), 1u);
    x.reset(&b);
    EXPECT_EQ(a.active.load(), 0u);
    EXPECT_EQ(b.active.load(), 1u);
  }
  EXPECT_EQ(b.active.load(), 0u);
}

}  // namespace
}  // namespace tokentap::proxy
