#pragma once
// Loopback ports for tests: one free now, and the addresses the binary prints when ready.
#include <cstdint>
#include <string>

#include <boost/asio/ip/tcp.hpp>

namespace tokentap::test {

/// A loopback port nothing listens on at the time of the call: connecting to it is refused, and a
/// server may take it (a simulator started, killed and started again on the same port).
std::uint16_t free_loopback_port();

/// The `key=HOST:PORT` address of the binary's `ready …` line (a default endpoint when absent).
boost::asio::ip::tcp::endpoint ready_address(const std::string& line, const std::string& key);

}  // namespace tokentap::test
