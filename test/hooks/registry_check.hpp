#pragma once
// A configuration written as a file, checked as start-up checks it (config/, then every hook's
// sections through the built-in registry): the one-line error it is refused with, or "".
#include <string>

#include "config/config.hpp"
#include "hooks/registry.hpp"

namespace tokentap::hooks::test {

inline std::string check_error(const std::string& yaml) {
  try {
    const auto cfg = config::parse_config(yaml);
    builtin_hooks().check(cfg);
  } catch (const config::config_error& e) {
    return e.what();
  }
  return "";
}

}  // namespace tokentap::hooks::test
