#pragma once
// The timing hook: stamps every token event with the monotonic time its bytes were read from the
// upstream and derives the exchange's latency figures (stream_info::timing).
#include "hooks/hook.hpp"

namespace tokentap::hooks {

class timing_hook_factory final : public hook_factory {
 public:
  explicit timing_hook_factory(const config::timing_config& cfg) : cfg_(cfg) {}
  std::unique_ptr<hook> create() override;

 private:
  config::timing_config cfg_;
};

/// Nearest-rank quantiles of a sample (reordered in place).
timing_summary::quantiles quantiles_of(std::vector<double>& v);

class hook_registry;
/// Registers "timing".
void register_timing(hook_registry& r);

}  // namespace tokentap::hooks
