#pragma once
// A top-level part of the configuration file that config/ does not read itself: a hook's own
// settings (`timing:`, `steps:`, `cache:`), kept as the file wrote it — a tree of scalars, lists
// and mappings, without yaml-cpp — for the hook to read (hooks/registry.hpp, add_with_settings).
// Every node keeps its line, so a hook's errors name it as config/'s own do.
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

namespace tokentap::config {

class section {
 public:
  enum class kind : std::uint8_t { absent, null, scalar, list, map };
  struct member;

  section() = default;  ///< absent: the file does not have it
  static section null_at(int line);
  static section scalar_at(std::string text, int line);
  static section list_at(std::vector<section> items, int line);
  static section map_at(std::vector<member> members, int line);

  kind type() const noexcept { return kind_; }
  explicit operator bool() const noexcept { return kind_ != kind::absent; }
  /// 1-based; 0 when unknown (absent, or built without a file).
  int line() const noexcept { return line_; }
  const std::string& text() const noexcept { return text_; }  ///< a scalar's
  const std::vector<section>& items() const noexcept { return items_; }
  const std::vector<member>& members() const noexcept { return members_; }
  /// A mapping's member `key`, or an absent section.
  const section& operator[](std::string_view key) const noexcept;
  /// The same content, lines aside (what a reload compares).
  bool operator==(const section& o) const noexcept;

  // Readers for a hook's parse: each throws config_error naming this node's line.  `key` is the
  // name the message gives the value.
  [[noreturn]] void fail(const std::string& what) const;
  /// Fails unless this is a mapping whose keys are all `allowed` (the first other key named).
  void check_keys(std::initializer_list<std::string_view> allowed, std::string_view where) const;
  /// A whole number >= 0 (decimal, as the rest of the file's numbers are written).
  std::uint64_t non_negative(std::string_view key) const;
  /// A finite number (`3`, `0.9`, `1e-3`).
  double number(std::string_view key) const;
  /// YAML's booleans: true/false, yes/no, on/off, y/n (any case as YAML 1.1 writes them).
  bool boolean(std::string_view key) const;
  std::string string(std::string_view key) const;
  /// A list of scalars.
  std::vector<std::string> strings(std::string_view key) const;

 private:
  section(kind k, int line);  // (out of line: `member` is complete only after the class)

  kind kind_ = kind::absent;
  int line_ = 0;
  std::string text_;
  std::vector<section> items_;
  std::vector<member> members_;
};

struct section::member {
  std::string key;
  int key_line = 0;
  section value;
  bool operator==(const member& o) const noexcept { return key == o.key && value == o.value; }
};

}  // namespace tokentap::config
