#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstdio>

#include "config/yaml_reader.hpp"

// The governance sections of the configuration (DESIGN.md §11).
namespace tokentap::config::yaml_reader {

namespace {

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
  for (const auto& rule : cfg.faults)
    if (!rule.route.empty() &&
        std::none_of(cfg.routes.begin(), cfg.routes.end(),
                     [&](const route_config& r) { return r.name == rule.route; }))
      throw config_error("fault rule '" + rule.name + "' names unknown route '" + rule.route + "'");
}

}  // namespace tokentap::config::yaml_reader
