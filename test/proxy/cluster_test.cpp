// Clusters and their load balancer: endpoints numbered across clusters, named as metrics name
// them, and least-request picks by the power of two choices.
#include "proxy/cluster.hpp"

#include <gtest/gtest.h>

#include <map>
#include <string>

namespace tokentap::proxy {
namespace {

config::upstream_config upstream_of(std::initializer_list<const char*> urls) {
  config::upstream_config up;
  up.name = "fleet";
  for (const auto* u : urls) {
    std::string err;
    auto parsed = config::parse_url(u, err);
    EXPECT_TRUE(parsed) << err;
    up.endpoints.push_back(*parsed);
  }
  return up;
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
  for (int i = 0; i < 3000; ++i) ++picks[c.pick({.route_key = "k"})];
  EXPECT_EQ(picks.count(eps[2].get()), 0u);
  for (std::size_t i : {0u, 1u, 3u}) {
    EXPECT_GT(picks[eps[i].get()], 700) << i;  // ~1000 each
    EXPECT_LT(picks[eps[i].get()], 1300) << i;
  }
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
