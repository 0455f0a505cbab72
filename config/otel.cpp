#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>

#include "config/yaml_reader.hpp"

// The `otel:` section (DESIGN.md §12) and the OTEL_* environment variables.
namespace tokentap::config {

namespace {

// The traces URL of a base endpoint: a URL without a path gets /v1/traces.
std::string traces_url(std::string endpoint) {
  const auto scheme = endpoint.find("://");
  const auto path = endpoint.find('/', scheme == std::string::npos ? 0 : scheme + 3);
  if (path == std::string::npos) return endpoint + "/v1/traces";
  if (path + 1 == endpoint.size()) return endpoint + "v1/traces";
  return endpoint;
}

bool header_name(std::string_view n) {
  return !n.empty() && std::all_of(n.begin(), n.end(), [](unsigned char c) {
    return std::isalnum(c) ||
           std::string_view("!#$%&'*+-.^_`|~").find(static_cast<char>(c)) != std::string_view::npos;
  });
}

bool header_value(std::string_view v) {
  return std::none_of(v.begin(), v.end(), [](unsigned char c) {
    return c == '\r' || c == '\n' || c == 0 || c == 0x7f || (c < 0x20 && c != '\t');
  });
}

std::string trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return std::string(s);
}

// %XX escapes of the W3C baggage octets, as OTEL_EXPORTER_OTLP_HEADERS values use them.
std::string percent_decoded(std::string_view s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && std::isxdigit(static_cast<unsigned char>(s[i + 1])) &&
        std::isxdigit(static_cast<unsigned char>(s[i + 2]))) {
      out.push_back(static_cast<char>(std::stoi(std::string(s.substr(i + 1, 2)), nullptr, 16)));
      i += 2;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

otel_config::protocol_kind protocol_of(std::string_view v, const std::string& where) {
  if (v == "http/protobuf") return otel_config::protocol_kind::protobuf;
  if (v == "http/json") return otel_config::protocol_kind::json;
  throw config_error(where + " must be http/protobuf or http/json (grpc is not supported), not '" +
                     std::string(v) + "'");
}

otel_config::compression_kind compression_of(std::string_view v, const std::string& where) {
  if (v == "gzip") return otel_config::compression_kind::gzip;
  if (v == "none") return otel_config::compression_kind::none;
  throw config_error(where + " must be gzip or none, not '" + std::string(v) + "'");
}

// `key=value` pairs separated by commas, values %-encoded (W3C baggage octets), as
// OTEL_EXPORTER_OTLP_HEADERS and OTEL_RESOURCE_ATTRIBUTES write them; a key `into` already has
// (the file's) is kept.
void add_pairs(std::vector<std::pair<std::string, std::string>>& into, const std::string& list,
               const char* name) {
  std::size_t at = 0;
  while (at < list.size()) {
    auto end = list.find(',', at);
    if (end == std::string::npos) end = list.size();
    const std::string_view item(list.data() + at, end - at);
    at = end + 1;
    if (trim(item).empty()) continue;
    const auto eq = item.find('=');
    if (eq == std::string_view::npos || trim(item.substr(0, eq)).empty())
      throw config_error(std::string(name) + " must be key=value pairs separated by commas");
    auto key = trim(item.substr(0, eq));
    auto value = percent_decoded(trim(item.substr(eq + 1)));
    const bool set =
        std::any_of(into.begin(), into.end(), [&key](const auto& kv) { return kv.first == key; });
    if (!set) into.emplace_back(std::move(key), std::move(value));
  }
}

}  // namespace

std::string_view to_string(otel_config::protocol_kind p) noexcept {
  return p == otel_config::protocol_kind::json ? "http/json" : "http/protobuf";
}

void apply_otel_environment(otel_config& otel, const std::function<const char*(const char*)>& env) {
  const auto get = [&env](const char* name) -> std::string {
    const char* v = env(name);
    return v == nullptr ? std::string() : trim(v);
  };
  const otel_config defaults;
  if (otel.endpoint.empty()) {
    if (auto v = get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"); !v.empty())
      otel.endpoint = v;
    else if (auto base = get("OTEL_EXPORTER_OTLP_ENDPOINT"); !base.empty())
      otel.endpoint = base + (base.ends_with('/') ? "" : "/") + "v1/traces";
  }
  if (otel.protocol == defaults.protocol) {
    auto v = get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL");
    if (v.empty()) v = get("OTEL_EXPORTER_OTLP_PROTOCOL");
    if (!v.empty()) otel.protocol = protocol_of(v, "OTEL_EXPORTER_OTLP_PROTOCOL");
  }
  for (const char* name : {"OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS"})
    add_pairs(otel.headers, get(name), name);
  // (service.name there is OTEL_SERVICE_NAME's or the file's to say: below.)
  add_pairs(otel.resource_attributes, get("OTEL_RESOURCE_ATTRIBUTES"), "OTEL_RESOURCE_ATTRIBUTES");
  if (otel.compression == defaults.compression) {
    auto v = get("OTEL_EXPORTER_OTLP_TRACES_COMPRESSION");
    if (v.empty()) v = get("OTEL_EXPORTER_OTLP_COMPRESSION");
    if (!v.empty()) otel.compression = compression_of(v, "OTEL_EXPORTER_OTLP_COMPRESSION");
  }
  if (otel.service_name == defaults.service_name)
    if (auto v = get("OTEL_SERVICE_NAME"); !v.empty()) otel.service_name = v;
  // service.name in OTEL_RESOURCE_ATTRIBUTES names the service when neither the file nor
  // OTEL_SERVICE_NAME does; it is service_name, not a second attribute.
  auto& attrs = otel.resource_attributes;
  if (auto it = std::find_if(attrs.begin(), attrs.end(),
                             [](const auto& kv) { return kv.first == "service.name"; });
      it != attrs.end()) {
    if (otel.service_name == defaults.service_name && !it->second.empty())
      otel.service_name = it->second;
    attrs.erase(it);
  }
  if (otel.export_timeout == defaults.export_timeout) {
    auto v = get("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT");
    if (v.empty()) v = get("OTEL_EXPORTER_OTLP_TIMEOUT");
    if (!v.empty()) {
      char* end = nullptr;
      const auto n = std::strtoll(v.c_str(), &end, 10);
      if (end == nullptr || *end != '\0' || n <= 0)
        throw config_error("OTEL_EXPORTER_OTLP_TIMEOUT must be a positive number of milliseconds");
      otel.export_timeout = ms(n);
    }
  }
  if (otel.sample_rate == defaults.sample_rate) {
    const auto sampler = get("OTEL_TRACES_SAMPLER");
    const auto arg = get("OTEL_TRACES_SAMPLER_ARG");
    if ((sampler == "traceidratio" || sampler == "parentbased_traceidratio") && !arg.empty()) {
      char* end = nullptr;
      const double r = std::strtod(arg.c_str(), &end);
      if (end == nullptr || *end != '\0' || !(r >= 0 && r <= 1))
        throw config_error("OTEL_TRACES_SAMPLER_ARG must be a ratio from 0 to 1");
      otel.sample_rate = r;
    } else if (sampler == "always_off" || sampler == "parentbased_always_off") {
      otel.sample_rate = 0;
    }
  }
}

namespace yaml_reader {

void read_otel(const YAML::Node& root, config& cfg) {
  const auto& o = root["otel"];
  if (!o) return;
  check_keys(o,
             {"endpoint", "protocol", "compression", "headers", "service_name",
              "resource_attributes", "sample_rate", "capture_content", "queue_spans", "batch_spans",
              "batch_delay_ms", "export_timeout_ms"},
             "otel");
  auto& c = cfg.otel;
  if (o["endpoint"]) c.endpoint = traces_url(scalar<std::string>(o["endpoint"], "endpoint"));
  if (o["protocol"]) {
    try {
      c.protocol = protocol_of(scalar<std::string>(o["protocol"], "protocol"), "otel.protocol");
    } catch (const config_error& e) {
      fail(o["protocol"], e.what());
    }
  }
  if (const auto& h = o["headers"]) {
    if (!h.IsMap()) fail(h, "otel.headers must be a mapping of header name -> value");
    for (const auto& kv : h) {
      auto name = key_name(kv.first);
      auto value = scalar<std::string>(kv.second, name);
      if (!header_name(name) || !header_value(value))
        fail(kv.second, "otel.headers: '" + name + "' is not a valid header");
      c.headers.emplace_back(std::move(name), std::move(value));
    }
  }
  if (o["service_name"]) c.service_name = scalar<std::string>(o["service_name"], "service_name");
  if (o["compression"]) {
    try {
      c.compression =
          compression_of(scalar<std::string>(o["compression"], "compression"), "otel.compression");
    } catch (const config_error& e) {
      fail(o["compression"], e.what());
    }
  }
  if (const auto& r = o["resource_attributes"]) {
    if (!r.IsMap()) fail(r, "otel.resource_attributes must be a mapping of attribute -> value");
    for (const auto& kv : r) {
      auto key = key_name(kv.first);
      if (key == "service.name")
        fail(kv.first, "otel.resource_attributes: set service_name instead");
      c.resource_attributes.emplace_back(std::move(key), scalar<std::string>(kv.second, key));
    }
  }
  if (o["sample_rate"]) {
    c.sample_rate = scalar<double>(o["sample_rate"], "sample_rate");
    if (!(c.sample_rate >= 0 && c.sample_rate <= 1))
      fail(o["sample_rate"], "otel.sample_rate must be from 0 to 1");
  }
  if (o["capture_content"])
    c.capture_content = scalar<bool>(o["capture_content"], "capture_content");
  if (o["queue_spans"]) c.queue_spans = non_negative(o["queue_spans"], "queue_spans");
  if (o["batch_spans"]) c.batch_spans = non_negative(o["batch_spans"], "batch_spans");
  if (o["batch_delay_ms"]) c.batch_delay = ms(non_negative(o["batch_delay_ms"], "batch_delay_ms"));
  if (o["export_timeout_ms"])
    c.export_timeout = ms(non_negative(o["export_timeout_ms"], "export_timeout_ms"));
}

void validate_otel(config& cfg) {
  auto& c = cfg.otel;
  if (c.endpoint.empty()) return;
  std::string err;
  const auto u = parse_url(c.endpoint, err);
  if (!u) throw config_error("otel.endpoint: " + err);
  if (u->base_path.empty()) c.endpoint = traces_url(c.endpoint);
  if (c.queue_spans == 0 || c.batch_spans == 0 || c.batch_spans > c.queue_spans)
    throw config_error("otel: batch_spans must be from 1 to queue_spans");
  if (c.batch_delay.count() <= 0 || c.export_timeout.count() <= 0)
    throw config_error("otel: batch_delay_ms and export_timeout_ms must be positive");
  for (const auto& [name, value] : c.headers)
    if (!header_name(name) || !header_value(value))
      throw config_error("otel: '" + name + "' is not a valid header");
  if (c.service_name.empty()) throw config_error("otel.service_name must not be empty");
  // Spans are made by the `otel` hook: configuring an endpoint brings it in.
  if (std::find(cfg.hooks.begin(), cfg.hooks.end(), "otel") == cfg.hooks.end())
    cfg.hooks.push_back("otel");
}

}  // namespace yaml_reader
}  // namespace tokentap::config
