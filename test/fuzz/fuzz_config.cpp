// Config loader.  Invariants: any text either loads or fails with config_error carrying a one-line,
// non-empty reason (what the CLI prints before exiting 2); nothing else escapes (no YAML or
// standard-library exception reaches the user raw); a loaded configuration validates again
// unchanged (validate() is idempotent) and routes every path it claims to.
#include <cstring>
#include <exception>

#include "config/config.hpp"
#include "test/fuzz/fuzz_common.hpp"

using namespace tokentap;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size > 16384) return 0;  // configuration files are small; keep iterations fast
  const std::string text(reinterpret_cast<const char*>(data), size);
  config::config cfg;
  try {
    cfg = config::parse_config(text, true);
  } catch (const config::config_error& e) {
    const std::string_view what = e.what();
    FUZZ_CHECK(!what.empty());
    FUZZ_CHECK(what.find('\n') == std::string_view::npos);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "unexpected exception: %s\n", e.what());
    FUZZ_CHECK(!"only config_error may escape parse_config");
  }
  auto again = cfg;
  try {
    config::validate(again);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "validate() not idempotent: %s\n", e.what());
    FUZZ_CHECK(!"a validated configuration must validate again");
  }
  FUZZ_CHECK(again.routes.size() == cfg.routes.size());
  for (std::size_t i = 0; i < cfg.routes.size(); ++i) {
    FUZZ_CHECK(again.routes[i].prefix == cfg.routes[i].prefix);
    const auto* r = config::match_route(cfg, cfg.routes[i].prefix);
    FUZZ_CHECK(r != nullptr);
    FUZZ_CHECK(cfg.routes[i].prefix.compare(0, r->prefix.size(), r->prefix) == 0);
  }
  return 0;
}
