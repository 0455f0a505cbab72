#include "config/section.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>

#include "config/config.hpp"

namespace tokentap::config {

section::section(kind k, int line) : kind_(k), line_(line) {}

section section::null_at(int line) {
  return section(kind::null, line);
}

section section::scalar_at(std::string text, int line) {
  section s(kind::scalar, line);
  s.text_ = std::move(text);
  return s;
}

section section::list_at(std::vector<section> items, int line) {
  section s(kind::list, line);
  s.items_ = std::move(items);
  return s;
}

section section::map_at(std::vector<member> members, int line) {
  section s(kind::map, line);
  s.members_ = std::move(members);
  return s;
}

const section& section::operator[](std::string_view key) const noexcept {
  static const section absent;
  for (const auto& m : members_)
    if (m.key == key) return m.value;
  return absent;
}

bool section::operator==(const section& o) const noexcept {
  return kind_ == o.kind_ && text_ == o.text_ && items_ == o.items_ && members_ == o.members_;
}

void section::fail(const std::string& what) const {
  fail_at(line_, what);
}

void section::check_keys(std::initializer_list<std::string_view> allowed,
                         std::string_view where) const {
  if (kind_ != kind::map) fail(std::string(where) + " must be a mapping");
  for (const auto& m : members_) {
    if (std::find(allowed.begin(), allowed.end(), m.key) != allowed.end()) continue;
    fail_at(m.key_line, "unknown key '" + m.key + "' in " + std::string(where));
  }
}

std::uint64_t section::non_negative(std::string_view key) const {
  if (kind_ != kind::scalar) fail("invalid value for '" + std::string(key) + "'");
  std::string_view t = text_;
  if (t.starts_with('-')) {
    std::int64_t v = 0;
    const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
    if (ec == std::errc() && end == t.data() + t.size())
      fail("'" + std::string(key) + "' must not be negative");
    fail("invalid value for '" + std::string(key) + "'");
  }
  if (t.starts_with('+')) t.remove_prefix(1);
  std::uint64_t v = 0;
  const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  if (t.empty() || ec != std::errc() || end != t.data() + t.size() ||
      v > static_cast<std::uint64_t>(INT64_MAX))
    fail("invalid value for '" + std::string(key) + "'");
  return v;
}

double section::number(std::string_view key) const {
  if (kind_ != kind::scalar) fail("invalid value for '" + std::string(key) + "'");
  std::string_view t = text_;
  if (t.starts_with('+')) t.remove_prefix(1);
  double v = 0;
  const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  if (t.empty() || ec != std::errc() || end != t.data() + t.size() || !std::isfinite(v))
    fail("invalid value for '" + std::string(key) + "'");
  return v;
}

bool section::boolean(std::string_view key) const {
  if (kind_ == kind::scalar) {
    for (std::string_view yes :
         {"true", "True", "TRUE", "yes", "Yes", "YES", "on", "On", "ON", "y", "Y"})
      if (text_ == yes) return true;
    for (std::string_view no :
         {"false", "False", "FALSE", "no", "No", "NO", "off", "Off", "OFF", "n", "N"})
      if (text_ == no) return false;
  }
  fail("invalid value for '" + std::string(key) + "'");
}

std::string section::string(std::string_view key) const {
  if (kind_ != kind::scalar) fail("invalid value for '" + std::string(key) + "'");
  return text_;
}

std::vector<std::string> section::strings(std::string_view key) const {
  if (kind_ != kind::list) fail(std::string(key) + " must be a list");
  std::vector<std::string> out;
  out.reserve(items_.size());
  for (const auto& item : items_) out.push_back(item.string(key));
  return out;
}

}  // namespace tokentap::config
