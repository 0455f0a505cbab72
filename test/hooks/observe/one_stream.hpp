#pragma once
// One streamed answer through a chain of hooks, and a registry that has seen it (the tests of
// the hooks that record metrics, and of /api/stats).
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "hooks/hook_chain.hpp"
#include "hooks/observe/metrics.hpp"
#include "hooks/observe/steps_hook.hpp"
#include "hooks/observe/timing_hook.hpp"
#include "test/hooks/chain_helpers.hpp"

namespace tokentap::hooks::chain_test {

// One streamed answer through the timing hook, then `hooks`: the head 5 ms after the request,
// two content tokens 100 and 150 ms after it ("First, add. " and "So 4."), then `last_read` when
// given (a usage chunk), the end at 160 ms.
inline void stream_one_answer(std::vector<std::shared_ptr<hook_factory>> hooks,
                              stream_outcome outcome = stream_outcome::ok, unsigned status = 200,
                              const std::string& last_read = "") {
  config::config cfg;
  hooks.insert(hooks.begin(), std::make_shared<timing_hook_factory>());
  hook_chain_factory f(cfg, std::move(hooks));
  auto tap = f.create();
  constexpr mono_ns t0 = 1000 * ms;
  auto r = request(t0);
  r.route = "chat";
  r.model = "llama-3";
  tap->on_request(r);
  tap->on_response_head({status, "text/event-stream", "", t0 + 5 * ms, {}});
  for (const auto& [text, at] : {std::pair{"First, add. ", 100}, std::pair{"So 4.", 150}}) {
    const auto b = chunk("content", text);
    const mono_ns t = t0 + at * ms;
    tap->on_body({b.data(), b.size()}, {t, t, t + ms / 10});
  }
  if (!last_read.empty()) {
    const mono_ns t = t0 + 155 * ms;
    tap->on_body({last_read.data(), last_read.size()}, {t, t, t + ms / 10});
  }
  tap->on_stream_end(outcome, t0 + 160 * ms);
}

// A registry that has seen that answer through the steps and metrics hooks.
inline std::shared_ptr<metrics_registry> one_stream(stream_outcome outcome = stream_outcome::ok,
                                                    unsigned status = 200) {
  auto reg = std::make_shared<metrics_registry>(config::config{});
  stream_one_answer(
      {std::make_shared<steps_hook_factory>(), std::make_shared<metrics_hook_factory>(reg)},
      outcome, status);
  return reg;
}

}  // namespace tokentap::hooks::chain_test
