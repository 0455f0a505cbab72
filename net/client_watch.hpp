#pragma once
// Notices a client that goes away while its exchange is in flight.  The client sends nothing
// while it waits for a response, so its socket turning readable means it closed or failed — or
// that it pipelined its next request, whose bytes then stay in the socket for the next exchange.
// The proxy stops the upstream at once on the first two (nobody keeps paying for tokens nobody
// reads), even while the upstream is silent.
#include <cstdint>
#include <utility>

#include "net/net.hpp"

namespace tokentap::net {

class client_watch {
 public:
  /// Watches `socket` until stop(): calls `on_gone()` once, on the socket's executor, when the
  /// client closed or its socket failed.  `on_gone` must keep this watch and the socket alive
  /// until it runs (e.g. by holding their owner).
  template <class OnGone>
  void start(tcp_socket& socket, OnGone on_gone) {
    watching_ = true;
    socket.async_wait(tcp_socket::wait_read, [this, &socket, gen = ++gen_,
                                              on_gone = std::move(on_gone)](error_code ec) mutable {
      if (gen != gen_ || !watching_ || ec == asio::error::operation_aborted) return;
      watching_ = false;
      if (!ec) {
        switch (peek(socket)) {
          case readable::data:  // a pipelined request: it waits for the next exchange
            return;
          case readable::nothing_yet:
            start(socket, std::move(on_gone));
            return;
          case readable::closed:
            break;
        }
      }
      on_gone();
    });
  }

  /// Stops watching (cancels the socket's pending operations: call it between exchanges, when
  /// the wait is the only one).
  void stop(tcp_socket& socket) noexcept;

  bool watching() const noexcept { return watching_; }

 private:
  enum class readable { data, nothing_yet, closed };
  static readable peek(tcp_socket& socket) noexcept;

  bool watching_ = false;
  std::uint64_t gen_ = 0;  // a wait whose generation passed completes without effect
};

}  // namespace tokentap::net
