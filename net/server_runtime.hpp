#pragma once
// Worker threads, listeners and graceful shutdown shared by the proxy, the admin endpoint and the
// simulator.
//
// Envoy's worker model: each I/O thread owns one io_context and everything a connection touches
// (its sockets, timers and upstream connection pool), so a session never needs a strand or a lock.
// Listeners accept on one thread and hand each socket round-robin to a worker.
//
// @par Thread Safety
// `listen` and `start` are called once from the owning thread before traffic; `shutdown` is safe
// from any thread (signal handlers post to it); `join` from the owning thread.
#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_set>
#include <vector>

#include "net/net.hpp"

namespace tokentap::net {

class server_runtime;
struct worker;

/// Traffic listeners close as soon as shutdown begins and their sessions are drained; control
/// listeners (admin: /readyz answers 503 while draining) stay open until the traffic is gone.
enum class listener_role { traffic, control };

/// Base of every connection-owning session.  Construction registers the session with its worker,
/// destruction unregisters it; both happen on the worker's thread.
class session_base {
 public:
  explicit session_base(worker& w, listener_role role = listener_role::traffic);
  virtual ~session_base();
  session_base(const session_base&) = delete;
  session_base& operator=(const session_base&) = delete;

  /// Shutdown began: finish the exchange in flight (if any) and close; close now when idle.
  virtual void drain() noexcept = 0;
  /// The grace period ended: close every socket now.
  virtual void force_close() noexcept = 0;

  worker& owner() const noexcept { return worker_; }
  listener_role role() const noexcept { return role_; }

 private:
  worker& worker_;
  listener_role role_;
};

/// One I/O thread and what it owns.
struct worker {
  worker(server_runtime& rt, unsigned idx);
  server_runtime& runtime;
  const unsigned index;
  // Declared before the io_context: if the loop is stopped hard, the io_context's destructor
  // destroys pending sessions, which unregister themselves from this set.
  std::unordered_set<session_base*> sessions;
  bool draining = false;
  // Every descriptor of this worker is registered and used on its thread only (accepted sockets
  // arrive as bare descriptors, see listener::on_accepted), so the reactor runs without
  // per-descriptor locks; the scheduler and registration stay locked (other threads post here).
  asio::io_context ioc{BOOST_ASIO_CONCURRENCY_HINT_UNSAFE_IO};
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> guard;
};

class server_runtime {
 public:
  /// `threads` = 0 means one per core.
  explicit server_runtime(unsigned threads);
  ~server_runtime();
  server_runtime(const server_runtime&) = delete;
  server_runtime& operator=(const server_runtime&) = delete;

  unsigned size() const noexcept { return static_cast<unsigned>(workers_.size()); }
  worker& at(unsigned i) noexcept { return *workers_[i]; }

  /// Called on the worker's thread with a freshly accepted socket owned by that worker.
  using accept_fn = std::function<void(tcp_socket, worker&)>;

  /// Binds and listens (start-up only; throws boost::system::system_error when the address is
  /// taken).  At most `max_connections` sessions from this listener are open at once; further
  /// connections are closed right after accept (the count covers all sessions of the runtime).
  /// `reuse_port` sets SO_REUSEPORT (other processes may bind the same address and share its
  /// connections).  Returns the bound endpoint (port 0 resolved).
  tcp::endpoint listen(const std::string& host, std::uint16_t port, accept_fn on_accept,
                       std::size_t max_connections = 100000,
                       listener_role role = listener_role::traffic, bool reuse_port = false);

  /// Starts the worker threads.
  void start();

  /// Graceful shutdown: closes the traffic listeners, asks every session to drain, and after
  /// `grace` force-closes what is left.  Once no traffic session is left, control listeners and
  /// sessions close too and the threads end.  A second call force-closes at once.
  void shutdown(std::chrono::milliseconds grace);

  /// Waits for every worker thread to end (after shutdown).
  void join();

  bool draining() const noexcept { return draining_.load(std::memory_order_acquire); }

 private:
  friend class session_base;
  struct listener;
  void session_gone(listener_role role);
  void force_close_all(bool traffic_only);
  void finish();  // no traffic left: close everything else and let the threads end

  std::vector<std::unique_ptr<worker>> workers_;
  std::vector<std::shared_ptr<listener>> listeners_;
  std::vector<std::thread> threads_;
  std::atomic<unsigned> next_{0};
  std::atomic<std::size_t> open_sessions_{0};
  std::atomic<std::size_t> traffic_sessions_{0};
  std::atomic<bool> finished_{false};
  std::atomic<bool> draining_{false};
  bool started_ = false;
  std::atomic<unsigned> shutdown_calls_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  unsigned finished_workers_ = 0;  // guarded by mu_
  std::thread watchdog_;
};

}  // namespace tokentap::net
