#pragma once
// An AsyncReadStream over a TCP socket that reads with recvmsg and keeps the kernel's receive
// time of the bytes read (SO_TIMESTAMPNS), so a load generator can tell when an event reached
// its socket apart from when it got round to reading it.  Linux; the socket must stay open
// while the reader is used.
#include <sys/uio.h>

#include <cstdint>
#include <ctime>

#include <boost/asio/compose.hpp>
#include <boost/asio/post.hpp>

#include "net/net.hpp"
#include "net/rx_stamp.hpp"

namespace tokentap::net {

// Why: an event's latency measured to when it reached the client's socket, not to when the
// client got round to reading it.  On a machine whose two cores the load generator shares with
// the simulator and the proxy, the client's own scheduling delay was most of the P99 (0.4–3 ms
// with no proxy at all; ~50 µs to the socket).  Reads complete as Asio's do: the bytes there at
// once, else after the socket is readable; never from within the initiating call.
class rx_stamped_reader {
 public:
  using executor_type = tcp_socket::executor_type;

  explicit rx_stamped_reader(tcp_socket& s) : s_(s) {
    stamps_ = enable_rx_stamps(s_.native_handle());
  }
  executor_type get_executor() { return s_.get_executor(); }
  /// False when the kernel refused SO_TIMESTAMPNS: last_rx_ns() then stays -1.
  bool stamps() const noexcept { return stamps_; }

  /// Monotonic time (ns) at which the kernel received the last bytes read; -1 without one (also
  /// for bytes that arrived just after the first socket of the system asked for stamps: Linux
  /// turns them on from a work item, a moment later).
  std::int64_t last_rx_ns() const noexcept { return last_rx_ns_; }

  template <class MutableBuffers, class Handler>
  auto async_read_some(const MutableBuffers& buffers, Handler&& handler) {
    return asio::async_compose<Handler, void(error_code, std::size_t)>(
        read_op<MutableBuffers>{*this, buffers}, handler, s_);
  }

 private:
  template <class MutableBuffers>
  struct read_op {
    rx_stamped_reader& r;
    MutableBuffers buffers;
    bool waited = false;

    template <class Self>
    void operator()(Self& self, error_code ec = {}) {
      if (ec) return self.complete(ec, 0);  // the wait failed (after one: a continuation)
      std::size_t n = 0;
      if (!r.receive(buffers, n, ec)) {  // would block: wait for readability
        waited = true;
        return r.s_.async_wait(tcp_socket::wait_read, std::move(self));
      }
      if (waited) return self.complete(ec, n);
      // Read at once, within the initiating function: complete through the executor.
      asio::post(r.s_.get_executor(),
                 [self = std::move(self), ec, n]() mutable { self.complete(ec, n); });
    }
  };

  // One non-blocking recvmsg.  false = it would block (nothing read, no error).
  template <class MutableBuffers>
  bool receive(const MutableBuffers& buffers, std::size_t& n, error_code& ec) {
    iovec iov[8];
    int count = 0;
    for (auto it = asio::buffer_sequence_begin(buffers);
         it != asio::buffer_sequence_end(buffers) && count < 8; ++it) {
      const asio::mutable_buffer b(*it);
      if (b.size() == 0) continue;
      iov[count++] = {b.data(), b.size()};
    }
    if (count == 0) return true;  // nothing asked: done, 0 bytes
    std::int64_t rx_real = -1;
    if (!recv_stamped(s_.native_handle(), iov, count, 0, n, ec, rx_real)) return false;
    last_rx_ns_ = -1;
    if (stamps_ && rx_real >= 0) {
      // The kernel stamps with the wall clock; the simulator with the monotonic one.
      last_rx_ns_ = rx_real - realtime_minus_mono_ns();
    }
    return true;
  }

  tcp_socket& s_;
  bool stamps_ = false;
  std::int64_t last_rx_ns_ = -1;
};

}  // namespace tokentap::net
