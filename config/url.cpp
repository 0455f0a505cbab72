#include "config/url.hpp"

#include <charconv>

namespace tokentap::config {

namespace {

bool parse_port(std::string_view s, std::uint16_t& port) {
  unsigned v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc{} || p != s.data() + s.size() || v > 65535) return false;
  port = static_cast<std::uint16_t>(v);
  return true;
}

// Splits "host:port" / "[v6]:port" / "host" into parts; port may be empty.
bool split_authority(std::string_view auth, std::string& host, std::string_view& port,
                     std::string& error) {
  if (!auth.empty() && auth.front() == '[') {
    auto close = auth.find(']');
    if (close == std::string_view::npos) {
      error = "unterminated IPv6 literal";
      return false;
    }
    host.assign(auth.substr(1, close - 1));
    auto rest = auth.substr(close + 1);
    if (!rest.empty() && rest.front() != ':') {
      error = "junk after IPv6 literal";
      return false;
    }
    port = rest.empty() ? std::string_view{} : rest.substr(1);
    return true;
  }
  auto colon = auth.rfind(':');
  if (colon != std::string_view::npos && auth.find(':') != colon) {
    error = "IPv6 addresses need brackets, e.g. [::1]:8080";
    return false;
  }
  host.assign(colon == std::string_view::npos ? auth : auth.substr(0, colon));
  port = colon == std::string_view::npos ? std::string_view{} : auth.substr(colon + 1);
  return true;
}

}  // namespace

std::string url::host_header() const {
  const bool v6 = host.find(':') != std::string::npos;
  std::string h = v6 ? "[" + host + "]" : host;
  if (port != (tls ? 443 : 80)) h += ":" + std::to_string(port);
  return h;
}

std::string url::to_string() const {
  const bool v6 = host.find(':') != std::string::npos;
  return std::string(tls ? "https://" : "http://") + (v6 ? "[" + host + "]" : host) + ":" +
         std::to_string(port) + base_path;
}

std::optional<url> parse_url(std::string_view text, std::string& error) {
  url u;
  if (text.starts_with("http://")) {
    text.remove_prefix(7);
  } else if (text.starts_with("https://")) {
    u.tls = true;
    text.remove_prefix(8);
  } else {
    error = "upstream URL must start with http:// or https://";
    return std::nullopt;
  }
  auto slash = text.find_first_of("/?#");
  std::string_view auth = text.substr(0, slash);
  std::string_view path = slash == std::string_view::npos ? std::string_view{} : text.substr(slash);
  if (auth.find('@') != std::string_view::npos) {
    error = "credentials in the upstream URL are not supported; use headers";
    return std::nullopt;
  }
  std::string_view port;
  if (!split_authority(auth, u.host, port, error)) return std::nullopt;
  if (u.host.empty()) {
    error = "upstream URL has no host";
    return std::nullopt;
  }
  if (port.empty()) {
    u.port = u.tls ? 443 : 80;
  } else if (!parse_port(port, u.port) || u.port == 0) {
    error = "invalid port '" + std::string(port) + "'";
    return std::nullopt;
  }
  if (path.find_first_of("?#") != std::string_view::npos) {
    error = "upstream URL may not carry a query or fragment";
    return std::nullopt;
  }
  while (!path.empty() && path.back() == '/') path.remove_suffix(1);
  u.base_path.assign(path);
  return u;
}

std::string host_port::to_string() const {
  const bool v6 = host.find(':') != std::string::npos;
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

std::optional<host_port> parse_host_port(std::string_view text, std::string& error) {
  host_port hp;
  std::string_view port;
  if (!split_authority(text, hp.host, port, error)) return std::nullopt;
  if (port.empty() || !parse_port(port, hp.port)) {
    error = "expected HOST:PORT, got '" + std::string(text) + "'";
    return std::nullopt;
  }
  if (hp.host.empty()) hp.host = "0.0.0.0";
  return hp;
}

}  // namespace tokentap::config
