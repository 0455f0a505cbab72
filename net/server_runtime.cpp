#include "net/server_runtime.hpp"

#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/post.hpp>

#include "base/log.hpp"

namespace tokentap::net {

namespace {

// SO_REUSEPORT, which Asio names no option for, written to its SettableSocketOption requirements.
struct reuse_port_option {
  int value = 1;
  template <class Protocol>
  int level(const Protocol&) const noexcept {
    return SOL_SOCKET;
  }
  template <class Protocol>
  int name(const Protocol&) const noexcept {
    return SO_REUSEPORT;
  }
  template <class Protocol>
  const int* data(const Protocol&) const noexcept {
    return &value;
  }
  template <class Protocol>
  std::size_t size(const Protocol&) const noexcept {
    return sizeof value;
  }
};

}  // namespace

struct server_runtime::listener : std::enable_shared_from_this<listener> {
  listener(server_runtime& rt, asio::io_context& ioc, std::size_t max, listener_role r)
      : runtime(rt), acceptor(ioc), max_connections(max), role(r) {}
  server_runtime& runtime;
  asio::basic_socket_acceptor<tcp, io_executor> acceptor;
  std::size_t max_connections;
  listener_role role;

  void close() {
    asio::post(acceptor.get_executor(), [self = shared_from_this()] {
      error_code ignored;
      self->acceptor.close(ignored);
    });
  }
  accept_fn on_accept;
  tcp protocol = tcp::v4();  // the acceptor's, so every accepted socket's (set by listen)

  // The session is created on its worker's thread, where all of its I/O will run.  To another
  // worker the socket travels as a bare descriptor and is registered there.
  void hand_over(tcp_socket s, worker& w) {
    if (&w.ioc == &acceptor.get_executor().context()) {
      asio::post(w.ioc, [fn = on_accept, s = std::move(s), &w]() mutable { fn(std::move(s), w); });
      return;
    }
    error_code ec;
    const auto fd = s.release(ec);
    if (ec) {
      TT_LOG(warn) << "cannot hand over an accepted connection: " << ec.message();
      s.close(ec);
      return;
    }
    asio::post(w.ioc, [fn = on_accept, proto = protocol, fd, &w] {
      tcp_socket sock(w.ioc);
      error_code aec;
      sock.assign(proto, fd, aec);
      if (aec) {
        TT_LOG(warn) << "cannot adopt an accepted connection: " << aec.message();
        ::close(fd);
        return;
      }
      fn(std::move(sock), w);
    });
  }

  // A socket is accepted on the acceptor's own thread and handed to its worker as a bare
  // descriptor, registered with the worker's reactor on the worker's thread: every operation on a
  // descriptor then happens on one thread, which is what lets the workers run their reactors
  // without per-descriptor locks (see worker::ioc).
  void do_accept() {
    acceptor.async_accept([self = shared_from_this()](error_code ec, tcp_socket s) {
      self->on_accepted(ec, std::move(s));
    });
  }

