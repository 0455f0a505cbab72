#pragma once
// A runtime with one worker serving a responder on 127.0.0.1:0, for the net tests.
#include <chrono>

#include "net/http_server.hpp"

namespace tokentap::net::testing {

struct serving {
  explicit serving(http_responder<tcp_stream> responder, http_server_limits limits = {})
      : runtime(1) {
    ep = runtime.listen("127.0.0.1", 0, [=](tcp_socket s, worker& w) {
      serve_http(std::move(s), w, limits, responder);
    });
    runtime.start();
  }
  ~serving() {
    runtime.shutdown(std::chrono::milliseconds(0));
    runtime.join();
  }
  server_runtime runtime;
  tcp::endpoint ep;
};

}  // namespace tokentap::net::testing
