// The prefix policy: conversations go back to the endpoint that served their longest prefix,
// new ones spread by load and footprint (or by a rendezvous hash every instance agrees on),
// affinity gives way at the load bounds, a reported miss retires what the endpoint held, and
// the index stays within its capacity.  Conversations are real request bodies read by the
// request inspector, as the proxy reads them.
#include "proxy/prefix_balancer.hpp"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "base/clock.hpp"
#include "parsers/request_inspector.hpp"

namespace tokentap::proxy {
namespace {

config::upstream_config prefix_upstream(int endpoints, config::prefix_config p = {}) {
  config::upstream_config up;
  up.name = "fleet";
  up.balance = "prefix";
  up.prefix = p;
  for (int i = 0; i < endpoints; ++i) {
    std::string err;
    auto u = config::parse_url("http://10.0.0." + std::to_string(i + 1) + ":8000", err);
    up.endpoints.push_back(*u);
  }
  return up;
}

// A chat request's conversation: a system prompt, then user/assistant turns.
std::vector<parsers::message_digest> conversation(const std::string& system,
                                                  const std::vector<std::string>& turns) {
  std::string body = R"({"model":"m","messages":[{"role":"system","content":")" + system + "\"}";
  for (std::size_t i = 0; i < turns.size(); ++i)
    body += std::string(R"(,{"role":")") + (i % 2 == 0 ? "user" : "assistant") +
            R"(","content":")" + turns[i] + "\"}";
  body += "]}";
  parsers::request_inspector inspector;
  auto info = inspector.inspect(body, {.digests = true});
  EXPECT_TRUE(info.error.empty()) << info.error;
  return std::move(info.digests);
}

struct fleet {
  explicit fleet(int n, config::prefix_config p = {})
      : up(prefix_upstream(n, p)), c(up, 0, nullptr) {}
  pick_result choose(const std::vector<parsers::message_digest>& conv) {
    return c.choose({.route_key = {}, .conversation = conv, .tried = {}});
  }
  endpoint& at(std::size_t i) { return *c.endpoints()[i]; }
  config::upstream_config up;
  cluster c;
};

TEST(PrefixBalancer, TheNextTurnGoesToTheEndpointThatServedTheConversation) {
  fleet f(4);
  const auto first = conversation("You are terse.", {"What is a KV cache?"});
  const auto second =
      conversation("You are terse.", {"What is a KV cache?", "Attention state.", "And paging?"});
  const auto d = f.choose(first);
  ASSERT_NE(d.chosen, nullptr);
  EXPECT_EQ(d.reason, routing_reason::least_request);  // new: placed by load
  f.c.served(*d.chosen, first);
  // Every other endpoint gets busier than the chosen one: affinity, not load, decides.
  for (int i = 0; i < 20; ++i) {
    const auto next = f.choose(second);
    EXPECT_EQ(next.chosen, d.chosen);
    EXPECT_EQ(next.reason, routing_reason::prefix_match);
    EXPECT_EQ(next.matched_messages, 2u);  // system + first user message
  }
  // Another conversation with the same system prompt is a new one: a shared system prompt does
  // not bind conversations to one endpoint.
  const auto other = conversation("You are terse.", {"Something else"});
  const auto o = f.choose(other);
  EXPECT_EQ(o.reason, routing_reason::least_request);
  EXPECT_NE(o.chosen, d.chosen);  // the others hold nothing yet
}

TEST(PrefixBalancer, NewConversationsSpreadByLoadThenFootprint) {
  fleet f(4);
  std::map<endpoint*, int> placed;
  for (int i = 0; i < 40; ++i) {
    const auto conv = conversation("system " + std::to_string(i), {"hello " + std::to_string(i)});
    const auto d = f.choose(conv);
    ASSERT_EQ(d.reason, routing_reason::least_request);
    f.c.served(*d.chosen, conv);  // nothing in flight: the smallest footprint decides
    ++placed[d.chosen];
  }
  ASSERT_EQ(placed.size(), 4u);
  for (auto& [e, n] : placed) EXPECT_EQ(n, 10) << e->label;
  // Streams in flight weigh first: a busy endpoint with the smallest footprint is passed over.
  const auto conv = conversation("one more", {"hi"});
  active_exchange busy(&f.at(0));
  for (int i = 0; i < 8; ++i) EXPECT_NE(f.choose(conv).chosen, &f.at(0));
}

// Many identical new conversations at once (a hot prefix): they spread over the replicas while
// none has been served; once one has, affinity holds until the load bound hands over.
TEST(PrefixBalancer, AHotPrefixSpreadsInsteadOfPilingOnOneEndpoint) {
  fleet f(4, {.max_imbalance = 1.5, .min_gap = 2});
  const auto conv = conversation("hot system prompt", {"the same question"});
  std::vector<std::unique_ptr<active_exchange>> in_flight;
  std::map<endpoint*, int> placed;
  for (int i = 0; i < 16; ++i) {
    const auto d = f.choose(conv);
    in_flight.push_back(std::make_unique<active_exchange>(d.chosen));
    ++placed[d.chosen];
  }
  for (auto& [e, n] : placed) EXPECT_EQ(n, 4) << e->label;
  in_flight.clear();
  f.c.served(f.at(1), conv);
  std::map<routing_reason, int> why;
  placed.clear();
  for (int i = 0; i < 40; ++i) {
    const auto d = f.choose(conv);
    in_flight.push_back(std::make_unique<active_exchange>(d.chosen));
    ++placed[d.chosen];
    ++why[d.reason];
  }
  EXPECT_GT(why[routing_reason::prefix_match], 0);
  EXPECT_GT(why[routing_reason::load_bound], 0);
  // The matched endpoint stays within the bound: at most min_gap more than the least busy, or
  // max_imbalance times as many.
  const auto max_other =
      std::max({f.at(0).active.load(), f.at(2).active.load(), f.at(3).active.load()});
  const auto min_other =
      std::min({f.at(0).active.load(), f.at(2).active.load(), f.at(3).active.load()});
  EXPECT_LE(f.at(1).active.load(), std::max<double>(min_other + 2 + 1, min_other * 1.5 + 1));
  EXPECT_GT(max_other, 0u);
}

TEST(PrefixBalancer, WithoutLoadBoundsAffinityPilesOn) {
  fleet f(4, {.load_bounds = false});
  const auto conv = conversation("hot system prompt", {"the same question"});
  f.c.served(f.at(2), conv);
  std::vector<std::unique_ptr<active_exchange>> in_flight;
  for (int i = 0; i < 40; ++i) {
    const auto d = f.choose(conv);
    EXPECT_EQ(d.chosen, &f.at(2));
    in_flight.push_back(std::make_unique<active_exchange>(d.chosen));
  }
  EXPECT_EQ(f.at(2).active.load(), 40u);
}

TEST(PrefixBalancer, AnEjectedEndpointsPrefixesDoNotMatch) {
  fleet f(3);
  const auto conv = conversation("sys", {"q1"});
  f.c.served(f.at(0), conv);
  f.at(0).ejected_until_ns = base::mono_now_ns() + 60'000'000'000;
  const auto d = f.choose(conv);
  EXPECT_NE(d.chosen, &f.at(0));
  EXPECT_EQ(d.reason, routing_reason::least_request);
}

TEST(PrefixBalancer, ARetryTakesTheLeastBusyEndpointNotTried) {
  fleet f(3);
  const auto conv = conversation("sys", {"q1"});
  f.c.served(f.at(0), conv);
  active_exchange busy(&f.at(1));
  endpoint* tried[] = {&f.at(0)};
  const auto d = f.c.choose({.route_key = {}, .conversation = conv, .tried = tried});
  EXPECT_EQ(d.chosen, &f.at(2));
  EXPECT_EQ(d.reason, routing_reason::least_request);
}

// A reported miss on a matched prefix: the endpoint no longer holds what it served until then —
// that conversation and older ones are placed anew, younger ones still match; what it serves
// from now on matches again.
TEST(PrefixBalancer, AReportedMissRetiresWhatTheEndpointServedUntilThen) {
  fleet f(3);
  const auto older = conversation("sys A", {"q"});
  const auto missed = conversation("sys B", {"q"});
  const auto younger = conversation("sys C", {"q"});
  f.c.served(f.at(1), older);
  f.c.served(f.at(1), missed);
  f.c.served(f.at(1), younger);
  const auto d = f.choose(missed);
  ASSERT_EQ(d.reason, routing_reason::prefix_match);
  ASSERT_EQ(d.chosen, &f.at(1));
  f.c.cache_report(f.at(1), d, 1000, 0);
  EXPECT_EQ(f.choose(missed).reason, routing_reason::least_request);
  EXPECT_EQ(f.choose(older).reason, routing_reason::least_request);
  const auto y = f.choose(younger);
  EXPECT_EQ(y.reason, routing_reason::prefix_match);
  EXPECT_EQ(y.chosen, &f.at(1));
  // The hit ratio counts what it reported.
  EXPECT_EQ(f.at(1).prompt_tokens.load(), 1000u);
  EXPECT_EQ(f.at(1).cached_tokens.load(), 0u);
  f.c.cache_report(f.at(1), y, 1000, 900);
  EXPECT_EQ(f.at(1).cached_tokens.load(), 900u);
  EXPECT_EQ(f.choose(younger).chosen, &f.at(1));  // a hit changes nothing
  // Served again: it holds it again.
  f.c.served(f.at(1), missed);
  EXPECT_EQ(f.choose(missed).reason, routing_reason::prefix_match);
}

// `new: hash`: two independent balancers (two tokentap processes) with the same endpoints place
// every new conversation alike, and spread many roots evenly; a turn of a conversation goes
// where its root went.
TEST(PrefixBalancer, HashPlacementAgreesAcrossInstancesAndSpreads) {
  const config::prefix_config p{.new_conversations = config::prefix_config::placement::hash};
  fleet one(4, p), two(4, p);
  std::map<std::string, int> per_endpoint;
  for (int i = 0; i < 2000; ++i) {
    const auto conv = conversation("tenant system " + std::to_string(i), {"first question"});
    const auto a = one.choose(conv);
    const auto b = two.choose(conv);
    ASSERT_EQ(a.reason, routing_reason::hash);
    ASSERT_EQ(a.chosen->label, b.chosen->label);
    ++per_endpoint[a.chosen->label];
    // A later turn (never served here) hashes by the same root.
    const auto later = conversation("tenant system " + std::to_string(i),
                                    {"first question", "an answer", "a follow-up"});
    ASSERT_EQ(one.choose(later).chosen, a.chosen);
  }
  ASSERT_EQ(per_endpoint.size(), 4u);
  for (auto& [label, n] : per_endpoint) {
    EXPECT_GT(n, 400) << label;
    EXPECT_LT(n, 600) << label;
  }
  // An endpoint ejected: only its conversations move.
  one.at(3).ejected_until_ns = base::mono_now_ns() + 60'000'000'000;
  int moved = 0;
  for (int i = 0; i < 400; ++i) {
    const auto conv = conversation("tenant system " + std::to_string(i), {"first question"});
    const auto before = two.choose(conv).chosen->index;
    const auto after = one.choose(conv).chosen->index;
    if (before != 3) {
      EXPECT_EQ(after, before);
    }
    moved += before != after;
  }
  EXPECT_GT(moved, 50);
}

TEST(PrefixIndex, StaysWithinItsCapacityAndKeepsFootprintsExact) {
  prefix_index index(1024, 2);
  EXPECT_GE(index.capacity(), 1024u);
  EXPECT_LT(index.capacity(), 2048u);
  std::vector<parsers::message_digest> one(1);
  std::uint64_t total = 0;
  for (std::uint64_t k = 1; k <= 20000; ++k) {
    one[0].chain = k * 0x9e3779b97f4a7c15ull;
    one[0].chars = 10;
    index.insert(one, static_cast<std::uint32_t>(k % 2), static_cast<std::int64_t>(k));
  }
  total = index.footprint(0) + index.footprint(1);
  EXPECT_EQ(total, index.capacity() * 10);  // every slot full, each counted once
  // The most recent prefixes are kept, the oldest pushed out.
  one[0].chain = 20000 * 0x9e3779b97f4a7c15ull;
  EXPECT_TRUE(index.longest(one, 0, [](std::uint32_t, std::int64_t) { return true; }));
  one[0].chain = 1 * 0x9e3779b97f4a7c15ull;
  EXPECT_FALSE(index.longest(one, 0, [](std::uint32_t, std::int64_t) { return true; }));
  // Re-serving a prefix on another endpoint moves its bytes.
  one[0].chain = 20000 * 0x9e3779b97f4a7c15ull;
  const auto before0 = index.footprint(0);
  index.insert(one, 1, 20001);
  EXPECT_EQ(index.footprint(0), before0 - 10);
  EXPECT_EQ(index.footprint(0) + index.footprint(1), total);
}

}  // namespace
}  // namespace tokentap::proxy
