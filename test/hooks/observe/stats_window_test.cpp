// One second of a stats window (stats_window.hpp): merging seconds into a window adds every
// count, the cache events by name and the TTFT phase sums, and merges the sketches, so a
// window's quantiles are those of all its requests.
#include "hooks/observe/stats_window.hpp"

#include <gtest/gtest.h>

namespace tokentap::hooks {
namespace {

slot second_with(std::uint64_t requests, double ttft_ms, const char* cache_event) {
  slot s;
  s.requests = requests;
  s.errors = 1;
  s.output_tokens = 10 * requests;
  s.cache_hits = 1;
  s.cache_known = 2;
  s.cache_input_tokens = 100;
  s.cached_tokens = 40;
  s.steps = 3;
  for (std::uint64_t i = 0; i < requests; ++i) s.ttft.add(ttft_ms);
  s.cache_events[cache_event] = 1;
  s.ttft_phase_ms[0] = 2.5;
  s.ttft_phase_n = requests;
  s.engine_queue_n = 1;
  return s;
}

TEST(StatsWindow, MergingSecondsAddsTheirCountsAndMergesTheirSketches) {
  slot window;
  window.merge(second_with(3, 100, "hit"));
  window.merge(second_with(1, 900, "miss_system_prompt_changed"));
  window.merge(second_with(1, 900, "hit"));
  EXPECT_EQ(window.requests, 5u);
  EXPECT_EQ(window.errors, 3u);
  EXPECT_EQ(window.output_tokens, 50u);
  EXPECT_EQ(window.cache_hits, 3u);
  EXPECT_EQ(window.cache_known, 6u);
  EXPECT_EQ(window.cache_input_tokens, 300u);
  EXPECT_EQ(window.cached_tokens, 120u);
  EXPECT_EQ(window.steps, 9u);
  EXPECT_EQ(window.cache_events.at("hit"), 2u);
  EXPECT_EQ(window.cache_events.at("miss_system_prompt_changed"), 1u);
  EXPECT_DOUBLE_EQ(window.ttft_phase_ms[0], 7.5);
  EXPECT_EQ(window.ttft_phase_n, 5u);
  EXPECT_EQ(window.engine_queue_n, 3u);
  // The window's TTFT quantiles are over all five requests: three at 100 ms, two at 900 ms.
  EXPECT_EQ(window.ttft.count(), 5u);
  EXPECT_NEAR(window.ttft.quantile(0.5), 100, 100 * quantile_sketch::relative_error);
  EXPECT_NEAR(window.ttft.quantile(0.99), 900, 900 * quantile_sketch::relative_error);
}

}  // namespace
}  // namespace tokentap::hooks
