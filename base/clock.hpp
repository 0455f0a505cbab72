#pragma once
// The clocks every layer reads: the steady clock as the integers the taps, windows and
// balancers keep (ns, whole seconds), and the wall clock as trace records and logs write it.
#include <chrono>
#include <cstdint>

namespace tokentap::base {

/// Steady-clock time in nanoseconds (the timestamps handed to taps, ejection deadlines).
inline std::int64_t mono_now_ns() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

/// Steady-clock time in whole seconds: the second a sliding window's figures go to.
inline std::int64_t steady_seconds() noexcept {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

/// A steady time point in whole seconds (as steady_seconds() counts them).
inline std::int64_t seconds_of(std::chrono::steady_clock::time_point t) noexcept {
  return std::chrono::duration_cast<std::chrono::seconds>(t.time_since_epoch()).count();
}

/// Wall-clock time in microseconds since the Unix epoch.
inline std::int64_t wall_now_us() noexcept {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace tokentap::base
