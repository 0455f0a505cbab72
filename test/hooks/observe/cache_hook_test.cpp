#include "hooks/observe/cache_hook.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>
#include <random>
#include <vector>

namespace tokentap::hooks {
namespace {

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
  config::cache_config cfg;
  prefix_tracker t(cfg);
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
  config::cache_config cfg;
  prefix_tracker t(cfg);
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
  config::config cfg;
  cache_hook_factory f(cfg);
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

}  // namespace
}  // namespace tokentap::hooks
