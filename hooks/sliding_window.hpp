#pragma once
// A sliding window of per-second figures (the stats window of /api/stats, a shed rule's window):
// a ring of one slot per second of the window, each stamped with the second it holds.  Recording
// goes to the current second's slot, cleared when it last held an older second; reading visits
// the seconds still in the window.  Not thread safe: its owner's lock guards it.
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace tokentap::hooks {

/// `n` over `seconds`, per second; 0 over no time.
inline double per_second(double n, double seconds) noexcept {
  return seconds > 0 ? n / seconds : 0;
}

template <class Figures>
class sliding_window {
 public:
  /// A window of `seconds` seconds (at least one).
  explicit sliding_window(std::int64_t seconds)
      : ring_(static_cast<std::size_t>(std::max<std::int64_t>(1, seconds))) {}

  /// The figures of second `now` (≥ 0), cleared if their slot held an older second.
  Figures& at(std::int64_t now) {
    auto& s = ring_[static_cast<std::size_t>(now) % ring_.size()];
    if (s.sec != now) {
      s.figures = Figures{};
      s.sec = now;
    }
    return s.figures;
  }

  /// Calls f(second, figures) for each second of (now - seconds(), now] that has figures.
  template <class F>
  void for_each(std::int64_t now, F&& f) const {
    const auto n = seconds();
    for (const auto& s : ring_)
      if (s.sec >= 0 && s.sec > now - n && s.sec <= now) f(s.sec, s.figures);
  }

  std::int64_t seconds() const noexcept { return static_cast<std::int64_t>(ring_.size()); }

 private:
  struct slot {
    std::int64_t sec = -1;
    Figures figures{};
  };
  std::vector<slot> ring_;
};

}  // namespace tokentap::hooks
