#pragma once
// The trace hook: one JSON line per finished exchange (DESIGN.md §5), with every upstream read's
// exact bytes and arrival offset so `replay serve` can reproduce the response byte for byte with
// its original timing.  Secrets were redacted by the proxy before the views reached any hook.
#include <memory>

#include "hooks/export/trace_writer.hpp"
#include "hooks/hook.hpp"

namespace tokentap::hooks {

class trace_hook_factory final : public hook_factory {
 public:
  explicit trace_hook_factory(const config::trace_config& cfg);
  std::unique_ptr<hook> create() override;
  trace_writer& writer() noexcept { return *writer_; }
  std::shared_ptr<trace_writer> writer_ptr() const noexcept { return writer_; }

 private:
  config::trace_config cfg_;
  std::shared_ptr<trace_writer> writer_;
};

class hook_registry;
class metrics_registry;
/// Registers "trace" (skipped while no trace directory is configured).  One trace writer per
/// registry and trace configuration: a reload that leaves `trace:` as it was keeps writing the
/// same files through the same writer.
void register_trace(hook_registry& r, std::shared_ptr<metrics_registry> metrics);

}  // namespace tokentap::hooks
