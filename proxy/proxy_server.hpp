#pragma once
// The reverse proxy: listener + admin listener on a server_runtime, one upstream pool per I/O
// thread, and the tap factory the hook chain plugs into.
#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <boost/asio/ssl/context.hpp>

#include "config/config.hpp"
#include "hooks/tap.hpp"

namespace tokentap::hooks {
class metrics_registry;
class tenant_names;
}  // namespace tokentap::hooks
#include "net/server_runtime.hpp"

namespace tokentap::hooks {
class hook_registry;
}

namespace tokentap::proxy {

class cluster;
class upstream_pool;

/// Counters the tests and the metrics read.  Relaxed atomics: monotonic counts only.
struct proxy_stats {
  std::atomic<std::uint64_t> upstream_connects{0};   ///< new upstream connections made
  std::atomic<std::uint64_t> upstream_reuses{0};     ///< exchanges on a pooled connection
  std::atomic<std::uint64_t> upstream_errors{0};     ///< connect/tls/timeout/reset/protocol
  std::atomic<std::uint64_t> client_disconnects{0};  ///< clients gone mid-exchange
  std::atomic<std::uint64_t> rejected_requests{0};   ///< 400/404/413/431 answered by the proxy
  std::atomic<std::uint64_t> active_streams{0};      ///< exchanges in flight
};

/// Everything sessions share; immutable after start except the atomics and per-worker pools.
struct proxy_shared {
  config::config cfg;
  /// Per configured upstream, in order (a route's upstream_index names one).
  std::vector<std::unique_ptr<cluster>> clusters;
  std::vector<std::unique_ptr<upstream_pool>> pools;  ///< per worker
  std::shared_ptr<hooks::tap_factory> taps;
  std::shared_ptr<hooks::metrics_registry> metrics;
  /// Tenant names (DESIGN.md §11) when tenants are configured, else nullptr.
  std::unique_ptr<hooks::tenant_names> tenants;
  std::uint64_t credential_salt = 0;  ///< of hooks::credential_hash
  /// The metrics hook runs: the proxy's own answers are counted among the requests too.
  bool count_local_replies = false;
  proxy_stats stats;
  net::server_runtime* runtime = nullptr;
};

class proxy_server {
 public:
  /// Validates TLS settings (throws std::runtime_error with a one-line reason).  Without an
  /// explicit tap factory, the hooks named in `cfg.hooks` are built from the registry: the
  /// built-in hooks, plus what `more_hooks` registers (hooks of an embedding program, tests).
  explicit proxy_server(config::config cfg, std::shared_ptr<hooks::tap_factory> taps = nullptr,
                        std::function<void(hooks::hook_registry&)> more_hooks = {});
  ~proxy_server();

  /// Binds the proxy and admin listeners and starts the I/O threads.  Throws on bind failure.
  void start();
  tcp::endpoint endpoint() const { return endpoint_; }
  tcp::endpoint admin_endpoint() const { return admin_endpoint_; }

  /// Graceful shutdown with the configured grace period (thread safe, idempotent).
  void shutdown();
  void shutdown(std::chrono::milliseconds grace);
  void join();

  const proxy_stats& stats() const noexcept { return shared_->stats; }
  /// Reads whose tap work waited behind a backlog (proxy/deferred_taps.hpp), all I/O threads.
  std::uint64_t deferred_taps();
  /// Of those, the ones queued and not yet begun, now (all I/O threads).
  std::uint64_t deferred_taps_waiting();
  /// Reads with a tap whose write the kernel took at once and whose completion then went through
  /// the executor, where a late one defers the tap work (relay.hpp, relay_op), all I/O
  /// threads.
  std::uint64_t reads_behind();
  /// The tap factory in use (a hooks::hook_chain_factory unless one was passed in), or nullptr.
  hooks::tap_factory* taps() const noexcept { return shared_->taps.get(); }
  hooks::metrics_registry& metrics() const noexcept { return *shared_->metrics; }
  const config::config& cfg() const noexcept { return shared_->cfg; }

 private:
  // The runtime outlives the shared state: pools and sessions hold sockets of its io_contexts.
  net::server_runtime runtime_;
  std::unique_ptr<proxy_shared> shared_;
  tcp::endpoint endpoint_, admin_endpoint_;
};

}  // namespace tokentap::proxy
