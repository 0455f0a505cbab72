// The registry of built-in hooks: the names a configuration may list, once each, and the order
// they run in — after the hooks whose pieces of the stream_info they need or read.
#include "hooks/registry.hpp"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace tokentap::hooks
