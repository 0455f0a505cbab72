#include "base/log.hpp"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>

#include "base/clock.hpp"
#include "base/json.hpp"

namespace tokentap::base::log {

namespace {
std::atomic<int> g_level{static_cast<int>(level::info)};
constexpr std::string_view names[] = {"debug", "info", "warn", "error"};
}  // namespace

void set_level(level l) noexcept {
  g_level.store(static_cast<int>(l), std::memory_order_relaxed);
}

bool parse_level(std::string_view s, level& out) noexcept {
  for (int i = 0; i < 4; ++i) {
    if (names[i] == s) {
      out = static_cast<level>(i);
      return true;
    }
  }
  return false;
}

bool enabled(level l) noexcept {
  return static_cast<int>(l) >= g_level.load(std::memory_order_relaxed);
}

void write(level l, std::string_view msg) noexcept {
  try {
    std::string out;
    out.reserve(msg.size() + 48);
    json::append_rfc3339_us(out, wall_now_us());  // as the traces' start times
    out.append(" ").append(names[static_cast<int>(l)]).append(" ");
    out.append(msg).push_back('\n');
    // One write(2) per line keeps lines whole across threads.
    std::size_t off = 0;
    while (off < out.size()) {
      const auto n = ::write(STDERR_FILENO, out.data() + off, out.size() - off);
      if (n <= 0) break;
      off += static_cast<std::size_t>(n);
    }
  } catch (...) {
    // Logging must never take the process down.
  }
}

}  // namespace tokentap::base::log
