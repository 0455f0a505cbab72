#pragma once
// Loopback ports for tests: one free now, and the addresses the binary prints when ready.
#include <cstdint>
#include <string>

#include <boost/asio/ip/tcp.hpp>

namespace tokentap::test {

/// A loopback port nothing listens on at the time of the call: connecting to it is refused, and a
/// server may take it (a simulator started, killed and started again on the same port).
std::uint16_t free_loopback_port();

/// A loopback port that refuses connections for as long as this lives: bound and never listened
/// on, so no server started meanwhile (another test's, run in parallel) can take it — which
/// free_loopback_port cannot promise.  For an endpoint that must stay dead.
class refusing_port {
 public:
  refusing_port();
  ~refusing_port();
  refusing_port(const refusing_port&) = delete;
  refusing_port& operator=(const refusing_port&) = delete;
  std::uint16_t port() const noexcept { return port_; }

 private:
  int fd_ = -1;
  std::uint16_t port_ = 0;
};

/// The `key=HOST:PORT` address of the binary's `ready …` line (a default endpoint when absent).
boost::asio::ip::tcp::endpoint ready_address(const std::string& line, const std::string& key);

}  // namespace tokentap::test
