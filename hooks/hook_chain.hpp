#pragma once
// The tap the proxy feeds: decodes the forwarded bytes (parsers::stream_decoder) and runs the
// configured hooks in order.  One `hook_chain_factory` per proxy, one chain per exchange.
#include <atomic>
#include <memory>
#include <vector>

#include "hooks/hook.hpp"
#include "hooks/tap.hpp"

namespace tokentap::hooks {

/// Counters of the interception layer (read by the tests and the metrics).
struct chain_stats {
  std::atomic<std::uint64_t> streams{0};
  std::atomic<std::uint64_t> hook_failures{0};      ///< a hook threw and was disabled for a stream
  std::atomic<std::uint64_t> parse_errors[3] = {};  ///< by parsers::parse_stage
  std::atomic<std::uint64_t> stream_errors{0};      ///< provider errors inside 200 streams
};

class hook_chain_factory final : public tap_factory {
 public:
  /// Hooks per chain; factories past it are not used (hook_registry::build gives one per
  /// registered name at most: it refuses a name listed twice).
  static constexpr std::size_t max_hooks = 64;
  hook_chain_factory(const config::config& cfg, std::vector<std::shared_ptr<hook_factory>> hooks);
  std::unique_ptr<stream_tap> create() override;
  const chain_stats& stats() const noexcept { return *stats_; }

 private:
  std::size_t max_event_bytes_;
  std::vector<std::shared_ptr<hook_factory>> factories_;
  std::shared_ptr<chain_stats> stats_;
};

}  // namespace tokentap::hooks
