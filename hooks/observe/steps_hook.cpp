#include "hooks/observe/steps_hook.hpp"

#include <optional>

#include "hooks/builtin_seams.hpp"
#include "hooks/registry.hpp"

namespace tokentap::hooks {

namespace {

class steps_hook final : public hook, public hot_state {
 public:
  steps_hook(const std::shared_ptr<const parsers::step_tagger::compiled>& t, std::size_t max_steps)
      : triggers_(t), max_steps_(max_steps), content_(t, max_steps) {}

  // Steps are the first choice's: with `n > 1` the other choices' interleaved texts would
  // make one nonsensical chain of thought.
  void on_token(const token_event& e) override {
    if (e.choice != 0) return;
    if (e.channel == parsers::channel::reasoning) {
      if (!reasoning_) reasoning_.emplace(triggers_, max_steps_);
      reasoning_->feed(e.text, e.t_ns);
      reasoned_ = reasoned_ || !e.text.empty();
    } else if (e.channel == parsers::channel::content && !reasoned_) {
      content_.feed(e.text, e.t_ns);  // only needed while the response has shown no reasoning
    }
  }

  unsigned per_event() const noexcept override { return token_calls; }

  // The tagger the next token most likely goes to: the reasoning one once reasoning was seen.
  void add_hot_lines(parsers::hot_lines& l) const noexcept override {
    l.add(this, sizeof *this);
    (reasoned_ ? *reasoning_ : content_).add_hot_lines(l);
  }

  void fill(stream_info& s) override {
    const bool reasoning = reasoned_;
    auto& tagger = reasoning ? *reasoning_ : content_;
    tagger.finish();
    s.steps = tagger.steps();
    s.steps_channel = reasoning ? parsers::channel::reasoning : parsers::channel::content;
    s.redundant_tokens = tagger.redundant_tokens();
    // Each step lasts until the next one starts (the last one until its last token).
    s.step_end_ns.resize(s.steps.size());
    for (std::size_t i = 0; i < s.steps.size(); ++i)
      s.step_end_ns[i] = i + 1 < s.steps.size() ? s.steps[i + 1].t_ns : s.steps[i].end_ns;
  }

 private:
  std::shared_ptr<const parsers::step_tagger::compiled> triggers_;
  std::size_t max_steps_;
  // The reasoning tagger is made at the first reasoning token: most responses have none, and
  // every open stream would hold its state (~400 bytes).  reasoned_ implies it exists.
  std::optional<parsers::step_tagger> reasoning_;
  parsers::step_tagger content_;
  // The reasoning tagger has text (reasoning_.text_bytes() > 0), kept here: asking the tagger
  // read its (cold) state at every content token.
  bool reasoned_ = false;
};

}  // namespace

steps_hook_factory::steps_hook_factory(const steps_settings& cfg) : max_steps_(cfg.max_steps) {
  auto triggers =
      cfg.replace_triggers ? parsers::step_triggers{} : parsers::step_triggers::defaults();
  auto add = [](std::vector<std::string>& to, const std::vector<std::string>& from) {
    to.insert(to.end(), from.begin(), from.end());
  };
  add(triggers.step, cfg.step);
  add(triggers.conclusion, cfg.conclusion);
  add(triggers.verification, cfg.verification);
  add(triggers.backtrack, cfg.backtrack);
  compiled_ = parsers::step_tagger::compile(triggers);
}

std::unique_ptr<hook> steps_hook_factory::create() {
  return std::make_unique<steps_hook>(compiled_, max_steps_);
}

steps_settings steps_settings::parse(const config::section& s) {
  steps_settings st;
  if (!s) return st;
  s.check_keys({"triggers", "max_steps"}, "steps");
  if (const auto& v = s["max_steps"]) st.max_steps = v.non_negative("max_steps");
  if (const auto& tr = s["triggers"]) {
    tr.check_keys({"replace", "step", "conclusion", "verification", "backtrack"}, "steps.triggers");
    if (const auto& v = tr["replace"]) st.replace_triggers = v.boolean("replace");
    const auto list = [&](const char* key, std::vector<std::string>& out) {
      if (const auto& l = tr[key]) out = l.strings(std::string("steps.triggers.") + key);
    };
    list("step", st.step);
    list("conclusion", st.conclusion);
    list("verification", st.verification);
    list("backtrack", st.backtrack);
  }
  return st;
}

void register_steps(hook_registry& r) {
  r.add_with_settings<steps_settings>(
      "steps", &steps_settings::parse,
      [](const config::config&, const steps_settings& st) -> std::shared_ptr<hook_factory> {
        return std::make_shared<steps_hook_factory>(st);
      },
      {.provides = {"steps"}, .needs = {}, .reads = {}});
}

}  // namespace tokentap::hooks
