// The canary's state on its own clock: how its share climbs through the steps while every gate
// holds, how each gate rolls it back (and what it says), that no verdict is given on too few
// requests, and how conversations keep their side.
#include "hooks/govern/canary.hpp"

#include "parsers/request_inspector.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace tokentap::hooks {
namespace {

using namespace std::chrono_literals;
using steady = canary_state::steady;
using phase = canary_state::phase;

config::config with_canary(config::canary_config k) {
  config::config cfg;
  config::upstream_config stable, next;
  stable.name = "stable";
  next.name = "next";
  cfg.upstreams = {stable, next};
  cfg.routes = {{"chat", "/v1/", "stable", 0}};
  k.route = "chat";
  k.upstream = "next";
  k.upstream_index = 1;
  cfg.canary = {k};
  return cfg;
}

canary_state::outcome ok(double ttft_ms = 100) {
  return {.error = false, .truncated = false, .ttft_ms = ttft_ms};
}

// `n` exchanges on each side.
void feed(canary_state& s, int n, canary_state::outcome base, canary_state::outcome can,
          steady::time_point at) {
  auto& c = *s.of_route("chat");
  for (int i = 0; i < n; ++i) {
    s.record(c, false, base, at);
    s.record(c, true, can, at);
  }
}

TEST(Canary, ClimbsThroughItsStepsWhileEveryGateHolds) {
  const auto t0 = steady::now();
  auto cfg = with_canary({.steps = {10, 50, 100}, .interval = 10s, .min_requests = 20});
  canary_state s(cfg, t0);
  auto& c = *s.of_route("chat");
  EXPECT_EQ(s.of_route("other"), nullptr);
  EXPECT_EQ(s.weight(c), 10);
  EXPECT_EQ(s.baseline_of(c), "stable");
  // The interval passes with too few canary requests: the step waits for its sample.
  feed(s, 19, ok(), ok(), t0 + 1s);
  s.evaluate(c, t0 + 11s);
  EXPECT_EQ(s.step_of(c), 0u);
  s.record(c, true, ok(), t0 + 12s);  // 20 a side, interval over: the next step
  s.record(c, false, ok(), t0 + 12s);
  s.evaluate(c, t0 + 13s);
  EXPECT_EQ(s.step_of(c), 1u);
  EXPECT_EQ(s.weight(c), 50);
  EXPECT_EQ(s.phase_of(c), phase::progressing);
  // A new step measures afresh: the interval passing without requests does not pass it.
  s.evaluate(c, t0 + 30s);
  EXPECT_EQ(s.step_of(c), 1u);
  feed(s, 20, ok(), ok(110), t0 + 31s);  // (within the TTFT ratio)
  s.evaluate(c, t0 + 32s);
  EXPECT_EQ(s.phase_of(c), phase::promoted);
  EXPECT_EQ(s.weight(c), 100);
  for (std::uint64_t root : {0ull, 1ull, 42ull, 9999ull}) EXPECT_TRUE(s.assign(c, root, t0 + 33s));
  std::string json;
  {
    base::json::writer w(json);
    s.write_json(w, t0 + 33s);
  }
  EXPECT_NE(json.find(R"("route":"chat","upstream":"next","baseline":"stable","phase":"promoted")"),
            std::string::npos)
      << json;
  for (std::size_t r = 0; r < static_cast<std::size_t>(canary_reason::count_); ++r)
    EXPECT_EQ(s.rollbacks(static_cast<canary_reason>(r)), 0u);
}

struct breach_case {
  const char* name;
  canary_reason reason;
  canary_state::outcome base, can;
  double base_itl, can_itl;
  const char* evidence;
};

class CanaryGate : public ::testing::TestWithParam<breach_case> {};

TEST_P(CanaryGate, ABreachRollsBackAtOnceAndSaysWhy) {
  const auto& p = GetParam();
  const auto t0 = steady::now();
  auto cfg = with_canary({.steps = {25, 100}, .interval = 600s, .min_requests = 50});
  canary_state s(cfg, t0);
  auto& c = *s.of_route("chat");
  // A conversation placed on the canary before the breach.
  std::uint64_t on_canary = 0;
  for (std::uint64_t root = 1; on_canary == 0; ++root)
    if (s.assign(c, root, t0)) on_canary = root;
  for (int i = 0; i < 100; ++i) {
    s.record(c, false, i < 2 ? p.base : ok(), t0 + 1s);
    s.record(c, true, i < 10 ? p.can : ok(), t0 + 1s);
  }
  const std::vector<double> base_gaps(200, p.base_itl), can_gaps(200, p.can_itl);
  s.add_itl(c, false, base_gaps);
  s.add_itl(c, true, can_gaps);
  s.evaluate(c, t0 + 2s);  // long before the interval ends
  EXPECT_EQ(s.phase_of(c), phase::rolled_back);
  EXPECT_EQ(s.weight(c), 0);
  EXPECT_EQ(s.rollbacks(p.reason), 1u);
  EXPECT_FALSE(s.assign(c, on_canary, t0 + 3s));  // every request to the baseline
  EXPECT_FALSE(s.assign(c, 0, t0 + 3s));
  std::string json;
  {
    base::json::writer w(json);
    s.write_json(w, t0 + 3s);
  }
  EXPECT_NE(json.find(std::string(R"("phase":"rolled_back")")), std::string::npos) << json;
  EXPECT_NE(json.find("\"reason\":\"" + std::string(to_string(p.reason)) + "\""), std::string::npos)
      << json;
  EXPECT_NE(json.find(p.evidence), std::string::npos) << json;
  // Rolled back stays rolled back, however good the canary looks afterwards.
  feed(s, 100, ok(), ok(), t0 + 700s);
  s.evaluate(c, t0 + 701s);
  EXPECT_EQ(s.weight(c), 0);
}

const canary_state::outcome error{.error = true, .truncated = false, .ttft_ms = -1};
const canary_state::outcome truncated{.error = false, .truncated = true, .ttft_ms = 100};

INSTANTIATE_TEST_SUITE_P(
    Gates, CanaryGate,
    ::testing::Values(
        // 10 % errors against 2 %: 8 points more than allowed 0.5.
        breach_case{"error_rate", canary_reason::error_rate, error, error, 20, 20,
                    "error rate 10.00 % against the baseline's 2.00 %"},
        breach_case{"truncated", canary_reason::truncated, truncated, truncated, 20, 20,
                    "truncated streams 10.00 % against the baseline's 2.00 %"},
        // TTFT: 10 slow canary answers out of 100 put its P99 at 400 ms against 100.
        breach_case{"ttft", canary_reason::ttft, ok(), ok(400), 20, 20, "TTFT P99"},
        breach_case{"itl", canary_reason::itl, ok(), ok(), 20, 45, "inter-token P99"}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(Canary, NoVerdictOnTooFewRequestsHoweverBadTheyLook) {
  const auto t0 = steady::now();
  auto cfg = with_canary({.steps = {50, 100}, .interval = 1s, .min_requests = 20});
  canary_state s(cfg, t0);
  auto& c = *s.of_route("chat");
  feed(s, 19, ok(), error, t0 + 1s);
  for (int i = 0; i < 100; ++i) s.record(c, false, ok(), t0 + 2s);
  s.evaluate(c, t0 + 5s);
  EXPECT_EQ(s.phase_of(c), phase::progressing);
  EXPECT_EQ(s.weight(c), 50);
  s.record(c, true, error, t0 + 6s);  // the 20th: now it is judged
  s.evaluate(c, t0 + 7s);
  EXPECT_EQ(s.phase_of(c), phase::rolled_back);
  EXPECT_EQ(s.rollbacks(canary_reason::error_rate), 1u);
}

TEST(Canary, ALastStepBelowAllTrafficHoldsItsShareAndStaysGated) {
  const auto t0 = steady::now();
  auto cfg = with_canary({.steps = {20}, .interval = 5s, .min_requests = 10});
  canary_state s(cfg, t0);
  auto& c = *s.of_route("chat");
  feed(s, 10, ok(), ok(), t0 + 1s);
  s.evaluate(c, t0 + 6s);
  EXPECT_EQ(s.phase_of(c), phase::holding);
  EXPECT_EQ(s.weight(c), 20);
  feed(s, 10, ok(), ok(900), t0 + 7s);
  s.evaluate(c, t0 + 8s);
  EXPECT_EQ(s.phase_of(c), phase::rolled_back);
  EXPECT_EQ(s.rollbacks(canary_reason::ttft), 1u);
}

TEST(Canary, ConversationsKeepTheirSideAsTheShareGrows) {
  const auto t0 = steady::now();
  auto cfg = with_canary({.steps = {10, 50, 100}, .interval = 1s, .min_requests = 1});
  canary_state s(cfg, t0);
  auto& c = *s.of_route("chat");
  // New conversations split by the share (10 %, ± 4 standard deviations).
  std::vector<bool> side(4000);
  int on_canary = 0;
  for (std::uint64_t r = 0; r < side.size(); ++r) on_canary += side[r] = s.assign(c, r + 1, t0);
  EXPECT_NEAR(on_canary, 400, 4 * 19);
  feed(s, 1, ok(), ok(), t0 + 1s);
  s.evaluate(c, t0 + 2s);
  ASSERT_EQ(s.weight(c), 50);
  // Every one of them stays where it was; new ones split 50/50.
  for (std::uint64_t r = 0; r < side.size(); ++r)
    ASSERT_EQ(s.assign(c, r + 1, t0 + 2s), side[r]) << r;
  int new_on_canary = 0;
  for (std::uint64_t r = 0; r < 4000; ++r) new_on_canary += s.assign(c, 100000 + r, t0 + 2s);
  EXPECT_NEAR(new_on_canary, 2000, 4 * 32);
  // Requests without a conversation are drawn at the share too.
  int drawn = 0;
  for (int i = 0; i < 4000; ++i) drawn += s.assign(c, 0, t0 + 2s);
  EXPECT_NEAR(drawn, 2000, 4 * 32);
}

TEST(Canary, TheMemoryOfSidesIsBoundedAndForgetsTheOldestFirst) {
  const auto t0 = steady::now();
  auto cfg =
      with_canary({.steps = {10, 90}, .interval = 1s, .min_requests = 1, .max_conversations = 100});
  canary_state s(cfg, t0);
  auto& c = *s.of_route("chat");
  // Conversations placed on the baseline at 10 % that a 90 % share would place on the canary.
  std::vector<std::uint64_t> kept;
  for (std::uint64_t r = 1; kept.size() < 10; ++r)
    if (!s.assign(c, r, t0) && parsers::mix64(r) % 10000 < 9000) kept.push_back(r);
  feed(s, 1, ok(), ok(), t0 + 1s);
  s.evaluate(c, t0 + 2s);
  ASSERT_EQ(s.weight(c), 90);
  // Still remembered: on the baseline.  (Asking again keeps them recent.)
  for (auto r : kept) EXPECT_FALSE(s.assign(c, r, t0 + 2s)) << r;
  // 200 other conversations later, they are forgotten, and placed again by the new share.
  for (std::uint64_t r = 0; r < 200; ++r) s.assign(c, 1000000 + r, t0 + 2s);
  for (auto r : kept) EXPECT_TRUE(s.assign(c, r, t0 + 2s)) << r;
}

}  // namespace
}  // namespace tokentap::hooks
