#include "hooks/observe/cache_hook.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>
#include <random>
#include <vector>

#include "config/config.hpp"

namespace tokentap::hooks {
namespace {

cache_settings read_cache(const std::string& yaml) {
  return cache_settings::parse(config::parse_config(yaml, false).hook_section("cache"));
}

std::string cache_error(const std::string& yaml) {
  try {
    read_cache(yaml);
  } catch (const config::config_error& e) {
    return e.what();
  }
  return "";
}

TEST(CacheHook, ItsSectionSetsEveryKnob) {
  const auto c = read_cache(
      "cache:\n  max_prefixes: 10\n  max_conversations: 11\n  ttl_s: 20\n"
      "  min_prefix_tokens: 256\n  prefill_factor: 2.5\n  prefill_min_samples: 7\n"
      "  repeated_miss_count: 4\n  repeated_miss_window_s: 60\n  truncation_fraction: 0.8\n"
      "  context_windows: {sim-chat: 2500, big: 128000}\n");
  EXPECT_EQ(c.max_prefixes, 10u);
  EXPECT_EQ(c.max_conversations, 11u);
  EXPECT_EQ(c.ttl, std::chrono::seconds(20));
  EXPECT_EQ(c.min_prefix_tokens, 256u);
  EXPECT_DOUBLE_EQ(c.prefill_factor, 2.5);
  EXPECT_EQ(c.prefill_min_samples, 7u);
  EXPECT_EQ(c.repeated_miss_count, 4u);
  EXPECT_EQ(c.repeated_miss_window, std::chrono::seconds(60));
  EXPECT_DOUBLE_EQ(c.truncation_fraction, 0.8);
  using window = std::pair<std::string, std::size_t>;
  EXPECT_EQ(c.context_windows, (std::vector<window>{{"sim-chat", 2500}, {"big", 128000}}));
  const auto defaults = read_cache("{}");
  EXPECT_EQ(defaults.ttl, std::chrono::seconds(300));
  EXPECT_EQ(defaults.min_prefix_tokens, 1024u);
  EXPECT_TRUE(defaults.context_windows.empty());
}

TEST(CacheHook, ABadSectionIsRefusedAtItsLine) {
  EXPECT_EQ(cache_error("cache:\n  ttl: 20\n"), "line 2: unknown key 'ttl' in cache");
  EXPECT_EQ(cache_error("cache:\n  ttl_s: -1\n"), "line 2: 'ttl_s' must not be negative");
  EXPECT_EQ(cache_error("cache:\n  prefill_factor: fast\n"),
            "line 2: invalid value for 'prefill_factor'");
  EXPECT_EQ(cache_error("cache:\n  context_windows: [a]\n"),
            "line 2: cache.context_windows must map model -> tokens");
  EXPECT_EQ(cache_error("cache:\n  context_windows: {m: lots}\n"),
            "line 2: invalid value for 'context_windows'");
  EXPECT_EQ(cache_error("cache: [1]\n"), "line 1: cache must be a mapping");
}

// The rolling median the plain way, as the oracle: the window copied, the element at size / 2
// selected.
struct reference_window {
  std::deque<double> q;
  std::pair<double, std::size_t> sample(double ms) {
    std::pair<double, std::size_t> before{0, q.size()};
    if (!q.empty()) {
      std::vector<double> v(q.begin(), q.end());
      std::nth_element(v.begin(), v.begin() + static_cast<long>(v.size() / 2), v.end());
      before.first = v[v.size() / 2];
    }
    q.push_back(ms);
    if (q.size() > 200) q.pop_front();
    return before;
  }
};

// prefill_sample keeps each model's window sorted as samples come and go: the medians and counts
// it returns are the ones selecting from a copy gave, sample by sample — through the window
// filling, sliding past 200, with repeated values (exact duplicates leave one copy each), and for
// two models side by side.
TEST(PrefixTracker, RollingPrefillMedianIsTheSelectedOne) {
  prefix_tracker t(cache_settings{});
  std::mt19937_64 rng(26);
  std::uniform_real_distribution<double> d(0.01, 5.0);
  std::uniform_int_distribution<int> few(0, 9);
  reference_window a, b;
  for (int i = 0; i < 1500; ++i) {
    // Every third sample from a small set of values: duplicates in the window.
    const double x = i % 3 == 0 ? 0.5 * few(rng) : d(rng);
    const double y = d(rng) * 10;
    ASSERT_EQ(t.prefill_sample(1, x), a.sample(x)) << "sample " << i;
    ASSERT_EQ(t.prefill_sample(2, y), b.sample(y)) << "sample " << i;
  }
  EXPECT_EQ(t.prefill_sample(1, 1.0).second, 200u);
  EXPECT_EQ(t.prefill_sample(3, 1.0), (std::pair<double, std::size_t>{0.0, 0}));  // a new model
}

// A sample that is not a number (no TTFT to divide) does not enter the window.
TEST(PrefixTracker, NonFiniteSamplesStayOut) {
  prefix_tracker t(cache_settings{});
  t.prefill_sample(1, 2.0);
  t.prefill_sample(1, std::numeric_limits<double>::quiet_NaN());
  t.prefill_sample(1, std::numeric_limits<double>::infinity());
  EXPECT_EQ(t.prefill_sample(1, 3.0), (std::pair<double, std::size_t>{2.0, 1}));
  EXPECT_EQ(t.prefill_sample(1, 1.0), (std::pair<double, std::size_t>{3.0, 2}));
}

// A conversation as the inspector digests it: element i's own hash, and a chain over the
// elements up to it (here simply their hashes folded in order).
std::vector<parsers::message_digest> conversation(
    std::vector<std::pair<std::string_view, std::uint64_t>> elements) {
  std::vector<parsers::message_digest> out;
  std::uint64_t chain = 0, chars = 0;
  for (const auto& [role, hash] : elements) {
    chain = chain * 1000003 + hash;
    out.push_back({hash, chain, 400, chars, role});
    chars += 400;
  }
  return out;
}

std::vector<std::string> events_of(cache_hook_factory& f,
                                   const std::vector<parsers::message_digest>& conv,
                                   std::int64_t input, std::int64_t cached) {
  auto h = f.create();
  request_view r;
  r.route = "default";
  r.model = "m";
  r.conversation = conv;
  h->on_request(r);
  stream_info s;
  s.usage.input_tokens = input;
  s.usage.cached_input_tokens = cached;
  s.usage.cache_fields = true;
  s.upstream.attempts.push_back({"up", "127.0.0.1:1", "", "least_request", 0});
  h->fill(s);
  std::vector<std::string> out;
  for (const auto& [event, evidence] : s.cache_events) out.push_back(evidence);
  return out;
}

bool any_is(const std::vector<std::string>& events, std::string_view event) {
  return std::any_of(events.begin(), events.end(), [&](const std::string& e) {
    return e.find("\"event\":\"" + std::string(event) + "\"") != std::string::npos;
  });
}

// A changed system prompt is a divergence, with the provider's count beside the estimate; but
// not when the provider reports the whole prompt cached: the comparison, not the cache, is off.
TEST(CacheHook, AWholePromptCachedIsNeverExplainedAsADivergence) {
  cache_hook_factory f;
  const auto first = conversation({{"system", 1}, {"user", 2}, {"assistant", 3}, {"user", 4}});
  const auto changed = conversation(
      {{"system", 9}, {"user", 2}, {"assistant", 3}, {"user", 4}, {"assistant", 5}, {"user", 6}});
  events_of(f, first, 400, 0);
  const auto partly = events_of(f, changed, 600, 300);
  ASSERT_TRUE(any_is(partly, "prefix_divergence"));
  for (const auto& e : partly) {
    if (e.find("prefix_divergence") != std::string::npos) {
      EXPECT_NE(
          e.find(
              R"("shared_tokens_est":0,"cached_tokens":300,"input_tokens":600,"within_message":true)"),
          std::string::npos)
          << e;
    }
  }
  events_of(f, first, 400, 0);  // the tracker remembers the first form again
  const auto whole = events_of(f, changed, 600, 599);
  EXPECT_FALSE(any_is(whole, "prefix_divergence"));
  EXPECT_TRUE(any_is(whole, "hit"));
}

// Requests sent together with a new prefix: none could have found it cached, whichever ends
// first — the one that ends last is no `unexpected_miss`.  A request sent after one of them had
// its first token (the prefix prefilled) is compared with it.
TEST(PrefixTracker, APrefixCountsOnlyFromWhenItWasPrefilled) {
  cache_settings cfg;
  prefix_tracker t(cfg);
  const auto conv = conversation({{"system", 1}, {"user", 2}});
  const auto t0 = prefix_tracker::clock::now();
  const auto ms = [&](int n) { return t0 + std::chrono::milliseconds(n); };
  // B (sent at 1 ms, first token at 20) ends before A (sent at 0).
  EXPECT_FALSE(t.observe(7, conv, ms(1), ms(20)).found);
  EXPECT_FALSE(t.observe(7, conv, ms(0), ms(30)).found);
  // C, sent at 25 ms: B's prompt was prefilled 5 ms before (and A's again at 30: live then).
  const auto c = t.observe(7, conv, ms(25), ms(40));
  EXPECT_TRUE(c.found);
  EXPECT_EQ(c.at_message, 2u);
  EXPECT_EQ(c.age_s, 0);
  // D, sent at 100 ms: last prefilled by C, 60 ms before.
  EXPECT_NEAR(t.observe(7, conv, ms(100), ms(120)).age_s, 0.060, 1e-9);
}

}  // namespace
}  // namespace tokentap::hooks
