#pragma once
// A proxy_server for the proxy's unit tests: listeners on 127.0.0.1:0, one I/O thread, no hooks,
// one upstream `default` of one endpoint, started, and stopped at once when the test ends.
#include <memory>
#include <string>

#include "config/config.hpp"
#include "proxy/cluster.hpp"
#include "proxy/proxy_server.hpp"

namespace tokentap::test {

/// The configuration: `url` as the one upstream's endpoint (validated by loopback_proxy).
inline config::config loopback_config(const std::string& url) {
  config::config cfg;
  cfg.listen = {"127.0.0.1", 0};
  cfg.admin = {"127.0.0.1", 0};
  cfg.threads = 1;
  cfg.hooks.clear();
  config::set_single_upstream(cfg, url);
  return cfg;
}

struct loopback_proxy {
  explicit loopback_proxy(config::config cfg) {
    config::validate(cfg);
    server = std::make_unique<proxy::proxy_server>(std::move(cfg));
    server->start();
  }
  ~loopback_proxy() {
    server->shutdown(std::chrono::milliseconds(0));
    server->join();
  }
  /// The current generation's first upstream's first endpoint.
  proxy::endpoint& first_endpoint() {
    return *server->current()->clusters.at(0)->endpoints().at(0);
  }
  std::unique_ptr<proxy::proxy_server> server;
};

}  // namespace tokentap::test
