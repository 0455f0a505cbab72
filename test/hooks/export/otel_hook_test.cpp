// W3C trace context as the otel hook reads and writes it (trace-context level 1, the cases of
// w3c/trace-context's test suite), and the sampling decision on a new trace's id.
#include "hooks/export/otel_hook.hpp"

#include <gtest/gtest.h>

#include <random>

namespace tokentap::hooks {
namespace {

TEST(TraceParent, ParsesVersion00AndRefusesWhatTheSpecRefuses) {
  const auto p = parse_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
  ASSERT_TRUE(p);
  EXPECT_EQ(to_hex(p->trace_id), "4bf92f3577b34da6a3ce929d0e0e4736");
  EXPECT_EQ(to_hex(p->parent_id), "00f067aa0ba902b7");
  EXPECT_TRUE(p->sampled());
  EXPECT_FALSE(
      parse_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00")->sampled());
  // Flags other than sampled are carried but mean nothing here.
  EXPECT_EQ(parse_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-09")->flags, 9);
  // A later version: its first four fields, more may follow after a '-'.
  EXPECT_TRUE(parse_traceparent("cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what"));
  EXPECT_TRUE(parse_traceparent("cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"));
  for (const char* bad : {
           "",
           "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-",      // 00: exactly 55
           "00-4BF92F3577B34DA6A3CE929D0E0E4736-00F067AA0BA902B7-01",       // uppercase
           "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",       // version ff
           "00-00000000000000000000000000000000-00f067aa0ba902b7-01",       // zero trace id
           "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",       // zero parent id
           "00-4bf92f3577b34da6a3ce929d0e0e473-600f067aa0ba902b7-01",       // misplaced dash
           "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0g",       // bad flags
           "0-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",        // short version
           "cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01.what",  // no dash after
           "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",          // no flags
       })
    EXPECT_FALSE(parse_traceparent(bad)) << bad;
}

TEST(TraceParent, FormatsWhatItParses) {
  const auto p = parse_traceparent("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01");
  ASSERT_TRUE(p);
  otel_span_id child{1, 2, 3, 4, 5, 6, 7, 8};
  EXPECT_EQ(format_traceparent(p->trace_id, child, 1),
            "00-0af7651916cd43dd8448eb211c80319c-0102030405060708-01");
  EXPECT_TRUE(parse_traceparent(format_traceparent(p->trace_id, child, 0)));
}

// A new trace is kept by its id, so every instance decides alike, at the configured rate.
TEST(TraceParent, NewTracesAreSampledAtTheRateByTheirId) {
  std::mt19937_64 rng(7);
  otel_trace_id id{};
  int kept = 0;
  constexpr int n = 20000;
  for (int i = 0; i < n; ++i) {
    for (auto& b : id) b = static_cast<std::uint8_t>(rng());
    const bool k = otel_hook_factory::keep(id, 0.25);
    EXPECT_EQ(k, otel_hook_factory::keep(id, 0.25));
    kept += k;
    EXPECT_TRUE(otel_hook_factory::keep(id, 1.0));
    EXPECT_FALSE(otel_hook_factory::keep(id, 0.0));
  }
  EXPECT_NEAR(kept, n / 4, n / 50);
}

}  // namespace
}  // namespace tokentap::hooks
