// The admission hook's three sections as a file writes them (hooks/govern/admission_settings.cpp):
// every knob, the hook they bring, the tenants they imply, and every refusal at its line.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "config/config.hpp"
#include "hooks/govern/admission.hpp"
#include "hooks/registry.hpp"
#include "test/hooks/registry_check.hpp"

namespace tokentap::hooks {
namespace {

using rule = admission_rule;
using test::check_error;

TEST(Admission, ItsSectionsSetEveryKnobBringTheHookAndTellTenantsApart) {
  auto cfg = config::parse_config(
      "upstreams: {a: {url: http://h}, small: {url: http://s}}\n"
      "routes: [{name: local, prefix: /, upstream: a}]\n"
      "tenants: {header: x-tokentap-tenant, max: 50}\n"
      "admission:\n"
      "  - {name: per-tenant, scope: tenant, max_concurrent: 32, requests_per_minute: 600,\n"
      "     tokens_per_minute: 200000, assumed_max_tokens: 77}\n"
      "  - {name: fleet-cap, scope: route, route: local, model: m, max_concurrent: 256}\n"
      "priority: {header: x-prio, default: low, headroom: 0.25}\n"
      "shed: {route: local, when: {ttft_p95_ms: 2000, window_s: 30, min_requests: 7},\n"
      "       drop: [low, normal], reroute: small, model: m-8b}\n");
  const auto set = admission_settings::parse(cfg);
  ASSERT_EQ(set.rules.size(), 2u);
  EXPECT_EQ(set.rules[0].scope, rule::scope_kind::tenant);
  EXPECT_EQ(set.rules[0].max_concurrent, 32u);
  EXPECT_EQ(set.rules[0].requests_per_minute, 600u);
  EXPECT_EQ(set.rules[0].tokens_per_minute, 200000u);
  EXPECT_EQ(set.rules[0].assumed_max_tokens, 77u);
  EXPECT_EQ(set.rules[1].scope, rule::scope_kind::route);
  EXPECT_EQ(set.rules[1].route, "local");
  EXPECT_EQ(set.rules[1].model, "m");
  EXPECT_EQ(set.rules[1].assumed_max_tokens, 1024u);
  EXPECT_TRUE(set.priority.enabled);
  EXPECT_EQ(set.priority.header, "x-prio");
  EXPECT_EQ(set.priority.fallback, priority::low);
  EXPECT_DOUBLE_EQ(set.priority.headroom, 0.25);
  ASSERT_EQ(set.shed.size(), 1u);
  EXPECT_EQ(set.shed[0].route, "local");
  EXPECT_EQ(set.shed[0].ttft_p95_ms, 2000);
  EXPECT_EQ(set.shed[0].window.count(), 30);
  EXPECT_EQ(set.shed[0].min_requests, 7u);
  EXPECT_EQ(set.shed[0].drop, (std::vector<priority>{priority::low, priority::normal}));
  EXPECT_EQ(set.shed[0].reroute, "small");
  EXPECT_EQ(set.shed[0].model, "m-8b");
  // The sections bring their hook, before the listed ones.
  EXPECT_EQ(builtin_hooks().order(cfg).front(), "admission");
  const std::string base =
      "upstreams: {a: {url: http://h}}\nroutes: [{name: local, prefix: /, upstream: a}]\n";
  auto shed_only = config::parse_config(base +
                                        "priority: {}\nshed: {route: local, when: "
                                        "{ttft_p95_ms: 5}}\n");
  EXPECT_EQ(builtin_hooks().order(shed_only).front(), "admission");
  const auto plain = builtin_hooks().order(config::parse_config(base));
  EXPECT_EQ(std::find(plain.begin(), plain.end(), "admission"), plain.end());
  // A rule per tenant tells tenants apart as a `tenants:` section does; another scope does not.
  auto per_tenant = config::parse_config(base + "admission: [{name: t, requests_per_minute: 5}]\n");
  EXPECT_FALSE(per_tenant.tenants.enabled);
  builtin_hooks().complete(per_tenant);
  EXPECT_TRUE(per_tenant.tenants.enabled);
  auto global = config::parse_config(
      base + "admission: [{name: g, scope: global, requests_per_minute: 5}]\n");
  builtin_hooks().complete(global);
  EXPECT_FALSE(global.tenants.enabled);
  // The state reads the sections of the configuration it is built on.
  admission_state state(cfg);
  EXPECT_TRUE(state.rewrites_model());
  EXPECT_EQ(state.settings(), set);
}

TEST(Admission, ABadSectionIsRefusedAtItsLine) {
  const std::string base =
      "upstreams: {a: {url: http://h}, small: {url: http://s}}\n"
      "routes: [{name: local, prefix: /, upstream: a}]\n";
  const std::pair<std::string, std::string> cases[] = {
      {"admission: [{name: x}]",
       "line 3: admission rule 'x': needs max_concurrent, requests_per_minute or "
       "tokens_per_minute"},
      {"admission: [{name: x, scope: team, max_concurrent: 1}]",
       "line 3: admission rule 'x': scope must be tenant, route, model or global, not 'team'"},
      {"admission:\n  - {name: x, max_concurrent: -1}", "line 4:"},
      {"admission: [{name: x, max_concurrent: 1000001}]",
       "line 3: admission rule 'x': max_concurrent is at most 1000000"},
      {"admission: [{name: x, route: nope, max_concurrent: 1}]",
       "line 3: admission rule 'x' names unknown route 'nope'"},
      {"admission: [{name: x, max_concurrent: 1}, {name: x, max_concurrent: 2}]",
       "line 3: duplicate admission rule 'x'"},
      {"admission: [{name: 'a b', max_concurrent: 1}]",
       "line 3: admission rule name must be 1-64 letters, digits, '_', '-' or '.'"},
      {"admission: [{max_concurrent: 1}]", "line 3: every admission rule needs a name"},
      {"admission: [{name: x, max_concurent: 1}]",
       "line 3: unknown key 'max_concurent' in an admission rule"},
      {"admission: {name: x}", "line 3: admission must be a list of rules"},
      {"priority: {default: urgent}",
       "line 3: priority.default must be high, normal or low, not 'urgent'"},
      {"priority: {headroom: 2}", "line 3: priority.headroom must be from 0 to 0.9"},
      {"priority: {header: 'x y'}", "line 3: priority.header must be a header name"},
      {"priority: {}\nshed: {route: local, when: {ttft_p95_ms: -5}}",
       "line 4: shed.when.ttft_p95_ms must be from 1 to 3600000"},
      {"priority: {}\nshed: {route: local, when: {ttft_p95_ms: 5, window_s: 0}}",
       "line 4: shed.when.window_s must be from 1 to 3600"},
      {"priority: {}\nshed: {route: local, when: {ttft_p95_ms: 5}, drop: [high]}",
       "line 4: shed.drop cannot drop high: that is every request"},
      {"priority: {}\nshed: {route: local}",
       "line 4: shed rule for route 'local' needs when: {ttft_p95_ms: ...}"},
      {"priority: {}\nshed: {route: nope, when: {ttft_p95_ms: 5}}",
       "line 4: shed rule names unknown route 'nope'"},
      {"priority: {}\nshed:\n  - {route: local, when: {ttft_p95_ms: 5}}\n"
       "  - {route: local, when: {ttft_p95_ms: 9}}",
       "line 6: a second shed rule for route 'local'"},
      {"shed: {route: local, when: {ttft_p95_ms: 5}}",
       "line 3: shed drops requests by priority: configure priority: {header: ...}"},
      {"priority: {}\nshed: {route: local, when: {ttft_p95_ms: 5}, reroute: nope}",
       "line 4: shed rule of route 'local' reroutes to unknown upstream 'nope'"},
      {"priority: {}\nshed: {route: local, when: {ttft_p95_ms: 5}, reroute: a}",
       "line 4: shed rule of route 'local' reroutes to the route's own upstream 'a': name "
       "another (a smaller model's)"},
      {"priority: {}\nshed: {route: local, when: {ttft_p95_ms: 5}, model: m-8b}",
       "line 4: shed.model rewrites rerouted requests: it needs reroute"},
  };
  for (const auto& [yaml, error] : cases) {
    const auto got = check_error(base + yaml + "\n");
    EXPECT_EQ(got.substr(0, error.size()), error) << yaml << "\n" << got;
  }
}

}  // namespace
}  // namespace tokentap::hooks
