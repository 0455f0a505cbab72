#include "proxy/hangup_watch.hpp"

#include <sys/epoll.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <optional>

#include <boost/asio/posix/stream_descriptor.hpp>

#include "config/log.hpp"
#include "proxy/upstream_pool.hpp"

namespace tokentap::proxy {

struct hangup_watch::impl {
  explicit impl(net::io_context& ioc) : ioc(ioc) {}

  // The epoll set, created at the first watch and waiting in the reactor from then on.
  bool open() noexcept {
    if (set) return true;
    const int fd = ::epoll_create1(EPOLL_CLOEXEC);
    if (fd < 0) {
      TT_LOG(warn) << "hangup watch: epoll_create1 failed (errno " << errno
                   << "); upstream reads stay speculative";
      return false;
    }
    error_code ec;
    set.emplace(ioc.get_executor());
    set->assign(fd, ec);
    if (ec) {
      ::close(fd);
      set.reset();
      return false;
    }
    // Started from a handler, whatever the caller runs in: see wait().  A hangup before then is
    // not lost: starting the wait re-arms the set in the reactor.
    net::post(ioc, [this] { wait(); });
    return true;
  }

  // The set's own wait does not keep the io_context running (the worker's loop ends when its
  // sessions are done, and a watch is no session): the reactor counts it as work when it starts,
  // which is handed back at once, and taken again when it completes.  Always called from a
  // handler of this io_context, whose own count keeps the loop's work above zero meanwhile (at
  // zero the loop would stop).
  void wait() {
    set->async_wait(net::posix::stream_descriptor::wait_read,
                    [this](error_code ec) { on_ready(ec); });
    ioc.get_executor().on_work_finished();
  }

  void on_ready(error_code ec) {
    ioc.get_executor().on_work_started();
    if (ec || !set) return;  // (no set: shut down)
    epoll_event events[64];
    int n;
    do {
      n = ::epoll_wait(set->native_handle(), events, 64, 0);
      for (int i = 0; i < n; ++i) static_cast<upstream_connection*>(events[i].data.ptr)->hung_up();
      if (n > 0) hangups.fetch_add(static_cast<std::uint64_t>(n), std::memory_order_relaxed);
    } while (n == 64 || (n < 0 && errno == EINTR));
    wait();
  }

  net::io_context& ioc;
  std::optional<net::posix::basic_stream_descriptor<io_executor>> set;
  std::atomic<std::uint64_t> hangups{0};
};

hangup_watch::hangup_watch(net::io_context& ioc)
    : service(ioc), impl_(std::make_unique<impl>(ioc)) {}

hangup_watch::~hangup_watch() = default;

bool hangup_watch::watch(upstream_connection& c) noexcept {
  if (!impl_->open()) return false;
  epoll_event ev{};
  // One-shot: reported once, then silent until the socket is closed (which removes it).
  ev.events = EPOLLRDHUP | EPOLLONESHOT;  // EPOLLHUP and EPOLLERR are always reported
  ev.data.ptr = &c;
  if (::epoll_ctl(impl_->set->native_handle(), EPOLL_CTL_ADD, c.lowest().socket().native_handle(),
                  &ev) != 0) {
    TT_LOG(debug) << "hangup watch: epoll_ctl failed (errno " << errno << ")";
    return false;
  }
  return true;
}

std::uint64_t hangup_watch::hangups() const noexcept {
  return impl_->hangups.load(std::memory_order_relaxed);
}

// The set goes here, not in the destructor: the descriptor service it uses was made after this
// service, so it is destroyed before it.
void hangup_watch::shutdown() {
  impl_->set.reset();
}

}  // namespace tokentap::proxy
