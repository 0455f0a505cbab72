// The admission hook's settings (admission_settings, hooks/govern/admission.hpp): its three
// sections, `admission:`, `priority:` and `shed:`, read and checked against the routes and
// upstreams they name, each error at its line.
#include <algorithm>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "config/section.hpp"
#include "hooks/govern/admission.hpp"

namespace tokentap::hooks {

std::string_view to_string(priority p) noexcept {
  switch (p) {
    case priority::high:
      return "high";
    case priority::low:
      return "low";
    case priority::normal:
      break;
  }
  return "normal";
}

namespace {

using config::section;

// A section that takes one entry as a mapping, or a list of them.
std::vector<section> one_or_many(const section& s) {
  if (s.type() == section::kind::list) return s.items();
  return {s};
}

// A rule's `name`: what metrics label it with.
std::string rule_name(const section& r, const std::string& what) {
  if (!r["name"]) r.fail("every " + what + " needs a name");
  auto name = r["name"].string("name");
  if (name.empty() || name.size() > 64 ||
      name.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.") !=
          std::string::npos)
    r["name"].fail(what + " name must be 1-64 letters, digits, '_', '-' or '.'");
  return name;
}

priority priority_of(const section& n, std::string_view key) {
  const auto v = n.string(key);
  if (v == "high") return priority::high;
  if (v == "normal") return priority::normal;
  if (v == "low") return priority::low;
  n.fail(std::string(key) + " must be high, normal or low, not '" + v + "'");
}

bool header_name(std::string_view h) {
  return !h.empty() && h.find_first_of(" :\r\n\t") == std::string_view::npos;
}

std::vector<admission_rule> read_rules(const section& a, const config::config& cfg) {
  std::vector<admission_rule> out;
  if (!a) return out;
  if (a.type() != section::kind::list) a.fail("admission must be a list of rules");
  for (const auto& r : a.items()) {
    r.check_keys({"name", "scope", "route", "model", "max_concurrent", "requests_per_minute",
                  "tokens_per_minute", "assumed_max_tokens"},
                 "an admission rule");
    admission_rule rule;
    rule.name = rule_name(r, "admission rule");
    const auto where = "admission rule '" + rule.name + "'";
    if (const auto& sc = r["scope"]) {
      const auto v = sc.string("scope");
      if (v == "tenant")
        rule.scope = admission_rule::scope_kind::tenant;
      else if (v == "route")
        rule.scope = admission_rule::scope_kind::route;
      else if (v == "model")
        rule.scope = admission_rule::scope_kind::model;
      else if (v == "global")
        rule.scope = admission_rule::scope_kind::global;
      else
        sc.fail(where + ": scope must be tenant, route, model or global, not '" + v + "'");
    }
    if (const auto& rt = r["route"]) {
      rule.route = rt.string("route");
      if (std::none_of(cfg.routes.begin(), cfg.routes.end(),
                       [&](const config::route_config& x) { return x.name == rule.route; }))
        rt.fail(where + " names unknown route '" + rule.route + "'");
    }
    if (r["model"]) rule.model = r["model"].string("model");
    const auto limit = [&](const char* key, std::uint64_t max) -> std::uint64_t {
      const auto& v = r[key];
      if (!v) return 0;
      const auto n = v.non_negative(key);
      if (n > max) v.fail(where + ": " + key + " is at most " + std::to_string(max));
      return n;
    };
    rule.max_concurrent = static_cast<std::uint32_t>(limit("max_concurrent", 1000000));
    rule.requests_per_minute = static_cast<std::uint32_t>(limit("requests_per_minute", 100000000));
    rule.tokens_per_minute = limit("tokens_per_minute", std::uint64_t{1} << 40);
    if (r["assumed_max_tokens"])
      rule.assumed_max_tokens = static_cast<std::uint32_t>(limit("assumed_max_tokens", 10000000));
    if (rule.max_concurrent == 0 && rule.requests_per_minute == 0 && rule.tokens_per_minute == 0)
      r.fail(where + ": needs max_concurrent, requests_per_minute or tokens_per_minute");
    for (const auto& other : out)
      if (other.name == rule.name) r["name"].fail("duplicate admission rule '" + rule.name + "'");
    out.push_back(std::move(rule));
  }
  return out;
}

priority_config read_priority(const section& p) {
  priority_config out;
  if (!p) return out;
  p.check_keys({"header", "default", "headroom"}, "priority");
  out.enabled = true;
  if (const auto& h = p["header"]) {
    out.header = h.string("header");
    if (!header_name(out.header)) h.fail("priority.header must be a header name");
  }
  if (p["default"]) out.fallback = priority_of(p["default"], "priority.default");
  if (const auto& h = p["headroom"]) {
    out.headroom = h.number("headroom");
    if (!(out.headroom >= 0 && out.headroom <= 0.9))
      h.fail("priority.headroom must be from 0 to 0.9");
  }
  return out;
}

std::vector<shed_rule> read_shed(const section& sh, const config::config& cfg) {
  std::vector<shed_rule> out;
  if (!sh) return out;
  for (const auto& r : one_or_many(sh)) {
    r.check_keys({"route", "when", "drop", "reroute", "model"}, "a shed rule");
    shed_rule rule;
    if (!r["route"]) r.fail("a shed rule needs a route");
    rule.route = r["route"].string("route");
    const auto& w = r["when"];
    if (!w) r.fail("shed rule for route '" + rule.route + "' needs when: {ttft_p95_ms: ...}");
    w.check_keys({"ttft_p95_ms", "window_s", "min_requests"}, "shed.when");
    if (!w["ttft_p95_ms"]) w.fail("shed.when needs ttft_p95_ms");
    rule.ttft_p95_ms = w["ttft_p95_ms"].number("ttft_p95_ms");
    if (!(rule.ttft_p95_ms > 0 && rule.ttft_p95_ms <= 3600000))
      w["ttft_p95_ms"].fail("shed.when.ttft_p95_ms must be from 1 to 3600000");
    if (const auto& v = w["window_s"]) {
      const auto n = v.non_negative("window_s");
      if (n < 1 || n > 3600) v.fail("shed.when.window_s must be from 1 to 3600");
      rule.window = std::chrono::seconds(n);
    }
    if (const auto& v = w["min_requests"]) {
      const auto n = v.non_negative("min_requests");
      if (n < 1 || n > 1000000) v.fail("shed.when.min_requests must be from 1 to 1000000");
      rule.min_requests = static_cast<std::uint32_t>(n);
    }
    if (const auto& d = r["drop"]) {
      if (d.type() != section::kind::list || d.items().empty())
        d.fail("shed.drop must be a list: [low] or [low, normal]");
      rule.drop.clear();
      for (const auto& x : d.items()) {
        const auto p = priority_of(x, "shed.drop");
        if (p == priority::high) x.fail("shed.drop cannot drop high: that is every request");
        rule.drop.push_back(p);
      }
    }
    if (const auto& v = r["reroute"]) {
      rule.reroute = v.string("reroute");
      if (rule.reroute.empty()) v.fail("shed.reroute names an upstream");
    }
    if (const auto& v = r["model"]) {
      if (!r["reroute"]) v.fail("shed.model rewrites rerouted requests: it needs reroute");
      rule.model = v.string("model");
      if (rule.model.empty()) v.fail("shed.model names a model");
    }
    for (const auto& other : out)
      if (other.route == rule.route)
        r["route"].fail("a second shed rule for route '" + rule.route + "'");
    // What it names: the route, and an upstream other than the route's own.
    const auto route =
        std::find_if(cfg.routes.begin(), cfg.routes.end(),
                     [&](const config::route_config& x) { return x.name == rule.route; });
    if (route == cfg.routes.end())
      r["route"].fail("shed rule names unknown route '" + rule.route + "'");
    if (!rule.reroute.empty()) {
      if (std::none_of(cfg.upstreams.begin(), cfg.upstreams.end(),
                       [&](const config::upstream_config& u) { return u.name == rule.reroute; }))
        r["reroute"].fail("shed rule of route '" + rule.route + "' reroutes to unknown upstream '" +
                          rule.reroute + "'");
      if (rule.reroute == route->upstream)
        r["reroute"].fail("shed rule of route '" + rule.route +
                          "' reroutes to the route's own upstream '" + rule.reroute +
                          "': name another (a smaller model's)");
    }
    out.push_back(std::move(rule));
  }
  return out;
}

}  // namespace

admission_settings admission_settings::parse(const config::config& cfg) {
  admission_settings out;
  out.rules = read_rules(cfg.hook_section("admission"), cfg);
  out.priority = read_priority(cfg.hook_section("priority"));
  const auto& shed = cfg.hook_section("shed");
  out.shed = read_shed(shed, cfg);
  if (!out.shed.empty() && !out.priority.enabled)
    shed.fail("shed drops requests by priority: configure priority: {header: ...}");
  return out;
}

}  // namespace tokentap::hooks
