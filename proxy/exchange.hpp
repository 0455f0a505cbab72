#pragma once
// One request/response exchange of a client connection, as the session (proxy_session.cpp) and
// the relay of its response body (relay.hpp) share it.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "hooks/tap.hpp"
#include "net/net.hpp"
#include "parsers/request_inspector.hpp"
#include "proxy/attempts.hpp"
#include "proxy/cluster.hpp"
#include "proxy/faults.hpp"

namespace tokentap::proxy {

struct generation;

/// State of one request/response exchange.
struct exchange {
  /// The configuration it runs on (proxy_server.hpp), whatever reloads come while it lasts: its
  /// session holds it until its next exchange.
  const generation* gen = nullptr;
  // What every relayed read touches, first (one line rather than three): through request_head
  // (relay.hpp lists this range among the lines it prefetches).
  std::unique_ptr<hooks::stream_tap> tap;
  std::unique_ptr<event_pacer> pacer;  // a fault per event (faults.hpp); nullptr: none
  std::uint64_t body_bytes = 0;
  std::optional<clock::time_point> first_byte;
  unsigned status = 0;
  hooks::stream_outcome outcome = hooks::stream_outcome::ok;
  bool reused_connection = false;
  bool upstream_reusable = false;
  bool response_started = false;  // head sent to the client
  bool response_complete = false;
  std::optional<clock::time_point> deadline;  // total timeout

  // The request as it is sent upstream: head (append_upstream_request_head) and body.  Released
  // once the response head is in (proxy_session.cpp, release_request).
  std::string request_head, request_body;
  std::string method;
  const config::route_config* route = nullptr;
  std::size_t upstream_index = 0;  // the route's upstream, or the one the request phase chose
  std::string target_redacted;
  std::string model;
  bool stream_requested = false;
  std::size_t prompt_chars = 0;            // text bytes of the prompt (the inspector's)
  std::optional<std::int64_t> max_tokens;  // the request's output budget, when it sets one
  std::vector<parsers::message_digest> conversation;
  std::uint64_t tenant = 0;
  std::string tenant_name;                // when tenants are configured (DESIGN.md §11)
  std::string route_key;                  // from the request phase, for the router
  cluster* upstream_cluster = nullptr;    // the route's upstream
  endpoint* upstream_endpoint = nullptr;  // its endpoint the router chose
  pick_result decision;                   // why (upstream_endpoint's)
  active_exchange in_flight;              // counted on that endpoint while the exchange lasts
  bool head = false;
  bool client_keep_alive = false;
  unsigned client_version = 11;
  clock::time_point start{};
  std::int64_t wall_start_us = 0;
  hooks::phase_marks marks;  // where its phases began (the tap's attribution)
  fault_choice fault;        // injected on purpose (faults.hpp)
  attempts tries;            // its attempts over the upstream's endpoints (attempts.hpp)
};

}  // namespace tokentap::proxy
