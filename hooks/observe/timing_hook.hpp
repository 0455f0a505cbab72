#pragma once
// The timing hook: stamps every token event with the monotonic time its bytes were read from the
// upstream and derives the exchange's latency figures (stream_info::timing).
#include <chrono>

#include "config/section.hpp"
#include "hooks/hook.hpp"

namespace tokentap::hooks {

/// The `timing:` section.
struct timing_settings {
  std::chrono::milliseconds stall_threshold{1000};  ///< a longer gap between tokens is a stall
  /// Per stream and series (all gaps, content, reasoning, per-read overhead): values kept exactly
  /// for the stream's quantiles and the trace's itl_values_ms; past this many, quantiles come
  /// from a 2 % sketch, so a stream's memory is bounded however long it runs.
  std::size_t exact_samples = 4096;
  /// Reads `timing: {stall_threshold_ms, exact_samples}` (absent: the defaults).
  static timing_settings parse(const config::section& s);
};

class timing_hook_factory final : public hook_factory {
 public:
  explicit timing_hook_factory(const timing_settings& settings = {}) : settings_(settings) {}
  std::unique_ptr<hook> create() override;

 private:
  timing_settings settings_;
};

/// Nearest-rank quantiles of a sample (reordered in place).
timing_summary::quantiles quantiles_of(std::vector<double>& v);

class hook_registry;
/// Registers "timing".
void register_timing(hook_registry& r);

}  // namespace tokentap::hooks
