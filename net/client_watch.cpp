#include "net/client_watch.hpp"

#include <sys/socket.h>

#include <cerrno>

namespace tokentap::net {

void client_watch::stop(tcp_socket& socket) noexcept {
  if (!watching_) return;
  watching_ = false;
  ++gen_;
  error_code ignored;
  socket.cancel(ignored);
}

client_watch::readable client_watch::peek(tcp_socket& socket) noexcept {
  char byte;
  const auto n = ::recv(socket.native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n > 0) return readable::data;
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return readable::nothing_yet;
  return readable::closed;
}

}  // namespace tokentap::net
