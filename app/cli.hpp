#pragma once
// The binary's command-line front end: `tokentap <subcommand> [flags]` (DESIGN.md §3).
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tokentap::app {

/// A usage error: printed as one line, exit status 2.
struct usage_error {
  std::string message;
};

/// Flags of one subcommand: `--name value`, `--name=value`, or a bare `--name` for booleans.
class flags {
 public:
  /// `valued` lists flags that take a value, `booleans` those that do not.  Positional arguments
  /// are collected in order.  Unknown flags are usage errors.
  static flags parse(std::string_view command, const std::vector<std::string>& args,
                     std::vector<std::string_view> valued, std::vector<std::string_view> booleans);

  std::optional<std::string> get(std::string_view name) const;
  bool has(std::string_view name) const { return values_.count(std::string(name)) > 0; }
  const std::vector<std::string>& positional() const { return positional_; }

  double number(std::string_view name, double fallback, double min, double max) const;
  std::string_view command() const { return command_; }

 private:
  std::string command_;
  std::map<std::string, std::string> values_;
  std::vector<std::string> positional_;
};

int run(int argc, char** argv);

}  // namespace tokentap::app
