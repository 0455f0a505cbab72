#pragma once
// Minimal leveled logging to stderr: one line per call, written with a single write so lines from
// several threads never interleave.  Callers never pass secrets (headers, keys) to the log.
#include <sstream>
#include <string_view>

namespace tokentap::base::log {

enum class level { debug = 0, info = 1, warn = 2, error = 3 };

void set_level(level l) noexcept;
bool parse_level(std::string_view s, level& out) noexcept;
bool enabled(level l) noexcept;
void write(level l, std::string_view msg) noexcept;

/// Collects one line and writes it on destruction.
class line {
 public:
  explicit line(level l) : level_(l) {}
  ~line() { write(level_, os_.view()); }
  template <class T>
  line& operator<<(const T& v) {
    os_ << v;
    return *this;
  }

 private:
  level level_;
  std::ostringstream os_;
};

/// Turns a logging expression into void, so TT_LOG is a single expression (safe after an `if`).
struct voidify {
  void operator&(const line&) const noexcept {}
};

}  // namespace tokentap::base::log

#define TT_LOG(lvl)                                                  \
  !::tokentap::base::log::enabled(::tokentap::base::log::level::lvl) \
      ? (void)0                                                      \
      : ::tokentap::base::log::voidify() &                           \
            ::tokentap::base::log::line(::tokentap::base::log::level::lvl)
