#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstdio>

#include "config/yaml_reader.hpp"

// The governance sections of the configuration (DESIGN.md §11).
namespace tokentap::config::yaml_reader {

namespace {

// A section that takes one entry as a mapping, or a list of them.
std::vector<YAML::Node> one_or_many(const YAML::Node& n) {
  if (!n.IsSequence()) return {n};
  std::vector<YAML::Node> out;
  for (const auto& e : n) out.push_back(e);
  return out;
}

// A rule's `name`: what metrics label it with.
std::string rule_name(const YAML::Node& r, const std::string& what) {
  if (!r["name"]) fail(r, "every " + what + " needs a name");
  auto name = scalar<std::string>(r["name"], "name");
  if (name.empty() || name.size() > 64 ||
      name.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.") !=
          std::string::npos)
    fail(r["name"], what + " name must be 1-64 letters, digits, '_', '-' or '.'");
  return name;
}

// `faults:` (DESIGN.md §13): a list of rules, each one kind of fault.
void read_faults(const YAML::Node& fs, config& cfg) {
  if (!fs.IsSequence()) fail(fs, "faults must be a list of rules");
  using kind = fault_rule::kind_t;
  struct kind_key {
    const char* key;
    kind k;
    std::uint64_t lo, hi;
  };
  static constexpr kind_key kinds[] = {{"delay_ms", kind::delay, 1, 600000},
                                       {"event_delay_ms", kind::event_delay, 1, 60000},
                                       {"cut_after_events", kind::cut, 0, 1000000000},
                                       {"abort_status", kind::abort, 400, 599}};
  for (const auto& r : fs) {
    check_keys(r,
               {"name", "route", "percent", "delay_ms", "event_delay_ms", "cut_after_events",
                "abort_status", "from_header"},
               "a fault rule");
    fault_rule rule;
    rule.name = rule_name(r, "fault rule");
    const auto where = "fault rule '" + rule.name + "'";
    if (r["route"]) rule.route = scalar<std::string>(r["route"], "route");
    if (r["percent"]) {
      rule.percent = scalar<double>(r["percent"], "percent");
      if (!(rule.percent >= 0 && rule.percent <= 100))
        fail(r["percent"], where + ": percent must be from 0 to 100");
    }
    int given = 0;
    for (const auto& k : kinds) {
      if (!r[k.key]) continue;
      ++given;
      const auto v = non_negative(r[k.key], k.key);
      if (v < k.lo || v > k.hi)
        fail(r[k.key], where + ": " + k.key + " must be from " + std::to_string(k.lo) + " to " +
                           std::to_string(k.hi));
      rule.kind = k.k;
      rule.value = static_cast<std::uint32_t>(v);
    }
    if (r["from_header"]) {
      if (!scalar<bool>(r["from_header"], "from_header"))
        fail(r["from_header"], where + ": from_header is true or absent");
      ++given;
      rule.kind = kind::from_header;
    }
    if (given != 1)
      fail(r, where +
                  ": needs exactly one of delay_ms, event_delay_ms, cut_after_events, "
                  "abort_status, from_header");
    for (const auto& other : cfg.faults)
      if (other.name == rule.name) fail(r["name"], "duplicate fault rule '" + rule.name + "'");
    cfg.faults.push_back(std::move(rule));
  }
}

}  // namespace

void read_governance(const YAML::Node& root, config& cfg) {
  if (const auto& t = root["tenants"]) {
    check_keys(t, {"header", "max", "salt_file"}, "tenants");
    cfg.tenants.enabled = true;
    if (t["salt_file"]) cfg.tenants.salt_file = scalar<std::string>(t["salt_file"], "salt_file");
    if (t["header"]) {
      cfg.tenants.header = scalar<std::string>(t["header"], "header");
      if (cfg.tenants.header.empty() ||
          cfg.tenants.header.find_first_of(" :\r\n\t") != std::string::npos)
        fail(t["header"], "tenants.header must be a header name");
    }
    if (t["max"]) {
      const auto m = non_negative(t["max"], "max");
      if (m < 1 || m > 10000) fail(t["max"], "tenants.max must be from 1 to 10000");
      cfg.tenants.max = m;
    }
  }
  if (const auto& a = root["admission"]) {
    if (!a.IsSequence()) fail(a, "admission must be a list of rules");
    for (const auto& r : a) {
      check_keys(r,
                 {"name", "scope", "route", "model", "max_concurrent", "requests_per_minute",
                  "tokens_per_minute", "assumed_max_tokens"},
                 "an admission rule");
      admission_rule rule;
      rule.name = rule_name(r, "admission rule");
      const auto where = "admission rule '" + rule.name + "'";
      if (r["scope"]) {
        const auto sc = scalar<std::string>(r["scope"], "scope");
        if (sc == "tenant")
          rule.scope = admission_rule::scope_kind::tenant;
        else if (sc == "route")
          rule.scope = admission_rule::scope_kind::route;
        else if (sc == "model")
          rule.scope = admission_rule::scope_kind::model;
        else if (sc == "global")
          rule.scope = admission_rule::scope_kind::global;
        else
          fail(r["scope"],
               where + ": scope must be tenant, route, model or global, not '" + sc + "'");
      }
      if (r["route"]) rule.route = scalar<std::string>(r["route"], "route");
      if (r["model"]) rule.model = scalar<std::string>(r["model"], "model");
      const auto limit = [&](const char* key, std::uint64_t max) -> std::uint64_t {
        if (!r[key]) return 0;
        const auto v = non_negative(r[key], key);
        if (v > max) fail(r[key], where + ": " + key + " is at most " + std::to_string(max));
        return v;
      };
      rule.max_concurrent = static_cast<std::uint32_t>(limit("max_concurrent", 1000000));
      rule.requests_per_minute =
          static_cast<std::uint32_t>(limit("requests_per_minute", 100000000));
      rule.tokens_per_minute = limit("tokens_per_minute", std::uint64_t{1} << 40);
      if (r["assumed_max_tokens"])
        rule.assumed_max_tokens = static_cast<std::uint32_t>(limit("assumed_max_tokens", 10000000));
      if (rule.max_concurrent == 0 && rule.requests_per_minute == 0 && rule.tokens_per_minute == 0)
        fail(r, where + ": needs max_concurrent, requests_per_minute or tokens_per_minute");
      for (const auto& other : cfg.admission)
        if (other.name == rule.name)
          fail(r["name"], "duplicate admission rule '" + rule.name + "'");
      cfg.admission.push_back(std::move(rule));
    }
  }
  const auto priority_of = [](const YAML::Node& n, std::string_view key) {
    const auto v = scalar<std::string>(n, key);
    if (v == "high") return priority::high;
    if (v == "normal") return priority::normal;
    if (v == "low") return priority::low;
    fail(n, std::string(key) + " must be high, normal or low, not '" + v + "'");
  };
  if (const auto& p = root["priority"]) {
    check_keys(p, {"header", "default", "headroom"}, "priority");
    cfg.priority.enabled = true;
    if (p["header"]) {
      cfg.priority.header = scalar<std::string>(p["header"], "header");
      if (cfg.priority.header.empty() ||
          cfg.priority.header.find_first_of(" :\r\n\t") != std::string::npos)
        fail(p["header"], "priority.header must be a header name");
    }
    if (p["default"]) cfg.priority.fallback = priority_of(p["default"], "priority.default");
    if (p["headroom"]) {
      cfg.priority.headroom = scalar<double>(p["headroom"], "headroom");
      if (!(cfg.priority.headroom >= 0 && cfg.priority.headroom <= 0.9))
        fail(p["headroom"], "priority.headroom must be from 0 to 0.9");
    }
  }
  if (const auto& sh = root["shed"]) {
    for (const auto& r : one_or_many(sh)) {
      check_keys(r, {"route", "when", "drop", "reroute", "model"}, "a shed rule");
      shed_rule rule;
      if (!r["route"]) fail(r, "a shed rule needs a route");
      rule.route = scalar<std::string>(r["route"], "route");
      const auto& w = r["when"];
      if (!w) fail(r, "shed rule for route '" + rule.route + "' needs when: {ttft_p95_ms: ...}");
      check_keys(w, {"ttft_p95_ms", "window_s", "min_requests"}, "shed.when");
      if (!w["ttft_p95_ms"]) fail(w, "shed.when needs ttft_p95_ms");
      rule.ttft_p95_ms = scalar<double>(w["ttft_p95_ms"], "ttft_p95_ms");
      if (!(rule.ttft_p95_ms > 0 && rule.ttft_p95_ms <= 3600000))
        fail(w["ttft_p95_ms"], "shed.when.ttft_p95_ms must be from 1 to 3600000");
      if (w["window_s"]) {
        const auto s = non_negative(w["window_s"], "window_s");
        if (s < 1 || s > 3600) fail(w["window_s"], "shed.when.window_s must be from 1 to 3600");
        rule.window = std::chrono::seconds(s);
      }
      if (w["min_requests"]) {
        const auto m = non_negative(w["min_requests"], "min_requests");
        if (m < 1 || m > 1000000)
          fail(w["min_requests"], "shed.when.min_requests must be from 1 to 1000000");
        rule.min_requests = static_cast<std::uint32_t>(m);
      }
      if (const auto& d = r["drop"]) {
        if (!d.IsSequence() || d.size() == 0)
          fail(d, "shed.drop must be a list: [low] or [low, normal]");
        rule.drop.clear();
        for (const auto& x : d) {
          const auto p = priority_of(x, "shed.drop");
          if (p == priority::high) fail(x, "shed.drop cannot drop high: that is every request");
          rule.drop.push_back(p);
        }
      }
      if (r["reroute"]) {
        rule.reroute = scalar<std::string>(r["reroute"], "reroute");
        if (rule.reroute.empty()) fail(r["reroute"], "shed.reroute names an upstream");
      }
      if (r["model"]) {
        if (!r["reroute"])
          fail(r["model"], "shed.model rewrites rerouted requests: it needs reroute");
        rule.model = scalar<std::string>(r["model"], "model");
        if (rule.model.empty()) fail(r["model"], "shed.model names a model");
      }
      for (const auto& other : cfg.shed)
        if (other.route == rule.route)
          fail(r["route"], "a second shed rule for route '" + rule.route + "'");
      cfg.shed.push_back(std::move(rule));
    }
  }
  if (const auto& ss = root["shared_state"]) {
    check_keys(ss, {"redis", "sync_ms", "timeout_ms", "retry_after_ms", "key_prefix"},
               "shared_state");
    if (ss["redis"]) {
      // redis://host:port (no credentials in the URL: a Redis on loopback or a private network).
      auto text = scalar<std::string>(ss["redis"], "redis");
      if (!text.starts_with("redis://"))
        fail(ss["redis"], "shared_state.redis must be redis://host:port");
      std::string err;
      auto hp = parse_host_port(text.substr(8), err);
      if (!hp || hp->port == 0)
        fail(ss["redis"], "shared_state.redis: " + (hp ? "needs a port" : err));
      cfg.shared_state.redis_host = hp->host;
      cfg.shared_state.redis_port = hp->port;
    }
    const auto millis = [&](const char* key, ms& out, std::int64_t lo, std::int64_t hi) {
      if (!ss[key]) return;
      const auto v = static_cast<std::int64_t>(non_negative(ss[key], key));
      if (v < lo || v > hi)
        fail(ss[key], "shared_state." + std::string(key) + " must be from " + std::to_string(lo) +
                          " to " + std::to_string(hi));
      out = ms(v);
    };
    millis("sync_ms", cfg.shared_state.sync, 10, 10000);
    millis("timeout_ms", cfg.shared_state.timeout, 1, 5000);
    millis("retry_after_ms", cfg.shared_state.retry_after, 10, 600000);
    if (ss["key_prefix"]) {
      cfg.shared_state.key_prefix = scalar<std::string>(ss["key_prefix"], "key_prefix");
      if (cfg.shared_state.key_prefix.size() > 64 ||
          cfg.shared_state.key_prefix.find_first_of(" \r\n\t") != std::string::npos)
        fail(ss["key_prefix"], "shared_state.key_prefix: at most 64 characters, no spaces");
    }
  }
  if (const auto& fs = root["faults"]) read_faults(fs, cfg);
}

void validate_governance(config& cfg) {
  for (const auto& rule : cfg.admission) {
    if (!rule.route.empty() &&
        std::none_of(cfg.routes.begin(), cfg.routes.end(),
                     [&](const route_config& r) { return r.name == rule.route; }))
      throw config_error("admission rule '" + rule.name + "' names unknown route '" + rule.route +
                         "'");
  }
  for (const auto& rule : cfg.faults)
    if (!rule.route.empty() &&
        std::none_of(cfg.routes.begin(), cfg.routes.end(),
                     [&](const route_config& r) { return r.name == rule.route; }))
      throw config_error("fault rule '" + rule.name + "' names unknown route '" + rule.route + "'");
  for (auto& rule : cfg.shed) {
    const auto route = std::find_if(cfg.routes.begin(), cfg.routes.end(),
                                    [&](const route_config& r) { return r.name == rule.route; });
    if (route == cfg.routes.end())
      throw config_error("shed rule names unknown route '" + rule.route + "'");
    if (rule.reroute.empty()) continue;
    const auto up = std::find_if(cfg.upstreams.begin(), cfg.upstreams.end(),
                                 [&](const upstream_config& u) { return u.name == rule.reroute; });
    if (up == cfg.upstreams.end())
      throw config_error("shed rule of route '" + rule.route + "' reroutes to unknown upstream '" +
                         rule.reroute + "'");
    rule.reroute_index = static_cast<std::size_t>(up - cfg.upstreams.begin());
    if (rule.reroute_index == route->upstream_index)
      throw config_error("shed rule of route '" + rule.route +
                         "' reroutes to the route's own upstream '" + rule.reroute +
                         "': name another (a smaller model's)");
  }
  if (!cfg.shed.empty() && !cfg.priority.enabled)
    throw config_error("shed drops requests by priority: configure priority: {header: ...}");
  if (std::any_of(cfg.admission.begin(), cfg.admission.end(), [](const admission_rule& r) {
        return r.scope == admission_rule::scope_kind::tenant;
      }))
    cfg.tenants.enabled = true;
  // Admission rules and shedding are enforced by the `admission` hook: configuring them brings
  // it in.
  if ((!cfg.admission.empty() || !cfg.shed.empty()) &&
      std::find(cfg.hooks.begin(), cfg.hooks.end(), "admission") == cfg.hooks.end())
    cfg.hooks.insert(cfg.hooks.begin(), "admission");
}

}  // namespace tokentap::config::yaml_reader
