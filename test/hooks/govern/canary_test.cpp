// The canary's state on its own clock: how its share climbs through the steps while every gate
// holds, how each gate rolls it back (and what it says), that no verdict is given on too few
// requests, and how conversations keep their side.
#include "hooks/govern/canary.hpp"

#include "parsers/request_inspector.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "hooks/registry.hpp"
#include "test/hooks/registry_check.hpp"

namespace tokentap::hooks {
namespace {

using namespace std::chrono_literals;
using steady = canary_state::steady;
using phase = canary_state::phase;

// Route "chat" on upstream "stable"; its canary upstream is "next".
config::config fleet() {
  config::config cfg;
  config::upstream_config stable, next;
  stable.name = "stable";
  next.name = "next";
  cfg.upstreams = {stable, next};
  cfg.routes = {{"chat", "/v1/", "stable", 0}};
  return cfg;
}

canary_settings one(canary_config k) {
  k.route = "chat";
  k.upstream = "next";
  return {{k}};
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
  canary_state s(one({.steps = {10, 50, 100}, .interval = 10s, .min_requests = 20}), fleet(), t0);
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
  canary_state s(one({.steps = {25, 100}, .interval = 600s, .min_requests = 50}), fleet(), t0);
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
  canary_state s(one({.steps = {50, 100}, .interval = 1s, .min_requests = 20}), fleet(), t0);
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
  canary_state s(one({.steps = {20}, .interval = 5s, .min_requests = 10}), fleet(), t0);
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
  canary_state s(one({.steps = {10, 50, 100}, .interval = 1s, .min_requests = 1}), fleet(), t0);
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
  canary_state s(
      one({.steps = {10, 90}, .interval = 1s, .min_requests = 1, .max_conversations = 100}),
      fleet(), t0);
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

// The section as a file writes it (DESIGN.md §11): every knob, the defaults, one canary as a
// mapping or a list of them, and what it refuses — naming the line.
using test::check_error;

TEST(Canary, ItsSectionSetsEveryKnobAndBringsItsHook) {
  const std::string base =
      "upstreams: {a: {url: http://h}, b: {url: http://k}}\n"
      "routes: [{name: local, prefix: /, upstream: a}]\n";
  auto cfg = config::parse_config(base +
                                  "canary: [{route: local, upstream: b, steps: [1, 10.5, 100], "
                                  "interval_s: 30, min_requests: 50, max_error_rate_delta: 0.01, "
                                  "max_ttft_p99_ratio: 1.5, max_itl_p99_ratio: 1.3, "
                                  "max_truncated_delta: 0.02, max_conversations: 500}]\n");
  const auto settings = canary_settings::parse(cfg.hook_section("canary"), cfg);
  ASSERT_EQ(settings.canaries.size(), 1u);
  const auto& k = settings.canaries[0];
  EXPECT_EQ(k.route, "local");
  EXPECT_EQ(k.upstream, "b");
  EXPECT_EQ(k.steps, (std::vector<double>{1, 10.5, 100}));
  EXPECT_EQ(k.interval.count(), 30);
  EXPECT_EQ(k.min_requests, 50u);
  EXPECT_DOUBLE_EQ(k.max_error_rate_delta, 0.01);
  EXPECT_DOUBLE_EQ(k.max_ttft_p99_ratio, 1.5);
  EXPECT_DOUBLE_EQ(k.max_itl_p99_ratio, 1.3);
  EXPECT_DOUBLE_EQ(k.max_truncated_delta, 0.02);
  EXPECT_EQ(k.max_conversations, 500u);
  // A canary brings its hook, after the listed ones; without one the hook stays out.
  EXPECT_EQ(builtin_hooks().order(cfg).back(), "canary");
  canary_state state(cfg);
  EXPECT_EQ(state.baseline_of(*state.of_route("local")), "a");
  const auto without = config::parse_config(base);
  const auto plain = builtin_hooks().order(without);
  EXPECT_EQ(std::find(plain.begin(), plain.end(), "canary"), plain.end());
  // The defaults, one canary as a mapping.
  const auto one_map = config::parse_config(base + "canary: {route: local, upstream: b}\n");
  const auto d = canary_settings::parse(one_map.hook_section("canary"), one_map).canaries.at(0);
  EXPECT_EQ(d.steps, (std::vector<double>{5, 25, 50, 100}));
  EXPECT_EQ(d.interval.count(), 60);
  EXPECT_EQ(d.min_requests, 100u);
  EXPECT_EQ(d.max_conversations, 100000u);
}

TEST(Canary, ABadSectionIsRefusedAtItsLine) {
  const std::string base =
      "upstreams: {a: {url: http://h}, b: {url: http://k}}\n"
      "routes: [{name: local, prefix: /, upstream: a}]\n";
  const std::pair<std::string, std::string> cases[] = {
      {"steps: [10, 5]", "line 3: canary.steps must be strictly increasing"},
      {"steps: [0, 5]", "line 3: canary.steps: each step must be above 0 and at most 100"},
      {"steps: [50, 150]", "line 3: canary.steps: each step must be above 0 and at most 100"},
      {"steps: []",
       "line 3: canary.steps must be a list of 1 to 100 percentages, e.g. [5, 25, 50, 100]"},
      {"max_ttft_p99_ratio: 0.5", "line 3: canary.max_ttft_p99_ratio must be from 1 to 1000"},
      {"max_error_rate_delta: 2", "line 3: canary.max_error_rate_delta must be from 0 to 1"},
      {"interval_s: 0", "line 3: canary.interval_s must be from 1 to 86400"},
      {"min_requests: 0", "line 3: canary.min_requests must be from 1 to 10000000"},
      {"max_conversations: 0", "line 3: canary.max_conversations must be from 1 to 10000000"},
      {"min_request: 5", "line 3: unknown key 'min_request' in a canary"},
  };
  for (const auto& [knob, error] : cases)
    EXPECT_EQ(check_error(base + "canary: {route: local, upstream: b, " + knob + "}\n"), error)
        << knob;
  EXPECT_EQ(check_error(base + "canary: {route: local}\n"),
            "line 3: a canary needs a route and an upstream");
  EXPECT_EQ(
      check_error(base +
                  "canary:\n  - {route: local, upstream: b}\n  - {route: local, upstream: b}\n"),
      "line 5: a second canary for route 'local'");
  EXPECT_EQ(check_error(base + "canary: {route: local, upstream: c}\n"),
            "line 3: canary of route 'local' names unknown upstream 'c'");
  EXPECT_EQ(check_error(base + "canary: {route: local, upstream: a}\n"),
            "line 3: canary of route 'local' is the route's own upstream 'a': name the new "
            "version's upstream");
  EXPECT_EQ(check_error(base + "canary: {route: remote, upstream: b}\n"),
            "line 3: canary names unknown route 'remote'");
}

}  // namespace
}  // namespace tokentap::hooks
