#pragma once
// Parsing of upstream URLs and HOST:PORT listen addresses.  Pure functions, no I/O.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace tokentap::config {

/// An upstream base URL: `http://host[:port][/base]` or `https://...`.
struct url {
  bool tls = false;
  std::string host;        ///< without brackets for IPv6 literals
  std::uint16_t port = 0;  ///< defaulted from the scheme when absent
  std::string base_path;  ///< prefix added before the forwarded path, no trailing '/', may be empty

  /// The value for a `Host` header: host, plus `:port` when it is not the scheme's default.
  std::string host_header() const;
  std::string to_string() const;
};

/// Parses an upstream URL.  On failure returns nullopt and sets `error` to a one-line reason.
std::optional<url> parse_url(std::string_view text, std::string& error);

/// A listen address: `HOST:PORT`, `[v6]:PORT` or `:PORT` (all interfaces).  Port 0 = ephemeral.
struct host_port {
  std::string host;
  std::uint16_t port = 0;
  std::string to_string() const;
  bool operator==(const host_port&) const = default;
};

std::optional<host_port> parse_host_port(std::string_view text, std::string& error);

}  // namespace tokentap::config
