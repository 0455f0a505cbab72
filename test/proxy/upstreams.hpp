#pragma once
// Upstream configurations for the proxy's unit tests: a named upstream of the given endpoint
// URLs, its retries and its balancing policy.
#include <initializer_list>
#include <string>

#include <gtest/gtest.h>

#include "config/config.hpp"

namespace tokentap::test {

inline config::upstream_config upstream_of(std::string name,
                                           std::initializer_list<const char*> urls,
                                           unsigned retries, std::string policy = "round_robin") {
  config::upstream_config up;
  up.name = std::move(name);
  up.retries = retries;
  up.balance = policy;
  for (const auto* u : urls) {
    std::string err;
    auto parsed = config::parse_url(u, err);
    EXPECT_TRUE(parsed) << err;
    up.endpoints.push_back(*parsed);
  }
  return up;
}

}  // namespace tokentap::test
