#pragma once
// TLS contexts, built once at start-up and shared by every I/O thread (SSL_CTX is thread safe
// for creating connections).
#include <memory>
#include <string>

#include <boost/asio/ssl/context.hpp>

namespace tokentap::net {

/// Client context for upstream connections.  With `verify`, the peer's chain is checked against
/// the system trust store (plus `ca_file` when given) and the host name is checked per connection.
/// Throws std::runtime_error with a one-line reason (start-up only).
std::shared_ptr<boost::asio::ssl::context> tls_client_context(bool verify,
                                                              const std::string& ca_file);

/// Server context from PEM files (used by the simulator's TLS mode).
std::shared_ptr<boost::asio::ssl::context> tls_server_context(const std::string& cert_file,
                                                              const std::string& key_file);

}  // namespace tokentap::net
