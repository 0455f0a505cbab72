#pragma once
// What the config readers share (config.cpp: the proxy, governance.cpp: DESIGN.md §11): reading
// YAML nodes, every error a config_error naming the node's line.  Private to the config target.
#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

#include "config/config.hpp"

namespace tokentap::config::yaml_reader {

[[noreturn]] void fail(const YAML::Node& n, const std::string& what);
/// A mapping key as text (a YAML key may itself be a mapping or a list: `? [a, b]: 1`).
std::string key_name(const YAML::Node& k);
/// Fails unless `map` is a mapping whose keys are all `allowed`.
void check_keys(const YAML::Node& map, std::initializer_list<std::string_view> allowed,
                std::string_view where);
std::uint64_t non_negative(const YAML::Node& n, std::string_view key);
host_port address(const YAML::Node& n, std::string_view key);

template <class T>
T scalar(const YAML::Node& n, std::string_view key) {
  try {
    return n.as<T>();
  } catch (const YAML::Exception&) {
    fail(n, "invalid value for '" + std::string(key) + "'");
  }
}

/// A node as a section (config/section.hpp): the same tree, each node with its line.
section section_of(const YAML::Node& n);

/// The proxy's governance sections (DESIGN.md §11): tenants, shared_state, faults — read into
/// `cfg`, then checked against the rest of it by validate_governance.  (`admission:`,
/// `priority:` and `shed:` are the admission hook's own.)
void read_governance(const YAML::Node& root, config& cfg);
void validate_governance(config& cfg);

/// The `otel:` section (DESIGN.md §12), and its checks (which bring the `otel` hook).
void read_otel(const YAML::Node& root, config& cfg);
void validate_otel(config& cfg);

}  // namespace tokentap::config::yaml_reader
