#include "config/yaml_reader.hpp"

#include <algorithm>

namespace tokentap::config::yaml_reader {

[[noreturn]] void fail(const YAML::Node& n, const std::string& what) {
  fail_at(n.Mark().line + 1, what);
}

std::string key_name(const YAML::Node& k) {
  if (!k.IsScalar()) fail(k, "mapping keys must be plain names");
  return k.Scalar();
}

void check_keys(const YAML::Node& map, std::initializer_list<std::string_view> allowed,
                std::string_view where) {
  if (!map.IsMap()) fail(map, std::string(where) + " must be a mapping");
  for (const auto& kv : map) {
    const auto key = key_name(kv.first);
    if (std::find(allowed.begin(), allowed.end(), key) == allowed.end())
      fail(kv.first, "unknown key '" + key + "' in " + std::string(where));
  }
}

std::uint64_t non_negative(const YAML::Node& n, std::string_view key) {
  const auto v = scalar<std::int64_t>(n, key);
  if (v < 0) fail(n, "'" + std::string(key) + "' must not be negative");
  return static_cast<std::uint64_t>(v);
}

host_port address(const YAML::Node& n, std::string_view key) {
  std::string err;
  auto hp = parse_host_port(scalar<std::string>(n, key), err);
  if (!hp) fail(n, std::string(key) + ": " + err);
  return *hp;
}

section section_of(const YAML::Node& n) {
  const int line = n.Mark().line >= 0 ? n.Mark().line + 1 : 0;
  switch (n.Type()) {
    case YAML::NodeType::Scalar:
      return section::scalar_at(n.Scalar(), line);
    case YAML::NodeType::Sequence: {
      std::vector<section> items;
      for (const auto& item : n) items.push_back(section_of(item));
      return section::list_at(std::move(items), line);
    }
    case YAML::NodeType::Map: {
      std::vector<section::member> members;
      for (const auto& kv : n)
        members.push_back({key_name(kv.first), kv.first.Mark().line + 1, section_of(kv.second)});
      return section::map_at(std::move(members), line);
    }
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      break;
  }
  return section::null_at(line);
}

}  // namespace tokentap::config::yaml_reader
