#pragma once
// Tells when an upstream connection's peer closed or reset it, for reads that believe a short
// read (proxy/drain_read.hpp).
#include <cstdint>
#include <memory>

#include "proxy/net.hpp"

namespace tokentap::proxy {

class upstream_connection;

// A relay read that drained the socket waits for the kernel's next edge without trying first.
// A FIN or RST that arrived together with the last data raises no edge of its own, so that read
// would wait until the idle timeout.  The watch is a second epoll set, of each connection's
// hangups only (EPOLLRDHUP, EPOLLHUP, EPOLLERR; one-shot), whose descriptor waits in the
// io_context's reactor: data arriving on a connection never wakes it, a hangup does, and then
// the connection is marked (`upstream_connection::peer_closed`) and its socket re-armed in the
// reactor (an `async_wait(wait_error)` registers it again, so that the reactor reports its
// readiness once more and a waiting read runs and sees the end of file or the reset).
// Costs one `epoll_ctl` per new connection and nothing per event; a closed socket leaves the
// set by itself.  One per io_context (an Asio service), used only from its thread.
class hangup_watch final : public net::execution_context::service {
 public:
  static inline net::execution_context::id id;

  explicit hangup_watch(net::io_context& ioc);  // made by net::use_service(io_context&)
  ~hangup_watch() override;

  /// Watches `c`'s socket (open and connected) until it is closed.  False when it cannot be
  /// watched (no epoll set: descriptors exhausted); its reads must then stay speculative.
  bool watch(upstream_connection& c) noexcept;

  /// Hangups seen so far (readable from any thread).
  std::uint64_t hangups() const noexcept;

 private:
  void shutdown() override;
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace tokentap::proxy
