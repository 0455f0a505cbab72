#include "test/support/ports.hpp"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/ip/address.hpp>

#include "test/support/canned_upstream.hpp"

namespace tokentap::test {

std::uint16_t free_loopback_port() {
  return refusing_port().port();  // free again once the socket closes
}

refusing_port::refusing_port() {
  fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  ::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a);
  ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
  port_ = ntohs(a.sin_port);
}

refusing_port::~refusing_port() {
  if (fd_ >= 0) ::close(fd_);
}

boost::asio::ip::tcp::endpoint ready_address(const std::string& line, const std::string& key) {
  const auto hp = ready_endpoint(line, key);
  const auto colon = hp.rfind(':');
  if (hp.empty() || colon == std::string::npos) return {};
  return {boost::asio::ip::make_address(hp.substr(0, colon)),
          static_cast<unsigned short>(std::stoi(hp.substr(colon + 1)))};
}

}  // namespace tokentap::test
