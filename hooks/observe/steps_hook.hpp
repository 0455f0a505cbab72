#pragma once
// The steps hook: tags reasoning steps as tokens arrive (parsers::step_tagger) on the reasoning
// channel, or on the content when a response has no reasoning, and fills them into the
// stream_info ("steps") for the metrics and trace hooks.
#include "hooks/hook.hpp"
#include "parsers/step_tagger.hpp"

namespace tokentap::hooks {

class steps_hook_factory final : public hook_factory {
 public:
  explicit steps_hook_factory(const config::steps_config& cfg);
  std::unique_ptr<hook> create() override;

 private:
  std::shared_ptr<const parsers::step_tagger::compiled> compiled_;
  std::size_t max_steps_;
};

class hook_registry;
/// Registers "steps".
void register_steps(hook_registry& r);

}  // namespace tokentap::hooks