  void on_accepted(error_code ec, tcp_socket s) {
    if (ec == asio::error::operation_aborted || !acceptor.is_open()) return;
    if (ec) {
      // EMFILE and friends: log, back off briefly so we do not spin, keep accepting.
      TT_LOG(warn) << "accept failed: " << ec.message();
      auto t =
          std::make_shared<steady_timer>(acceptor.get_executor(), std::chrono::milliseconds(50));
      t->async_wait([self = shared_from_this(), t](error_code) { self->do_accept(); });
      return;
    }
    if (runtime.open_sessions_.load(std::memory_order_relaxed) >= max_connections) {
      TT_LOG(warn) << "connection limit (" << max_connections
                   << ") reached; closing new connection";
      error_code ignored;
      s.close(ignored);
    } else {
      hand_over(std::move(s),
                runtime.at(runtime.next_.fetch_add(1, std::memory_order_relaxed) % runtime.size()));
    }
    do_accept();
  }
};

session_base::session_base(worker& w, listener_role role) : worker_(w), role_(role) {
  w.sessions.insert(this);
  w.runtime.open_sessions_.fetch_add(1, std::memory_order_relaxed);
  if (role == listener_role::traffic) w.runtime.traffic_sessions_.fetch_add(1);
}

session_base::~session_base() {
  worker_.sessions.erase(this);
  worker_.runtime.open_sessions_.fetch_sub(1, std::memory_order_relaxed);
  worker_.runtime.session_gone(role_);
}

worker::worker(server_runtime& rt, unsigned idx) : runtime(rt), index(idx) {
  guard.emplace(ioc.get_executor());
}

server_runtime::server_runtime(unsigned threads) {
  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
  workers_.reserve(threads);
  for (unsigned i = 0; i < threads; ++i) workers_.push_back(std::make_unique<worker>(*this, i));
}

server_runtime::~server_runtime() {
  if (started_) {
    shutdown(std::chrono::milliseconds(0));
    join();
  }
  // Destroy workers (and any session a hard stop left behind) while the rest is still alive.  A
  // session destroyed with its worker must not post to the others (finish() would, for the last
  // traffic session, and an earlier worker may be gone already): the loops are over.
  finished_.store(true);
  listeners_.clear();
  workers_.clear();
}

tcp::endpoint server_runtime::listen(const std::string& host, std::uint16_t port,
                                     accept_fn on_accept, std::size_t max_connections,
                                     listener_role role, bool reuse_port) {
  auto l = std::make_shared<listener>(*this, workers_[0]->ioc, max_connections, role);
  l->on_accept = std::move(on_accept);
  const auto addr = asio::ip::make_address(host);
  tcp::endpoint ep(addr, port);
  l->protocol = ep.protocol();
  // A failure names the address: "bind 127.0.0.1:8080: Address already in use".
  error_code ec;
  auto check = [&](const char* what) {
    if (ec)
      throw boost::system::system_error(
          ec, std::string(what) + " " + host + ":" + std::to_string(port));
  };
  l->acceptor.open(ep.protocol(), ec);
  check("open");
  l->acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
  check("setsockopt");
  if (reuse_port) l->acceptor.set_option(reuse_port_option{}, ec);
  check("setsockopt SO_REUSEPORT");
  l->acceptor.bind(ep, ec);
  check("bind");
  l->acceptor.listen(asio::socket_base::max_listen_connections, ec);
  check("listen");
  listeners_.push_back(l);
  l->do_accept();
  return l->acceptor.local_endpoint();
}

void server_runtime::start() {
  started_ = true;
  for (auto& w : workers_) {
    threads_.emplace_back([this, &w] {
      for (;;) {
        try {
          w->ioc.run();
          break;
        } catch (const std::exception& e) {
          // A handler threw: a bug, but one connection's bug must not take the proxy down.
          TT_LOG(error) << "worker " << w->index << ": handler threw: " << e.what();
        }
      }
      std::lock_guard lk(mu_);
      ++finished_workers_;
      cv_.notify_all();
    });
  }
}

void server_runtime::session_gone(listener_role role) {
  if (role != listener_role::traffic) return;
  if (traffic_sessions_.fetch_sub(1) == 1 && draining()) finish();
}

void server_runtime::force_close_all(bool traffic_only) {
  for (auto& w : workers_) {
    asio::post(w->ioc, [wp = w.get(), traffic_only] {
      // force_close may destroy sessions, which erases from the set: iterate over a copy.
      std::vector<session_base*> copy(wp->sessions.begin(), wp->sessions.end());
      for (auto* s : copy)
        if (wp->sessions.count(s) && (!traffic_only || s->role() == listener_role::traffic))
          s->force_close();
    });
  }
}

void server_runtime::finish() {
  if (finished_.exchange(true)) return;
  for (auto& l : listeners_) l->close();
  for (auto& w : workers_) {
    asio::post(w->ioc, [wp = w.get()] {
      std::vector<session_base*> copy(wp->sessions.begin(), wp->sessions.end());
      for (auto* s : copy)
        if (wp->sessions.count(s)) s->force_close();
      wp->guard.reset();  // the loop ends once the last handler has run
    });
  }
}

void server_runtime::shutdown(std::chrono::milliseconds grace) {
  if (!started_) return;
  if (shutdown_calls_.fetch_add(1) > 0) {
    force_close_all(/*traffic_only=*/true);
    return;
  }
  // The watchdog enforces the grace period, then stops the loops if anything still lingers.  It
  // exists before anything can start draining, and under mu_, because join() (another thread)
  // takes it as soon as the workers are done (ThreadSanitizer found the unordered assignment).
  {
    std::lock_guard lk(mu_);
    watchdog_ = std::thread([this, grace] {
      std::unique_lock lk(mu_);
      const auto all_done = [&] { return finished_workers_ == workers_.size(); };
      if (cv_.wait_for(lk, grace, all_done)) return;
      lk.unlock();
      TT_LOG(warn) << "shutdown grace period over; closing remaining connections";
      force_close_all(/*traffic_only=*/true);
      lk.lock();
      if (cv_.wait_for(lk, std::chrono::seconds(2), all_done)) return;
      for (auto& w : workers_) w->ioc.stop();
    });
  }
  draining_.store(true, std::memory_order_release);
  for (auto& l : listeners_)
    if (l->role == listener_role::traffic) l->close();
  for (auto& w : workers_) {
    asio::post(w->ioc, [this, wp = w.get()] {
      wp->draining = true;
      std::vector<session_base*> copy(wp->sessions.begin(), wp->sessions.end());
      for (auto* s : copy)
        if (wp->sessions.count(s)) s->drain();
      if (traffic_sessions_.load() == 0) finish();
    });
  }
}

void server_runtime::join() {
  for (auto& t : threads_)
    if (t.joinable()) t.join();
  threads_.clear();
  std::thread watchdog;
  {
    std::lock_guard lk(mu_);
    watchdog = std::move(watchdog_);
  }
  if (watchdog.joinable()) watchdog.join();
}

void log_escaped_exception(std::exception_ptr e, const char* what) noexcept {
  if (!e) return;
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& ex) {
    TT_LOG(error) << what << ": unexpected exception: " << ex.what();
  } catch (...) {
    TT_LOG(error) << what << ": unexpected exception";
  }
}

}  // namespace tokentap::net
