#pragma once
// Reads that believe a short read: the relay's upstream reads skip the `recv` that
// would only fail with EAGAIN.
//
// Asio performs every socket read speculatively: it calls `recv` when the read starts and waits
// for the reactor only if that fails.  A streaming relay reads right after each event it
// forwarded, when the next event is milliseconds away, so every event cost a second `recv` that
// failed with EAGAIN (1.2 per event against nginx's 0, `perf stat` on the syscall tracepoints).
// nginx's rule is that a short read drained the socket: with edge-triggered epoll the kernel
// reports the next arrival, so the next read can wait for it without trying first.  Asio's
// reactor has the same rule built in for end of file: an operation reporting
// `done_and_exhausted` makes the descriptor's next read wait for the next edge instead of
// trying (its `try_speculative_` flag, set again by every edge).  `drain_buffer` is a buffer
// type whose receive operation also reports a short read as exhausted.
//
// What the rule needs besides: a FIN or RST that arrived together with the last data raises no
// edge of its own, so a read that waits after that data would wait for ever.  nginx reads the
// event mask (EPOLLRDHUP, EPOLLHUP); Asio does not hand it to operations.  `hangup_watch`
// (proxy/hangup_watch.hpp) tells instead, and re-arms the socket so that the waiting read runs.
//
// A drain_buffer given a slot for it also returns the kernel's receive stamp of the bytes read
// (recvmsg with SO_TIMESTAMPNS, proxy/rx_stamp.hpp; the same cost as recv): from it the relay
// tells whether its thread is behind, without a trip through the executor per event.
//
// The specialization replaces Asio's generic receive operation for this one buffer type; it is
// written against Boost 1.74's `reactive_socket_recv_op_base` (Debian 12) and compiled only
// there and on the epoll reactor.  Elsewhere `drain_buffer` is a plain buffer and reads stay
// speculative: correct, one system call more per event.
#include <utility>  // must precede asio (Boost 1.74's awaitable.hpp)

#include <cstdint>

#include <boost/asio/buffer.hpp>
#include <boost/version.hpp>

#include "parsers/hot_lines.hpp"

namespace tokentap::proxy {

/// A single mutable buffer whose socket reads report a short read as having drained the socket.
/// With `rx_real_ns`, each read also stores there the kernel's receive time of its bytes (wall
/// clock, ns; -1 for none: stamps not enabled on the socket or not on yet — rx_stamp.hpp).
/// With `hot`, the lines it lists are prefetched when the socket is ready, before the `recv`:
/// the state the reader's handler will touch arrives while the kernel copies the bytes.
struct drain_buffer : boost::asio::mutable_buffer {
  drain_buffer(void* data, std::size_t size, std::int64_t* rx_real_ns = nullptr,
               const tokentap::parsers::hot_lines* hot = nullptr) noexcept
      : mutable_buffer(data, size), rx_real_ns(rx_real_ns), hot(hot) {}
  std::int64_t* rx_real_ns;
  const tokentap::parsers::hot_lines* hot;
};

}  // namespace tokentap::proxy

#if BOOST_VERSION == 107400 && defined(__linux__)
#include <boost/asio/detail/reactive_socket_recv_op.hpp>

#include "proxy/rx_stamp.hpp"
#if defined(BOOST_ASIO_HAS_EPOLL) && !defined(BOOST_ASIO_HAS_IO_URING)
#define TOKENTAP_DRAIN_READS 1

namespace boost::asio::detail {

template <>
class reactive_socket_recv_op_base<tokentap::proxy::drain_buffer> : public reactor_op {
 public:
  reactive_socket_recv_op_base(const boost::system::error_code& success_ec, socket_type socket,
                               socket_ops::state_type state,
                               const tokentap::proxy::drain_buffer& buffer,
                               socket_base::message_flags flags, func_type complete_func)
      : reactor_op(success_ec, &reactive_socket_recv_op_base::do_perform, complete_func),
        socket_(socket),
        state_(state),
        buffer_(buffer),
        flags_(flags) {}

  static status do_perform(reactor_op* base) {
    auto* o = static_cast<reactive_socket_recv_op_base*>(base);
    if (o->buffer_.hot != nullptr) o->buffer_.hot->prefetch();
    if (o->buffer_.rx_real_ns != nullptr && (o->state_ & socket_ops::stream_oriented) != 0) {
      iovec iov{o->buffer_.data(), o->buffer_.size()};
      if (!tokentap::proxy::recv_stamped(o->socket_, &iov, 1, o->flags_, o->bytes_transferred_,
                                         o->ec_, *o->buffer_.rx_real_ns))
        return not_done;
    } else if (!socket_ops::non_blocking_recv1(
                   o->socket_, o->buffer_.data(), o->buffer_.size(), o->flags_,
                   (o->state_ & socket_ops::stream_oriented) != 0, o->ec_, o->bytes_transferred_)) {
      return not_done;  // EAGAIN: wait for the reactor
    }
    // End of file (Asio's own rule) or fewer bytes than asked for: the socket is drained, the
    // next read waits for the next edge.  After an error the next read tries again.
    if (o->ec_) return o->ec_ == boost::asio::error::eof ? done_and_exhausted : done;
    return o->bytes_transferred_ < o->buffer_.size() ? done_and_exhausted : done;
  }

 private:
  socket_type socket_;
  socket_ops::state_type state_;
  tokentap::proxy::drain_buffer buffer_;
  socket_base::message_flags flags_;
};

}  // namespace boost::asio::detail

#endif
#endif

namespace tokentap::proxy {
/// Whether drain_buffer reads are the specialization above (which also prefetches `hot`);
/// elsewhere they are plain reads.
#if defined(TOKENTAP_DRAIN_READS)
inline constexpr bool drain_reads_prefetch = true;
#else
inline constexpr bool drain_reads_prefetch = false;
#endif
}  // namespace tokentap::proxy
