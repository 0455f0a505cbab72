#pragma once
// Socket reads that also return when the kernel received the bytes (SO_TIMESTAMPNS).  Linux.
//
// The relay reads a plain-TCP upstream with them (proxy/relay.hpp, relay_op::stamped_read):
// tokens are timed by when their bytes reached the proxy, not by when its thread got round to
// reading them, and the relay tells whether its I/O thread is behind — bytes that waited in the
// socket while other handlers ran — without a trip through the executor per event.  The load
// generator (net/rx_stamped_reader.hpp) measures latency to the client's socket with them.
// A recvmsg with the stamp costs what a recv does here (1.4–1.5 µs per 300-byte read on
// loopback, both; measured).
#include <sys/socket.h>
#include <sys/uio.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <ctime>

#include <boost/asio/error.hpp>
#include <boost/system/error_code.hpp>

namespace tokentap::net {

inline std::int64_t ns_of(const timespec& t) noexcept {
  return static_cast<std::int64_t>(t.tv_sec) * 1000000000 + t.tv_nsec;
}

/// The wall clock (what the kernel stamps with), ns.
inline std::int64_t realtime_ns() noexcept {
  timespec t;
  ::clock_gettime(CLOCK_REALTIME, &t);
  return ns_of(t);
}

/// The wall clock minus the monotonic one now, ns: what turns a kernel receive stamp into a
/// monotonic time.  Read as wall, monotonic, wall: a pair read across a preemption (the thread
/// descheduled between the two reads) would be off by the whole pause, so the tightest of a
/// few brackets is taken.
inline std::int64_t realtime_minus_mono_ns() noexcept {
  std::int64_t best = 0, width = -1;
  for (int i = 0; i < 4; ++i) {
    timespec a, m, b;
    ::clock_gettime(CLOCK_REALTIME, &a);
    ::clock_gettime(CLOCK_MONOTONIC, &m);
    ::clock_gettime(CLOCK_REALTIME, &b);
    const auto w = ns_of(b) - ns_of(a);
    if (width < 0 || w < width) {
      width = w;
      best = ns_of(a) + w / 2 - ns_of(m);
    }
    if (w < 2000) break;  // tight enough: a few hundred ns is two clock reads
  }
  return best;
}

/// Asks the kernel to stamp what the socket receives.  false = refused.  Linux turns stamping on
/// from a work item: bytes arriving a moment after the system's first socket asked may carry
/// no stamp yet.
inline bool enable_rx_stamps(int fd) noexcept {
  const int on = 1;
  return ::setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPNS, &on, sizeof on) == 0;
}

/// One recvmsg into iov[0, count) (count ≥ 1, sizes > 0) on a non-blocking socket.  false: it
/// would block (nothing read, nothing set).  true: done — `n` bytes, or `ec` set (eof when the
/// peer of a stream socket closed it); `rx_real_ns` is the kernel's receive time (wall clock,
/// ns) of the last bytes read, -1 when they carry none.
inline bool recv_stamped(int fd, iovec* iov, int count, int flags, std::size_t& n,
                         boost::system::error_code& ec, std::int64_t& rx_real_ns) noexcept {
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(timespec))];
  msghdr m{};
  m.msg_iov = iov;
  m.msg_iovlen = static_cast<decltype(m.msg_iovlen)>(count);
  m.msg_control = control;
  m.msg_controllen = sizeof control;
  ssize_t got;
  do got = ::recvmsg(fd, &m, flags | MSG_DONTWAIT);
  while (got < 0 && errno == EINTR);
  if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return false;
  n = 0;
  rx_real_ns = -1;
  if (got < 0) {
    ec.assign(errno, boost::system::system_category());
    return true;
  }
  if (got == 0) {
    ec = boost::asio::error::eof;
    return true;
  }
  ec.clear();
  n = static_cast<std::size_t>(got);
  for (cmsghdr* c = CMSG_FIRSTHDR(&m); c != nullptr; c = CMSG_NXTHDR(&m, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_TIMESTAMPNS) continue;
    timespec rx;
    std::memcpy(&rx, CMSG_DATA(c), sizeof rx);
    rx_real_ns = ns_of(rx);
  }
  return true;
}

}  // namespace tokentap::net
