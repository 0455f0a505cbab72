#pragma once
// Where a stream's state lies that its next event touches first, gathered after an event while
// that state is in the cache, so that the relay can prefetch it when the next read is ready.
// With hundreds of open streams an event finds its stream's state out of cache, and
// the pieces are reached through one another (relay → tap → hooks → parsers), so each miss
// waited for the one before: ~10 of them one after the other per event.  Prefetched together
// before the read's system calls, they arrive while the kernel works.
//
// A list of up to `capacity` runs of cache lines, one word each (the line's address, the run's
// length in its low bits).  Pure: no I/O, no allocation; a full list drops what does not fit.
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>

namespace tokentap::parsers {

class hot_lines {
 public:
  static constexpr std::size_t line = 64;
  static constexpr std::size_t capacity = 23;   // with the count: three cache lines
  static constexpr std::size_t max_run = line;  // lines per entry (the low bits hold the length)

  /// The cache lines of [p, p + bytes): one entry (two or more when over max_run lines).
  /// Ignores null and empty ranges.
  void add(const void* p, std::size_t bytes = 1) noexcept {
    if (p == nullptr || bytes == 0 || n_ == capacity) return;
    const auto first = reinterpret_cast<std::uintptr_t>(p) & ~std::uintptr_t{line - 1};
    const auto last = (reinterpret_cast<std::uintptr_t>(p) + bytes - 1) & ~std::uintptr_t{line - 1};
    const auto lines = (last - first) / line + 1;
    if (lines <= max_run) {  // every range a stream lists
      runs_[n_++] = first | (lines - 1);
      return;
    }
    add_long(first, last);
  }

  /// The cache lines of [begin, end): a run of members is `add_range(&first, &last + 1)`.
  /// Ignores an empty or inverted range (never a reference member's referent as `last`).
  void add_range(const void* begin, const void* end) noexcept {
    const auto* b = static_cast<const char*>(begin);
    const auto* e = static_cast<const char*>(end);
    if (e > b) add(b, static_cast<std::size_t>(e - b));
  }

  void clear() noexcept { n_ = 0; }
  std::size_t size() const noexcept { return n_; }

  /// Lines listed, in order (what prefetch() touches).
  template <class F>
  void for_each_line(F&& f) const {
    for (std::size_t i = 0; i < n_; ++i) {
      const auto base = runs_[i] & ~std::uintptr_t{line - 1};
      const auto lines = (runs_[i] & (line - 1)) + 1;
      for (std::uintptr_t k = 0; k < lines; ++k) f(reinterpret_cast<const void*>(base + k * line));
    }
  }

  /// Starts loading every listed line for writing (the state is updated), without waiting.
  void prefetch() const noexcept {
    for_each_line([](const void* p) { __builtin_prefetch(p, 1, 3); });
  }

 private:
  void add_long(std::uintptr_t first, std::uintptr_t last) noexcept {
    for (auto at = first; at <= last && n_ < capacity; at += max_run * line) {
      const auto lines = std::min<std::uintptr_t>((last - at) / line + 1, max_run);
      runs_[n_++] = at | (lines - 1);
    }
  }

  std::array<std::uintptr_t, capacity> runs_{};
  std::uint8_t n_ = 0;
};

}  // namespace tokentap::parsers
