// The registry of built-in hooks: the names a configuration may list, once each, the order they
// run in — after the hooks whose pieces of the stream_info they need or read — and the sections
// of the file that hooks read themselves.
#include "hooks/registry.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "config/config.hpp"

namespace tokentap::hooks {
namespace {

TEST(HookRegistry, UnknownHookNamesAreConfigErrors) {
  config::config cfg;
  cfg.hooks = {"timing", "nope"};
  try {
    builtin_hooks().build(cfg);
    FAIL() << "accepted an unknown hook";
  } catch (const config::config_error& e) {
    EXPECT_NE(std::string(e.what()).find(
                  "unknown hook 'nope' (available: admission, cache, "
                  "cache_hints, canary, gen_ai_metrics, metrics, otel, steps, timing, trace)"),
              std::string::npos)
        << e.what();
  }
  cfg.hooks = {"timing", "trace"};
  EXPECT_EQ(builtin_hooks().build(cfg).size(), 1u);  // trace is off without a directory
  cfg.hooks = {"timing", "metrics", "timing"};       // would count every stream twice
  try {
    builtin_hooks().build(cfg);
    FAIL() << "accepted a hook listed twice";
  } catch (const config::config_error& e) {
    EXPECT_STREQ(e.what(), "hook 'timing' is listed twice");
  }
}

// A configuration lists hooks in any order: each runs after the hooks whose findings it uses
// (the metrics hook after timing, which fills the TTFT it exports; the trace hook after all).
// One that needs a finding no configured hook provides is refused with the reason — before,
// `hooks: [metrics, timing]` started and exported no TTFT.
TEST(HookRegistry, AnyOrderRunsInDependencyOrderAndMissingNeedsAreRefused) {
  config::config cfg;
  const auto order = [&](std::vector<std::string> hooks) {
    cfg.hooks = std::move(hooks);
    return builtin_hooks().order(cfg);
  };
  using v = std::vector<std::string>;
  EXPECT_EQ(order({"metrics", "timing"}), (v{"timing", "metrics"}));
  EXPECT_EQ(order({"trace", "metrics", "cache", "steps", "timing"}),
            (v{"steps", "timing", "cache", "trace", "metrics"}));
  EXPECT_EQ(order({"timing", "steps", "cache", "metrics", "trace"}),
            (v{"timing", "steps", "cache", "metrics", "trace"}));
  EXPECT_EQ(order({"steps"}), (v{"steps"}));
  EXPECT_EQ(order({}), v{});
  for (const char* alone : {"metrics", "trace", "cache"}) {
    try {
      order({"steps", alone});
      FAIL() << alone << " without timing was accepted";
    } catch (const config::config_error& e) {
      EXPECT_EQ(std::string(e.what()), "hook '" + std::string(alone) +
                                           "' needs the timing that no configured hook provides "
                                           "(add the hook that does)");
    }
  }
  // The chain runs them in that order: the metrics hook listed first still sees the TTFT.
  cfg.hooks = {"metrics", "timing"};
  const auto built = builtin_hooks().build(cfg);  // no metrics registry: metrics is skipped
  EXPECT_EQ(built.size(), 1u);
}

// The error a configuration meets, or "" when the registry takes it.
std::string refusal(const hook_registry& r, const std::string& yaml) {
  try {
    r.check(config::parse_config("upstreams: {a: {url: http://h}}\n" + yaml));
    return "";
  } catch (const config::config_error& e) {
    return e.what();
  }
}

TEST(HookRegistry, ATopLevelKeyThatNoHookReadsIsAnUnknownKeyAtItsLine) {
  const auto r = builtin_hooks();
  EXPECT_EQ(refusal(r, "listen: 1.2.3.4:80\nupstream: {}\n"),
            "line 3: unknown key 'upstream' in the top level");
  EXPECT_EQ(refusal(r, "timing: {stall_threshold_ms: 5}\nsteps: {max_steps: 3}\n"), "");
}

// A hook's section is read by the hook — listed or not, so a typo never waits for the day the
// hook is turned on — and its errors name their line as config/'s own do.
TEST(HookRegistry, EveryHooksSectionIsReadByItsHookWithItsErrorsLines) {
  const auto r = builtin_hooks();
  EXPECT_EQ(refusal(r, "hooks: [timing]\nsteps:\n  triggerz: {}\n"),
            "line 4: unknown key 'triggerz' in steps");
  EXPECT_EQ(refusal(r, "steps: {triggers: {step: Primero}}\n"),
            "line 2: steps.triggers.step must be a list");
  EXPECT_EQ(refusal(r, "timing:\n  exact_samples: 0\n"),
            "line 3: timing.exact_samples must be 1 .. 1048576");
  EXPECT_EQ(refusal(r, "timing: {stall_threshold_ms: -1}\n"),
            "line 2: 'stall_threshold_ms' must not be negative");
  EXPECT_EQ(refusal(r, "timing: [1]\n"), "line 2: timing must be a mapping");
  // build() refuses what check() does: a proxy never starts on a section nobody read.
  try {
    r.build(config::parse_config("upstreams: {a: {url: http://h}}\ntimng: {}\n"));
    ADD_FAILURE() << "built with an unknown section";
  } catch (const config::config_error& e) {
    EXPECT_STREQ(e.what(), "line 2: unknown key 'timng' in the top level");
  }
}

// What a hook's parse made of its section is what its maker gets; an absent section is the
// defaults.
TEST(HookRegistry, AHookGetsTheSettingsItsParseReadFromItsSection) {
  struct settings {
    std::string greeting = "hello";
  };
  std::vector<std::string> made;
  hook_registry r;
  r.add_with_settings<settings>(
      "greeter",
      [](const config::section& s) {
        settings out;
        if (!s) return out;
        s.check_keys({"greeting"}, "greeter");
        out.greeting = s["greeting"].string("greeting");
        return out;
      },
      [&](const config::config&, const settings& st) -> std::shared_ptr<hook_factory> {
        made.push_back(st.greeting);
        return nullptr;
      });
  auto cfg = config::parse_config("upstreams: {a: {url: http://h}}\nhooks: [greeter]\n");
  r.build(cfg);
  cfg = config::parse_config(
      "upstreams: {a: {url: http://h}}\nhooks: [greeter]\ngreeter: {greeting: hola}\n");
  r.build(cfg);
  EXPECT_EQ(made, (std::vector<std::string>{"hello", "hola"}));
  EXPECT_EQ(refusal(r, "greeter: {greting: hola}\n"), "line 2: unknown key 'greting' in greeter");
  // A hook without settings has no section: its name at the top level is an unknown key.
  r.add("plain", [](const config::config&) { return std::shared_ptr<hook_factory>(); });
  EXPECT_EQ(refusal(r, "plain: {}\n"), "line 2: unknown key 'plain' in the top level");
}

}  // namespace
}  // namespace tokentap::hooks
