// Admission rules on their own clock: requests and tokens per minute as continuously refilled
// buckets, concurrency held until the exchange settles, token reservations settled from usage,
// a refusal by a later rule giving back what earlier rules took, bounded keys, priorities and
// shedding.
#include "hooks/govern/admission.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "base/json.hpp"
#include "config/config.hpp"
#include "hooks/registry.hpp"

namespace tokentap::hooks {
namespace {

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;
using rule = admission_rule;

// The hook's settings, and the proxy's configuration they are read with (two routes).
struct setup : admission_settings {
  config::config proxy;
};

setup with_rules(std::vector<rule> rules) {
  setup s;
  s.proxy.routes = {{"chat", "/v1/", "up", 0}, {"batch", "/batch/", "up", 0}};
  s.rules = std::move(rules);
  return s;
}

admission_state::facts request(std::string_view tenant, std::string_view route = "chat",
                               std::string_view model = "m", double estimate = 0,
                               std::int64_t max_tokens = -1, priority prio = priority::normal) {
  return {tenant, route, model, estimate, max_tokens, prio};
}

admission_state::facts with_priority(priority p) {
  return request("t", "chat", "m", 0, -1, p);
}

TEST(Admission, RequestsPerMinuteRefillContinuously) {
  const auto cfg = with_rules({{.name = "rpm", .requests_per_minute = 60}});
  admission_state s(cfg, cfg.proxy);
  const auto t0 = steady::now();
  admission_state::refusal r;
  for (int i = 0; i < 60; ++i) {
    admission_state::ticket t;
    ASSERT_TRUE(s.admit(request("a"), t, r, t0)) << i;
    s.settle(t, 10, t0);
  }
  admission_state::ticket t;
  ASSERT_FALSE(s.admit(request("a"), t, r, t0));
  EXPECT_EQ(r.reason, admission_reason::requests);
  EXPECT_EQ(r.status, 429u);
  EXPECT_EQ(r.retry_after_s, 1u);
  EXPECT_EQ(r.request_limit, 60u);
  EXPECT_EQ(r.requests_left, 0u);
  EXPECT_TRUE(t.holds.empty());
  EXPECT_EQ(s.rejections(0, admission_reason::requests), 1u);
  // Another tenant has its own minute; a second later this one has one request again.
  EXPECT_TRUE(s.admit(request("b"), t, r, t0));
  s.settle(t, 0, t0);
  EXPECT_TRUE(s.admit(request("a"), t, r, t0 + 1s));
  s.settle(t, 0, t0 + 1s);
  EXPECT_FALSE(s.admit(request("a"), t, r, t0 + 1s));
}

TEST(Admission, ConcurrencyIsHeldUntilTheExchangeSettles) {
  const auto cfg = with_rules({{.name = "two", .max_concurrent = 2}});
  admission_state s(cfg, cfg.proxy);
  const auto now = steady::now();
  admission_state::refusal r;
  admission_state::ticket a, b, c;
  ASSERT_TRUE(s.admit(request("t"), a, r, now));
  ASSERT_TRUE(s.admit(request("t"), b, r, now));
  ASSERT_FALSE(s.admit(request("t"), c, r, now));
  EXPECT_EQ(r.reason, admission_reason::concurrency);
  EXPECT_EQ(r.status, 429u);                      // a tenant's cap
  ASSERT_TRUE(s.admit(request("u"), c, r, now));  // another tenant
  s.settle(c, 0, now);
  s.settle(a, 0, now);
  EXPECT_TRUE(s.admit(request("t"), c, r, now));
  s.settle(b, 0, now);
  s.settle(c, 0, now);
}

TEST(Admission, ACapOnARouteIsCapacityAndAnswers503) {
  const auto cfg = with_rules({{.name = "fleet-cap",
                                .scope = rule::scope_kind::route,
                                .route = "chat",
                                .max_concurrent = 1}});
  admission_state s(cfg, cfg.proxy);
  const auto now = steady::now();
  admission_state::refusal r;
  admission_state::ticket a, b;
  ASSERT_TRUE(s.admit(request("t"), a, r, now));
  ASSERT_FALSE(s.admit(request("u"), b, r, now));
  EXPECT_EQ(r.status, 503u);
  // The rule names one route: the other is not limited.
  EXPECT_TRUE(s.admit(request("u", "batch"), b, r, now));
  s.settle(a, 0, now);
  s.settle(b, 0, now);
}

TEST(Admission, TokenBudgetsReserveAtAdmissionAndSettleFromUsage) {
  const auto cfg = with_rules({{.name = "tpm", .tokens_per_minute = 1000}});
  admission_state s(cfg, cfg.proxy);
  const auto now = steady::now();
  admission_state::refusal r;
  // 400 prompt characters (~100 tokens) + max_tokens 125: 225 reserved each.
  std::vector<admission_state::ticket> held(4);
  for (auto& t : held) ASSERT_TRUE(s.admit(request("t", "chat", "m", 100, 125), t, r, now));
  admission_state::ticket next;
  ASSERT_FALSE(s.admit(request("t", "chat", "m", 100, 125), next, r, now));
  EXPECT_EQ(r.reason, admission_reason::tokens);
  EXPECT_EQ(r.token_limit, 1000u);
  EXPECT_EQ(r.tokens_left, 100u);
  EXPECT_EQ(r.retry_after_s, 8u);  // 125 tokens more at 1000/min: 7.5 s
  // One stream used 25 of its 225: 200 come back, enough for one more.
  s.settle(held[0], 25, now);
  EXPECT_TRUE(s.admit(request("t", "chat", "m", 100, 125), next, r, now));
  // Without max_tokens the rule's assumed output budget is reserved.
  s.settle(next, 225, now);
  admission_state::ticket big;
  EXPECT_FALSE(s.admit(request("t", "chat", "m", 100), big, r, now));  // 100 + 1024 > what is left
}

TEST(Admission, AStreamThatOverrunsItsReservationRunsTheBudgetIntoDebt) {
  const auto cfg = with_rules({{.name = "tpm", .tokens_per_minute = 600}});
  admission_state s(cfg, cfg.proxy);
  const auto t0 = steady::now();
  admission_state::refusal r;
  admission_state::ticket t;
  ASSERT_TRUE(s.admit(request("t", "chat", "m", 0, 100), t, r, t0));
  s.settle(t, 1100, t0);  // used 1,100 of a 600-token minute: 500 in debt
  ASSERT_FALSE(s.admit(request("t", "chat", "m", 0, 100), t, r, t0 + 59s));
  EXPECT_TRUE(s.admit(request("t", "chat", "m", 0, 100), t, r, t0 + 61s));
}

TEST(Admission, ARefusalByALaterRuleGivesBackWhatEarlierRulesTook) {
  const auto cfg =
      with_rules({{.name = "per-tenant", .requests_per_minute = 2},
                  {.name = "global", .scope = rule::scope_kind::global, .max_concurrent = 1}});
  admission_state s(cfg, cfg.proxy);
  const auto now = steady::now();
  admission_state::refusal r;
  admission_state::ticket a, b;
  ASSERT_TRUE(s.admit(request("t"), a, r, now));
  ASSERT_FALSE(s.admit(request("t"), b, r, now));
  EXPECT_EQ(r.rule, "global");
  s.settle(a, 0, now);
  // The refused request's per-tenant request was given back: one is left.
  ASSERT_TRUE(s.admit(request("t"), b, r, now));
  s.settle(b, 0, now);
  EXPECT_FALSE(s.admit(request("t"), b, r, now));
  EXPECT_EQ(r.rule, "per-tenant");
}

TEST(Admission, KeysAreBoundedByTheConfiguration) {
  auto cfg =
      with_rules({{.name = "per-model", .scope = rule::scope_kind::model, .max_concurrent = 1}});
  cfg.proxy.metrics.max_models = 2;
  admission_state s(cfg, cfg.proxy);
  const auto now = steady::now();
  admission_state::refusal r;
  std::vector<admission_state::ticket> t(4);
  ASSERT_TRUE(s.admit(request("x", "chat", "m1"), t[0], r, now));
  ASSERT_TRUE(s.admit(request("x", "chat", "m2"), t[1], r, now));
  // Every further model shares one bucket ("other").
  ASSERT_TRUE(s.admit(request("x", "chat", "m3"), t[2], r, now));
  EXPECT_FALSE(s.admit(request("x", "chat", "m4"), t[3], r, now));
  for (auto& x : t) s.settle(x, 0, now);
}

TEST(Priorities, UnderAConcurrencyCapLowerPrioritiesAreRefusedFirst) {
  auto cfg =
      with_rules({{.name = "fleet-cap", .scope = rule::scope_kind::route, .max_concurrent = 10}});
  cfg.priority.enabled = true;
  cfg.priority.headroom = 0.2;  // low may use 8 of 10, normal 9, high all 10
  admission_state s(cfg, cfg.proxy);
  const auto now = steady::now();
  admission_state::refusal r;
  std::vector<admission_state::ticket> held(10);
  for (int i = 0; i < 8; ++i) ASSERT_TRUE(s.admit(with_priority(priority::low), held[i], r, now));
  admission_state::ticket t;
  EXPECT_FALSE(s.admit(with_priority(priority::low), t, r, now));
  EXPECT_EQ(r.status, 503);  // a route's cap is capacity
  EXPECT_EQ(r.reason, admission_reason::concurrency);
  ASSERT_TRUE(s.admit(with_priority(priority::normal), held[8], r, now));
  EXPECT_FALSE(s.admit(with_priority(priority::normal), t, r, now));
  ASSERT_TRUE(s.admit(with_priority(priority::high), held[9], r, now));
  EXPECT_FALSE(s.admit(with_priority(priority::high), t, r, now));
  // As streams end, low is admitted again once the route is back under its share.
  s.settle(held[9], 0, now);
  s.settle(held[8], 0, now);
  EXPECT_FALSE(s.admit(with_priority(priority::low), t, r, now));
  s.settle(held[7], 0, now);
  EXPECT_TRUE(s.admit(with_priority(priority::low), t, r, now));
  s.settle(t, 0, now);
  for (int i = 0; i < 7; ++i) s.settle(held[i], 0, now);
}

TEST(Priorities, WithoutPrioritiesEveryRequestMayUseTheWholeCap) {
  auto cfg = with_rules({{.name = "cap", .scope = rule::scope_kind::route, .max_concurrent = 2}});
  admission_state s(cfg, cfg.proxy);
  const auto now = steady::now();
  admission_state::refusal r;
  admission_state::ticket a, b;
  ASSERT_TRUE(s.admit(with_priority(priority::low), a, r, now));
  ASSERT_TRUE(s.admit(with_priority(priority::low), b, r, now));
  s.settle(a, 0, now);
  s.settle(b, 0, now);
}

TEST(Shedding, ARouteOverItsTtftSloRefusesLowUntilItRecovers) {
  auto cfg = with_rules({});
  cfg.priority.enabled = true;
  shed_rule rule;
  rule.route = "chat";
  rule.ttft_p95_ms = 500;
  rule.window = std::chrono::seconds(10);
  rule.min_requests = 20;
  rule.drop = {priority::low};
  cfg.shed = {rule};
  admission_state s(cfg, cfg.proxy);
  const auto t0 = steady::now();
  admission_state::refusal r;
  admission_state::ticket t;
  // Slow, but too few measurements to judge: nothing is shed.
  for (int i = 0; i < 19; ++i) s.record_ttft("chat", 900, t0);
  EXPECT_TRUE(s.admit(with_priority(priority::low), t, r, t0 + 1s));
  s.settle(t, 0, t0);
  s.record_ttft("chat", 900, t0 + 1s);
  // 20 measured, P95 900 ms > 500: low is refused (429, retry-after a sixth of the window),
  // normal and high go on; another route is not affected.
  EXPECT_FALSE(s.admit(with_priority(priority::low), t, r, t0 + 2s));
  EXPECT_EQ(r.status, 429);
  EXPECT_EQ(r.reason, admission_reason::slo);
  EXPECT_EQ(r.rule, "shed-chat");
  EXPECT_EQ(r.retry_after_s, 1u);
  EXPECT_TRUE(s.admit(with_priority(priority::normal), t, r, t0 + 2s));
  s.settle(t, 0, t0);
  EXPECT_TRUE(s.admit(request("t", "batch", "m", 0, -1, priority::low), t, r, t0 + 2s));
  s.settle(t, 0, t0);
  std::string json;
  {
    base::json::writer w(json);
    s.write_json(w, t0 + 2s);
  }
  EXPECT_NE(json.find("\"route\":\"chat\",\"active\":true"), std::string::npos) << json;
  EXPECT_NE(json.find("\"shed\":1"), std::string::npos) << json;
  // Fast answers outweigh the slow ones: P95 back under the SLO, low is admitted again.
  for (int i = 0; i < 400; ++i) s.record_ttft("chat", 100, t0 + 3s);
  EXPECT_TRUE(s.admit(with_priority(priority::low), t, r, t0 + 3s));
  s.settle(t, 0, t0);
  // Slow again, then the slow seconds leave the window: shedding stops by itself.
  for (int i = 0; i < 4000; ++i) s.record_ttft("chat", 2000, t0 + 4s);
  EXPECT_FALSE(s.admit(with_priority(priority::low), t, r, t0 + 4s));
  EXPECT_TRUE(s.admit(with_priority(priority::low), t, r, t0 + 15s));
  s.settle(t, 0, t0);
}

}  // namespace
}  // namespace tokentap::hooks
