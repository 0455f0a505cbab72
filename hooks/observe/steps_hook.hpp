#pragma once
// The steps hook: tags reasoning steps as tokens arrive (parsers::step_tagger) on the reasoning
// channel, or on the content when a response has no reasoning, and fills them into the
// stream_info ("steps") for the metrics and trace hooks.
#include <string>
#include <vector>

#include "config/section.hpp"
#include "hooks/hook.hpp"
#include "parsers/step_tagger.hpp"

namespace tokentap::hooks {

/// The `steps:` section (design/STEPS.md).
struct steps_settings {
  bool replace_triggers = false;  ///< true: the lists below replace the defaults, else add
  std::vector<std::string> step, conclusion, verification, backtrack;
  std::size_t max_steps = 4096;  ///< per response
  /// Reads `steps: {max_steps, triggers: {replace, step, conclusion, verification, backtrack}}`
  /// (absent: the defaults).
  static steps_settings parse(const config::section& s);
};

class steps_hook_factory final : public hook_factory {
 public:
  explicit steps_hook_factory(const steps_settings& settings = {});
  std::unique_ptr<hook> create() override;

 private:
  std::shared_ptr<const parsers::step_tagger::compiled> compiled_;
  std::size_t max_steps_;
};

class hook_registry;
/// Registers "steps".
void register_steps(hook_registry& r);

}  // namespace tokentap::hooks
