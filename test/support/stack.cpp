#include "test/support/stack.hpp"

namespace tokentap::test {

sim::server_options loopback_sim(double ttft_ms, double itl_ms, int tokens) {
  sim::server_options o;
  o.host = "127.0.0.1";
  o.port = 0;
  o.defaults.ttft_ms = ttft_ms;
  o.defaults.itl_ms = itl_ms;
  o.defaults.output_tokens = tokens;
  return o;
}

config::config test_config(const std::string& upstream_url) {
  config::config cfg;
  cfg.listen = {"127.0.0.1", 0};
  cfg.admin = {"127.0.0.1", 0};
  cfg.threads = 2;
  cfg.access_log = false;
  config::set_single_upstream(cfg, upstream_url);
  return cfg;
}

stack::stack(std::function<void(config::config&)> tweak, sim::server_options sim_opts,
             std::shared_ptr<hooks::tap_factory> taps,
             std::function<void(hooks::hook_registry&)> more_hooks) {
  sim_opts.host = "127.0.0.1";
  sim_opts.port = 0;
  sim = std::make_unique<sim::server>(sim_opts);
  sim->start();
  auto cfg = test_config("http://127.0.0.1:" + std::to_string(sim->endpoint().port()));
  if (tweak) tweak(cfg);
  config::validate(cfg);
  proxy = std::make_unique<proxy::proxy_server>(cfg, std::move(taps), std::move(more_hooks));
  proxy->start();
}

}  // namespace tokentap::test
