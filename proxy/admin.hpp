#pragma once
// The admin listener: small keep-alive HTTP/1.1 sessions answering from a handler table.
// Routing lives here; the endpoints themselves are registered by their owners (the proxy adds
// /healthz and /readyz; metrics and the dashboard register theirs in later issues).
#include <functional>
#include <map>
#include <memory>
#include <string>

#include <boost/asio/thread_pool.hpp>

#include "net/net.hpp"
#include "net/server_runtime.hpp"

namespace tokentap::proxy::admin {

struct response {
  unsigned status = 200;
  std::string content_type = "application/json";
  std::string body;
};

/// Handlers keyed by exact path (query stripped).  Called on an I/O thread; must be thread safe.
using handler = std::function<response(std::string_view method, std::string_view target)>;
using handler_table = std::map<std::string, handler, std::less<>>;

/// The self-contained live dashboard page (no external resources; polls /api/stats).
std::string_view dashboard_html() noexcept;

/// The admin site: its endpoints and, optionally, the token that guards them.
struct site {
  handler_table handlers;
  /// Non-empty: every endpoint but /healthz and /readyz needs `Authorization: Bearer <token>`
  /// (Prometheus `authorization.credentials_file`) or HTTP Basic with the token as the password
  /// (what a browser prompts for, so the dashboard stays usable).
  std::string bearer_token;
  /// Handlers that may take a while (a reload builds TLS contexts and hook state): they run on
  /// `slow_pool`, so no I/O thread waits for them, and always need the token (403 without one
  /// configured).
  handler_table slow_handlers;
  boost::asio::thread_pool* slow_pool = nullptr;
};

/// Whether an Authorization header value carries `token` (constant-time comparison).
bool authorized(std::string_view authorization, std::string_view token) noexcept;

/// Serves one accepted admin connection.
void start_admin_session(tcp_socket socket, net::worker& w, std::shared_ptr<const site> s);

}  // namespace tokentap::proxy::admin
