#include "config/config.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>

#include "config/yaml_reader.hpp"

namespace tokentap::config {

using namespace yaml_reader;

namespace {

void read_upstream(const std::string& name, const YAML::Node& n, upstream_config& up) {
  check_keys(
      n,
      {"url", "endpoints", "balance", "prefix", "retries", "outlier", "health", "engine_metrics",
       "fallback", "tls_verify", "ca_file", "max_idle_connections", "idle_connection_ttl_ms"},
      "upstream '" + name + "'");
  up.name = name;
  if (!n["url"] == !n["endpoints"]) fail(n, "upstream '" + name + "' needs a url or endpoints");
  const auto add = [&](const YAML::Node& v) {
    std::string err;
    auto u = parse_url(scalar<std::string>(v, "url"), err);
    if (!u) fail(v, "upstream '" + name + "': " + err);
    up.endpoints.push_back(std::move(*u));
  };
  if (n["url"]) {
    add(n["url"]);
  } else {
    if (!n["endpoints"].IsSequence() || n["endpoints"].size() == 0)
      fail(n["endpoints"], "upstream '" + name + "': endpoints must be a list of URLs");
    if (n["endpoints"].size() > max_endpoints)
      fail(n["endpoints"],
           "upstream '" + name + "': at most " + std::to_string(max_endpoints) + " endpoints");
    for (const auto& e : n["endpoints"]) add(e);
  }
  if (const auto b = n["balance"]) {
    up.balance = scalar<std::string>(b, "balance");
    up.balance_line = b.Mark().line + 1;
  }
  if (const auto p = n["prefix"]) {
    const auto where = "upstream '" + name + "' prefix";
    if (up.balance != "prefix") fail(p, where + ": needs balance: prefix");
    check_keys(p, {"new", "load_bounds", "max_imbalance", "min_gap", "index_entries"}, where);
    auto& pc = up.prefix;
    if (p["new"]) {
      const auto v = scalar<std::string>(p["new"], "new");
      if (v == "least_load")
        pc.new_conversations = prefix_config::placement::least_load;
      else if (v == "hash")
        pc.new_conversations = prefix_config::placement::hash;
      else
        fail(p["new"], where + ": new must be least_load or hash, not '" + v + "'");
    }
    if (p["load_bounds"]) pc.load_bounds = scalar<bool>(p["load_bounds"], "load_bounds");
    if (p["max_imbalance"]) {
      pc.max_imbalance = scalar<double>(p["max_imbalance"], "max_imbalance");
      if (!(pc.max_imbalance >= 1.0) || pc.max_imbalance > 1e6)
        fail(p["max_imbalance"], where + ": max_imbalance must be a ratio from 1 to 1e6");
    }
    if (p["min_gap"]) {
      const auto g = non_negative(p["min_gap"], "min_gap");
      if (g > 1000000) fail(p["min_gap"], where + ": min_gap is at most 1000000");
      pc.min_gap = static_cast<unsigned>(g);
    }
    if (p["index_entries"]) {
      const auto e = non_negative(p["index_entries"], "index_entries");
      if (e < 64 || e > (std::uint64_t{1} << 24))
        fail(p["index_entries"], where + ": index_entries must be from 64 to 16777216");
      pc.index_entries = static_cast<std::size_t>(e);
    }
  }
  if (n["retries"]) {
    const auto r = non_negative(n["retries"], "retries");
    if (r > max_retries)
      fail(n["retries"],
           "upstream '" + name + "': retries is at most " + std::to_string(max_retries));
    up.retries = static_cast<unsigned>(r);
  }
  if (const auto o = n["outlier"]) {
    const auto where = "upstream '" + name + "' outlier";
    check_keys(
        o, {"consecutive_failures", "base_ejection_ms", "max_ejection_ms", "max_ejected_percent"},
        where);
    auto& out = up.outlier;
    if (o["consecutive_failures"])
      out.consecutive_failures =
          static_cast<unsigned>(non_negative(o["consecutive_failures"], "consecutive_failures"));
    if (o["base_ejection_ms"])
      out.base_ejection = ms(non_negative(o["base_ejection_ms"], "base_ejection_ms"));
    if (o["max_ejection_ms"])
      out.max_ejection = ms(non_negative(o["max_ejection_ms"], "max_ejection_ms"));
    if (o["max_ejected_percent"]) {
      const auto p = non_negative(o["max_ejected_percent"], "max_ejected_percent");
      if (p > 100) fail(o["max_ejected_percent"], where + ": max_ejected_percent is at most 100");
      out.max_ejected_percent = static_cast<unsigned>(p);
    }
    if (out.max_ejection < out.base_ejection)
      fail(o, where + ": max_ejection_ms is less than base_ejection_ms");
  }
  if (const auto h = n["health"]) {
    const auto where = "upstream '" + name + "' health";
    check_keys(h, {"path", "interval_ms", "timeout_ms", "unhealthy_threshold", "healthy_threshold"},
               where);
    auto& hc = up.health;
    hc.enabled = true;
    if (h["path"]) hc.path = scalar<std::string>(h["path"], "path");
    if (hc.path.empty() || hc.path.front() != '/' ||
        hc.path.find_first_of(" \r\n\t") != std::string::npos)
      fail(h, where + ": path must start with '/' and have no spaces or line breaks");
    if (h["interval_ms"]) hc.interval = ms(non_negative(h["interval_ms"], "interval_ms"));
    if (h["timeout_ms"]) hc.timeout = ms(non_negative(h["timeout_ms"], "timeout_ms"));
    if (hc.interval < ms(100)) fail(h, where + ": interval_ms is at least 100");
    if (hc.timeout < ms(1) || hc.timeout > hc.interval)
      fail(h, where + ": timeout_ms must be from 1 to interval_ms");
    const auto threshold = [&](const char* key, unsigned& field) {
      if (!h[key]) return;
      const auto v = non_negative(h[key], key);
      if (v < 1 || v > 100) fail(h[key], where + ": " + key + " must be from 1 to 100");
      field = static_cast<unsigned>(v);
    };
    threshold("unhealthy_threshold", hc.unhealthy_threshold);
    threshold("healthy_threshold", hc.healthy_threshold);
  }
  if (const auto em = n["engine_metrics"]) {
    const auto where = "upstream '" + name + "' engine_metrics";
    check_keys(em, {"path", "interval_ms", "kind", "engine_load"}, where);
    auto& e = up.engine_metrics;
    e.enabled = true;
    if (em["path"]) e.path = scalar<std::string>(em["path"], "path");
    if (e.path.empty() || e.path.front() != '/' ||
        e.path.find_first_of(" \r\n\t") != std::string::npos)
      fail(em, where + ": path must start with '/' and have no spaces or line breaks");
    if (em["interval_ms"]) e.interval = ms(non_negative(em["interval_ms"], "interval_ms"));
    if (e.interval < ms(100)) fail(em, where + ": interval_ms is at least 100");
    if (em["kind"]) e.kind = scalar<std::string>(em["kind"], "kind");
    if (e.kind != "auto" && e.kind != "vllm" && e.kind != "sglang" && e.kind != "tgi" &&
        e.kind != "llama.cpp")
      fail(em["kind"], where + ": kind must be auto, vllm, sglang, tgi or llama.cpp");
    if (em["engine_load"]) e.engine_load = scalar<bool>(em["engine_load"], "engine_load");
  }
  if (n["fallback"]) up.fallback = scalar<std::string>(n["fallback"], "fallback");
  if (n["tls_verify"]) up.tls_verify = scalar<bool>(n["tls_verify"], "tls_verify");
  if (n["ca_file"]) up.ca_file = scalar<std::string>(n["ca_file"], "ca_file");
  if (n["max_idle_connections"])
    up.max_idle = non_negative(n["max_idle_connections"], "max_idle_connections");
  if (n["idle_connection_ttl_ms"])
    up.idle_ttl = ms(non_negative(n["idle_connection_ttl_ms"], "idle_connection_ttl_ms"));
}

void read_timeouts(const YAML::Node& n, timeouts_config& t) {
  check_keys(n,
             {"connect_ms", "upstream_header_ms", "idle_ms", "total_ms", "client_header_ms",
              "keepalive_ms", "client_write_ms", "shutdown_grace_ms"},
             "timeouts");
  auto set = [&](const char* key, ms& field) {
    if (n[key]) field = ms(non_negative(n[key], key));
  };
  set("connect_ms", t.connect);
  set("upstream_header_ms", t.upstream_header);
  set("idle_ms", t.idle);
  set("total_ms", t.total);
  set("client_header_ms", t.client_header);
  set("keepalive_ms", t.keepalive);
  set("client_write_ms", t.client_write);
  set("shutdown_grace_ms", t.shutdown_grace);
}

void read_limits(const YAML::Node& n, limits_config& l) {
  check_keys(n,
             {"max_request_header_bytes", "max_request_body_bytes", "max_response_header_bytes",
              "max_connections"},
             "limits");
  auto set = [&](const char* key, std::size_t& field) {
    if (n[key]) field = non_negative(n[key], key);
  };
  set("max_request_header_bytes", l.max_request_header_bytes);
  set("max_request_body_bytes", l.max_request_body_bytes);
  set("max_response_header_bytes", l.max_response_header_bytes);
  set("max_connections", l.max_connections);
}

// The top-level keys config/ reads itself; any other is a hook's section.
bool own_key(std::string_view key) {
  // clang-format off
  static constexpr std::string_view own[] = {
      "listen", "admin", "admin_token_file", "threads", "reuse_port", "upstreams", "routes",
      "timeouts", "limits", "accept_encoding", "log", "hooks", "trace", "metrics",
      "max_event_bytes", "tenants", "shared_state", "otel", "faults"};
  // clang-format on
  return std::find(std::begin(own), std::end(own), key) != std::end(own);
}

config from_yaml(const YAML::Node& root) {
  config cfg;
  if (root.IsNull()) return cfg;
  // A key not listed here is a hook's own section (config::hook_settings).
  if (!root.IsMap()) fail(root, "the top level must be a mapping");
  for (const auto& kv : root) {
    auto key = key_name(kv.first);
    if (!own_key(key))
      cfg.hook_settings.push_back(
          {std::move(key), kv.first.Mark().line + 1, section_of(kv.second)});
  }
  if (root["listen"]) cfg.listen = address(root["listen"], "listen");
  if (root["admin"]) cfg.admin = address(root["admin"], "admin");
  if (root["admin_token_file"])
    cfg.admin_token_file = scalar<std::string>(root["admin_token_file"], "admin_token_file");
  if (root["threads"])
    cfg.threads = static_cast<unsigned>(non_negative(root["threads"], "threads"));
  if (root["reuse_port"]) cfg.reuse_port = scalar<bool>(root["reuse_port"], "reuse_port");
  if (const auto& ups = root["upstreams"]) {
    if (!ups.IsMap()) fail(ups, "upstreams must be a mapping of name -> {url: ...}");
    for (const auto& kv : ups) {
      upstream_config up;
      read_upstream(key_name(kv.first), kv.second, up);
      cfg.upstreams.push_back(std::move(up));
    }
  }
  if (const auto& routes = root["routes"]) {
    if (!routes.IsSequence()) fail(routes, "routes must be a list");
    for (const auto& r : routes) {
      check_keys(r, {"name", "prefix", "upstream"}, "a route");
      route_config rc;
      if (!r["prefix"] || !r["upstream"]) fail(r, "a route needs prefix and upstream");
      rc.prefix = scalar<std::string>(r["prefix"], "prefix");
      rc.upstream = scalar<std::string>(r["upstream"], "upstream");
      rc.name = r["name"] ? scalar<std::string>(r["name"], "name") : rc.upstream;
      cfg.routes.push_back(std::move(rc));
    }
  }
  if (root["timeouts"]) read_timeouts(root["timeouts"], cfg.timeouts);
  if (root["limits"]) read_limits(root["limits"], cfg.limits);
  if (const auto& ae = root["accept_encoding"]) {
    const auto v = scalar<std::string>(ae, "accept_encoding");
    if (v != "identity" && v != "passthrough")
      fail(ae, "accept_encoding must be 'identity' or 'passthrough'");
    cfg.identity_encoding = v == "identity";
  }
  if (const auto& hooks = root["hooks"]) {
    if (!hooks.IsSequence()) fail(hooks, "hooks must be a list of hook names");
    cfg.hooks.clear();
    for (const auto& h : hooks) cfg.hooks.push_back(scalar<std::string>(h, "hooks"));
  }
  if (root["max_event_bytes"])
    cfg.max_event_bytes = non_negative(root["max_event_bytes"], "max_event_bytes");
  if (const auto& t = root["trace"]) {
    check_keys(t,
               {"dir", "max_file_bytes", "max_files", "queue_records", "max_record_bytes",
                "sample_rate", "bodies"},
               "trace");
    auto& tc = cfg.trace;
    if (t["dir"]) tc.dir = scalar<std::string>(t["dir"], "dir");
    if (t["max_file_bytes"])
      tc.max_file_bytes = non_negative(t["max_file_bytes"], "max_file_bytes");
    if (t["max_files"]) tc.max_files = non_negative(t["max_files"], "max_files");
    if (t["queue_records"]) tc.queue_records = non_negative(t["queue_records"], "queue_records");
    if (t["max_record_bytes"])
      tc.max_record_bytes = non_negative(t["max_record_bytes"], "max_record_bytes");
    if (t["sample_rate"]) tc.sample_rate = scalar<double>(t["sample_rate"], "sample_rate");
    if (t["bodies"]) tc.bodies = scalar<bool>(t["bodies"], "bodies");
  }
  if (const auto& m = root["metrics"]) {
    check_keys(m,
               {"max_models", "window_s", "ttft_buckets", "itl_buckets", "e2e_buckets", "semconv"},
               "metrics");
    auto& mc = cfg.metrics;
    if (m["max_models"]) mc.max_models = non_negative(m["max_models"], "max_models");
    if (m["semconv"]) mc.semconv = scalar<bool>(m["semconv"], "semconv");
    if (m["window_s"]) mc.window = std::chrono::seconds(non_negative(m["window_s"], "window_s"));
    auto buckets = [&](const char* key, std::vector<double>& out) {
      const auto& b = m[key];
      if (!b) return;
      if (!b.IsSequence() || b.size() == 0)
        fail(b, std::string(key) + " must be a non-empty list of seconds");
      out.clear();
      for (const auto& v : b) out.push_back(scalar<double>(v, key));
      for (std::size_t i = 1; i < out.size(); ++i)
        if (!(out[i] > out[i - 1])) fail(b, std::string(key) + " must be strictly increasing");
    };
    buckets("ttft_buckets", mc.ttft_buckets);
    buckets("itl_buckets", mc.itl_buckets);
    buckets("e2e_buckets", mc.e2e_buckets);
  }
  read_governance(root, cfg);
  read_otel(root, cfg);
  if (const auto& log = root["log"]) {
    check_keys(log, {"level", "access_log"}, "log");
    if (log["level"]) cfg.log_level = scalar<std::string>(log["level"], "level");
    if (log["access_log"]) cfg.access_log = scalar<bool>(log["access_log"], "access_log");
  }
  return cfg;
}

}  // namespace

std::string config_error::one_line(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '\n') {
      out += "\\n";
    } else if (c < 0x20 || c == 0x7f) {
      static constexpr char hex[] = "0123456789abcdef";
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    } else {
      out += ch;
    }
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

void fail_at(int line, const std::string& what) {
  if (line > 0) throw config_error("line " + std::to_string(line) + ": " + what);
  throw config_error(what);
}

namespace {

YAML::Node load_yaml(const std::string& yaml_text) {
  try {
    return YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    throw config_error("YAML syntax error at line " + std::to_string(e.mark.line + 1) + ": " +
                       e.msg);
  }
}

}  // namespace

config parse_config(const std::string& yaml_text, bool check) {
  const YAML::Node root = load_yaml(yaml_text);
  config cfg;
  try {
    cfg = from_yaml(root);
  } catch (const YAML::Exception& e) {
    // A shape the readers did not anticipate still gets a one-line reason, never a raw exception.
    throw config_error("invalid configuration at line " + std::to_string(e.mark.line + 1) + ": " +
                       e.msg);
  }
  if (check) validate(cfg);
  return cfg;
}

const section& config::hook_section(std::string_view name) const noexcept {
  static const section absent;
  for (const auto& m : hook_settings)
    if (m.key == name) return m.value;
  return absent;
}

void set_hook_sections(config& cfg, const std::string& yaml_text) {
  const YAML::Node root = load_yaml(yaml_text);
  if (!root.IsMap()) fail(root, "hook sections must be a mapping");
  for (const auto& kv : root) {
    auto key = key_name(kv.first);
    if (own_key(key)) fail(kv.first, "'" + key + "' is not a hook's section");
    section value = section_of(kv.second);
    auto same = std::find_if(cfg.hook_settings.begin(), cfg.hook_settings.end(),
                             [&](const section::member& m) { return m.key == key; });
    if (same != cfg.hook_settings.end())
      same->value = std::move(value);
    else
      cfg.hook_settings.push_back({std::move(key), 0, std::move(value)});
  }
}

config load_config_file(const std::string& path, bool check) {
  std::ifstream in(path);
  if (!in) throw config_error("cannot read config file '" + path + "'");
  std::ostringstream ss;
  ss << in.rdbuf();
  try {
    return parse_config(ss.str(), check);
  } catch (const config_error& e) {
    throw config_error(path + ": " + e.what());
  }
}

void set_single_upstream(config& cfg, const std::string& url_text) {
  std::string err;
  auto u = parse_url(url_text, err);
  if (!u) throw config_error("--upstream: " + err);
  upstream_config up;
  up.name = "default";
  up.endpoints = {*u};
  cfg.upstreams = {up};
  cfg.routes = {route_config{"default", "/", "default", 0}};
}

void validate(config& cfg) {
  const auto known_levels = {"debug", "info", "warn", "error"};
  if (std::find(known_levels.begin(), known_levels.end(), cfg.log_level) == known_levels.end())
    throw config_error("log.level must be one of debug, info, warn, error");
  std::set<std::string> names;
  for (const auto& up : cfg.upstreams) {
    if (!names.insert(up.name).second) throw config_error("duplicate upstream '" + up.name + "'");
    if (up.endpoints.empty()) throw config_error("upstream '" + up.name + "' has no endpoint");
    for (const auto& e : up.endpoints)
      if (e.tls != up.endpoints.front().tls)
        throw config_error("upstream '" + up.name + "' mixes http:// and https:// endpoints");
  }
  if (cfg.upstreams.empty())
    throw config_error("no upstream: pass --upstream URL or configure upstreams");
  if (cfg.routes.empty()) {
    if (cfg.upstreams.size() != 1)
      throw config_error("several upstreams but no routes: add routes with prefix and upstream");
    cfg.routes.push_back({cfg.upstreams[0].name, "/", cfg.upstreams[0].name, 0});
  }
  for (auto& up : cfg.upstreams) {
    if (up.fallback.empty()) continue;
    auto it = std::find_if(cfg.upstreams.begin(), cfg.upstreams.end(),
                           [&](const upstream_config& u) { return u.name == up.fallback; });
    if (it == cfg.upstreams.end())
      throw config_error("upstream '" + up.name + "' falls back to unknown upstream '" +
                         up.fallback + "'");
    if (it->name == up.name) throw config_error("upstream '" + up.name + "' falls back to itself");
    up.fallback_index = static_cast<std::size_t>(it - cfg.upstreams.begin());
  }
  std::set<std::string> prefixes;
  for (auto& r : cfg.routes) {
    if (r.prefix.empty() || r.prefix.front() != '/')
      throw config_error("route prefix '" + r.prefix + "' must start with '/'");
    if (!prefixes.insert(r.prefix).second)
      throw config_error("duplicate route prefix '" + r.prefix + "'");
    auto it = std::find_if(cfg.upstreams.begin(), cfg.upstreams.end(),
                           [&](const upstream_config& u) { return u.name == r.upstream; });
    if (it == cfg.upstreams.end())
      throw config_error("route '" + r.name + "' names unknown upstream '" + r.upstream + "'");
    r.upstream_index = static_cast<std::size_t>(it - cfg.upstreams.begin());
  }
  std::stable_sort(cfg.routes.begin(), cfg.routes.end(),
                   [](const route_config& a, const route_config& b) {
                     return a.prefix.size() > b.prefix.size();
                   });
  validate_governance(cfg);
  validate_otel(cfg);
  // The semantic-convention histograms are kept by their own hook: asking for them brings it in.
  if (cfg.metrics.semconv &&
      std::find(cfg.hooks.begin(), cfg.hooks.end(), "gen_ai_metrics") == cfg.hooks.end())
    cfg.hooks.push_back("gen_ai_metrics");
  if (cfg.limits.max_request_header_bytes < 1024)
    throw config_error("limits.max_request_header_bytes must be at least 1024");
  if (cfg.limits.max_response_header_bytes < 1024)
    throw config_error("limits.max_response_header_bytes must be at least 1024");
  if (cfg.limits.max_connections == 0) throw config_error("limits.max_connections must be > 0");
  if (cfg.timeouts.connect.count() == 0 || cfg.timeouts.upstream_header.count() == 0 ||
      cfg.timeouts.idle.count() == 0 || cfg.timeouts.client_header.count() == 0 ||
      cfg.timeouts.client_write.count() == 0)
    throw config_error("timeouts other than total_ms must be > 0");
  if (cfg.threads > 1024) throw config_error("threads must be at most 1024");
  if (cfg.trace.sample_rate < 0 || cfg.trace.sample_rate > 1)
    throw config_error("trace.sample_rate must be between 0 and 1");
  if (cfg.trace.max_files == 0 || cfg.trace.queue_records == 0 || cfg.trace.max_file_bytes < 4096)
    throw config_error(
        "trace.max_files and trace.queue_records must be > 0, trace.max_file_bytes >= 4096");
  if (cfg.max_event_bytes < 1024) throw config_error("max_event_bytes must be at least 1024");
  if (cfg.metrics.window.count() < 1 || cfg.metrics.window.count() > 3600)
    throw config_error("metrics.window_s must be between 1 and 3600");
}

const route_config* match_route(const config& cfg, std::string_view path) {
  for (const auto& r : cfg.routes)
    if (path.starts_with(r.prefix)) return &r;
  return nullptr;
}

std::string restart_only_changes(const config& running, const config& next) {
  std::string out;
  const auto differs = [&out](bool changed, const char* key) {
    if (!changed) return;
    if (!out.empty()) out += ", ";
    out += key;
  };
  differs(running.listen != next.listen, "listen");
  differs(running.admin != next.admin, "admin");
  differs(running.admin_token != next.admin_token, "admin_token_file");
  differs(running.threads != next.threads, "threads");
  differs(running.reuse_port != next.reuse_port, "reuse_port");
  differs(running.limits.max_connections != next.limits.max_connections, "limits.max_connections");
  differs(running.metrics != next.metrics, "metrics");
  differs(running.tenants != next.tenants, "tenants");
  differs(running.trace != next.trace, "trace");
  return out;
}

}  // namespace tokentap::config
