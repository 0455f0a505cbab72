#pragma once
// The real simulator and the real proxy, in process, on 127.0.0.1:0.
#include <functional>
#include <memory>

#include "config/config.hpp"
#include "proxy/proxy_server.hpp"
#include "sim/sim_server.hpp"

namespace tokentap::test {

struct stack {
  /// `tweak` adjusts the proxy config (timeouts, limits) before the proxy starts.
  explicit stack(std::function<void(config::config&)> tweak = {}, sim::server_options sim_opts = {},
                 std::shared_ptr<hooks::tap_factory> taps = {},
                 std::function<void(hooks::hook_registry&)> more_hooks = {});

  tcp::endpoint proxy_ep() const { return proxy->endpoint(); }
  tcp::endpoint sim_ep() const { return sim->endpoint(); }

  std::unique_ptr<sim::server> sim;
  std::unique_ptr<proxy::proxy_server> proxy;
};

/// A simulator on 127.0.0.1:0 answering after `ttft_ms` with `tokens` tokens `itl_ms` apart.
sim::server_options loopback_sim(double ttft_ms, double itl_ms, int tokens);

/// A proxy config for tests: loopback listeners on port 0, two I/O threads, no access log.
config::config test_config(const std::string& upstream_url);

}  // namespace tokentap::test
