#include "config/log.hpp"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <ctime>
#include <string>

namespace tokentap::log {

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
    const auto now = std::chrono::system_clock::now();
    const auto t = std::chrono::system_clock::to_time_t(now);
    const auto us =
        std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch()).count() %
        1000000;
    std::tm tm{};
    gmtime_r(&t, &tm);
    char stamp[40];
    std::snprintf(stamp, sizeof stamp, "%04d-%02d-%02dT%02d:%02d:%02d.%06lldZ", tm.tm_year + 1900,
                  tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                  static_cast<long long>(us));
    std::string out;
    out.reserve(msg.size() + 48);
    out.append(stamp).append(" ").append(names[static_cast<int>(l)]).append(" ");
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

}  // namespace tokentap::log
