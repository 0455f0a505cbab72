// The steps hook: its `steps:` section (triggers added to the defaults or replacing them, a cap
// per response), and the steps it fills in — the reasoning's when the response reasons, else the
// content's, the first choice's only.
#include "hooks/observe/steps_hook.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "config/config.hpp"

namespace tokentap::hooks {
namespace {

using parsers::channel;
using parsers::step_kind;

steps_settings parsed(const std::string& yaml) {
  return steps_settings::parse(config::parse_config(yaml, false).hook_section("steps"));
}

// The kinds of the steps a hook built on `settings` tags in `text`, fed token by token.
struct tagged {
  std::vector<step_kind> kinds;
  channel on = channel::content;
};
tagged tag(const steps_settings& settings,
           const std::vector<std::pair<channel, std::string>>& tokens, std::uint32_t choice = 0) {
  steps_hook_factory f(settings);
  auto h = f.create();
  std::int64_t t = 1000;
  for (const auto& [ch, text] : tokens) h->on_token({ch, text, t += 10, true, choice});
  stream_info s;
  h->fill(s);
  tagged out;
  for (const auto& st : s.steps) out.kinds.push_back(st.kind);
  out.on = s.steps_channel;
  EXPECT_EQ(s.step_end_ns.size(), s.steps.size());
  return out;
}

const std::vector<std::pair<channel, std::string>> spanish_reasoning = {
    {channel::reasoning, "Primero, sumo. "},
    {channel::reasoning, "Espera, no. "},
    {channel::reasoning, "Therefore 4."}};

TEST(StepsHook, ItsSectionAddsTriggersToTheDefaultsOrReplacesThem) {
  const auto absent = parsed("{}");
  EXPECT_FALSE(absent.replace_triggers);
  EXPECT_EQ(absent.max_steps, 4096u);
  EXPECT_TRUE(absent.step.empty());

  const auto added = parsed("steps: {triggers: {step: [Primero], backtrack: [Espera]}}");
  EXPECT_EQ(added.step, std::vector<std::string>{"Primero"});
  EXPECT_EQ(tag(added, spanish_reasoning).kinds,
            (std::vector{step_kind::step, step_kind::backtrack, step_kind::conclusion}));

  // Replaced: "Therefore" is no trigger any more, so no step starts there.
  const auto replaced = parsed(
      "steps:\n  triggers:\n    replace: yes\n    step: [Primero]\n    backtrack: [Espera]\n");
  EXPECT_TRUE(replaced.replace_triggers);
  EXPECT_EQ(tag(replaced, spanish_reasoning).kinds,
            (std::vector{step_kind::step, step_kind::backtrack}));
  // Without the added ones, the Spanish text is one step of no kind, then "Therefore".
  EXPECT_EQ(tag({}, spanish_reasoning).kinds,
            (std::vector{step_kind::other, step_kind::conclusion}));
}

TEST(StepsHook, MaxStepsCapsAResponsesSteps) {
  const auto capped = parsed(
      "steps: {max_steps: 2, triggers: {step: [Primero], "
      "backtrack: [Espera]}}");
  EXPECT_EQ(capped.max_steps, 2u);
  EXPECT_EQ(tag(capped, spanish_reasoning).kinds,
            (std::vector{step_kind::step, step_kind::backtrack}));
}

TEST(StepsHook, TheReasoningIsTaggedWhenThereIsOneElseTheContentAndOnlyTheFirstChoice) {
  const steps_settings defaults;
  const auto reasoned = tag(defaults, {{channel::reasoning, "First, think. Wait, again."},
                                       {channel::content, "Therefore 4. So 4."}});
  EXPECT_EQ(reasoned.kinds, (std::vector{step_kind::step, step_kind::backtrack}));
  EXPECT_EQ(reasoned.on, channel::reasoning);
  const auto plain =
      tag(defaults, {{channel::content, "First, add. "}, {channel::content, "So 4."}});
  EXPECT_EQ(plain.kinds, (std::vector{step_kind::step, step_kind::conclusion}));
  EXPECT_EQ(plain.on, channel::content);
  // Another choice's text makes no steps of its own.
  EXPECT_TRUE(tag(defaults, {{channel::content, "First, add. So 4."}}, 1).kinds.empty());
}

}  // namespace
}  // namespace tokentap::hooks
