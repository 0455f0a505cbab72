#pragma once
// The reverse proxy: listener + admin listener on a server_runtime, one upstream pool per I/O
// thread, and the tap factory the hook chain plugs into.
#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <boost/asio/ssl/context.hpp>
#include <boost/asio/thread_pool.hpp>

#include "config/config.hpp"
#include "hooks/observe/metric_ref.hpp"
#include "hooks/tap.hpp"

namespace tokentap::hooks {
class metrics_registry;
class tenant_names;
}  // namespace tokentap::hooks
#include "net/server_runtime.hpp"
#include "proxy/faults.hpp"

namespace tokentap::hooks {
class hook_registry;
}

namespace tokentap::proxy::admin {
struct response;
}

namespace tokentap::proxy {

class cluster;
class health_checks;
class upstream_pool;

/// What the proxy counts of its own, whatever hooks run: series of the metrics registry
/// (/metrics), counted into as things happen.
struct proxy_stats {
  explicit proxy_stats(hooks::metrics_registry& m);
  hooks::counter_ref upstream_connects;   ///< new upstream connections made for exchanges
  hooks::counter_ref upstream_reuses;     ///< exchanges sent on a kept-alive connection
  hooks::counter_ref client_disconnects;  ///< clients gone mid-exchange
  hooks::counter_ref rejected_requests;   ///< answered by the proxy or a hook, not forwarded
  hooks::gauge_ref active_streams;        ///< exchanges being forwarded
  hooks::counter_ref reloads_applied, reloads_refused;
  hooks::gauge_ref last_reload_ok;  ///< 1 when the last reload was applied (or none was asked)
};

/// What a client connection keeps of its last exchange's configuration between requests (the
/// keep-alive wait, the next request's head and body), without holding the whole generation.
struct connection_rules {
  config::timeouts_config timeouts;
  config::limits_config limits;
};

/// What one configuration builds, replaced whole by a reload: new requests take the newest one,
/// and an exchange keeps the one it began with until it ends.  Immutable once published but for
/// the atomics inside (endpoint and cluster counters, hook state).
struct generation {
  std::uint64_t number = 0;  ///< 1 at start, one more per applied reload
  config::config cfg;        ///< (first: everything below points into it)
  /// Per configured upstream, in order (a route's upstream_index names one).
  std::vector<std::unique_ptr<cluster>> clusters;
  std::shared_ptr<hooks::tap_factory> taps;
  /// The metrics hook runs: the proxy's own answers are counted among the requests too.
  bool count_local_replies = false;
  std::shared_ptr<const connection_rules> rules;  ///< cfg's timeouts and limits
  std::unique_ptr<const fault_plan> faults;       ///< cfg's `faults:`; nullptr without any
};

/// Everything sessions share for the life of the process; immutable after start except the
/// atomics, the per-worker pools and which generation is current.
struct proxy_shared {
  /// Everything the proxy counts goes to `m`.
  explicit proxy_shared(std::shared_ptr<hooks::metrics_registry> m);
  ~proxy_shared();

  /// The configuration new requests use.
  std::shared_ptr<const generation> current() const noexcept {
    return current_.load(std::memory_order_acquire);
  }
  void publish(std::shared_ptr<const generation> g) noexcept {
    current_.store(std::move(g), std::memory_order_release);
  }

  std::shared_ptr<hooks::metrics_registry> metrics;
  proxy_stats stats;
  std::vector<std::unique_ptr<upstream_pool>> pools;  ///< per worker
  /// Tenant names (DESIGN.md §11) when tenants are configured, else nullptr.
  std::unique_ptr<hooks::tenant_names> tenants;
  std::uint64_t credential_salt = 0;  ///< of hooks::credential_hash
  net::server_runtime* runtime = nullptr;

 private:
  std::atomic<std::shared_ptr<const generation>> current_;
};

/// What a reload did: applied (the new generation's number), or refused and why.
struct reload_result {
  bool applied = false;
  std::uint64_t generation = 0;  ///< the one in use afterwards
  std::string reason;            ///< one line, when refused
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

  /// Applies `next` to new requests (DESIGN.md §11): builds its generation — upstreams, hooks,
  /// admission and canary state — and publishes it; exchanges in flight finish on theirs.
  /// Refused, with the running configuration kept, when `next` changes a setting that needs a
  /// restart (config::restart_only_changes) or cannot be built.  Thread safe; one at a time.
  reload_result reload(config::config next);
  /// How POST /admin/reload obtains the configuration to apply (the CLI reads the file again
  /// with the same flags): throws config::config_error with a one-line reason.  Unset: the
  /// endpoint answers 501.  Call before start().
  void set_config_source(std::function<config::config()> source);
  /// reload() of what the configuration source gives (SIGHUP, POST /admin/reload); refused with
  /// its reason when it throws or there is none.
  reload_result reload_from_source();

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
  hooks::tap_factory* taps() const noexcept { return shared_->current()->taps.get(); }
  hooks::metrics_registry& metrics() const noexcept { return *shared_->metrics; }
  /// The configuration new requests use (valid until the next reload).
  const config::config& cfg() const noexcept { return shared_->current()->cfg; }
  std::shared_ptr<const generation> current() const noexcept { return shared_->current(); }

 private:
  std::shared_ptr<generation> build(config::config cfg, const generation* previous);
  reload_result refused(std::string why);
  void start_probes(std::shared_ptr<const generation> g);  // reload_mu_ held
  admin::response reload_request(std::string_view method);

  // The runtime outlives the shared state: pools and sessions hold sockets of its io_contexts.
  net::server_runtime runtime_;
  std::unique_ptr<proxy_shared> shared_;
  /// The hooks a generation is built from (empty when a tap factory was passed in: every
  /// generation uses that one).
  std::unique_ptr<hooks::hook_registry> hooks_;
  std::shared_ptr<hooks::tap_factory> fixed_taps_;
  /// Endpoint ids (the pools' keys) by identity, so a reload that keeps an endpoint keeps its
  /// pooled connections; ids are never reused.
  std::map<std::string, std::size_t> endpoint_ids_;  // of the running generation's endpoints
  std::size_t next_endpoint_id_ = 0;
  std::mutex reload_mu_;  // one reload at a time; guards endpoint_ids_, health_checks_
  std::function<config::config()> config_source_;
  std::shared_ptr<health_checks> health_checks_;  // the current generation's probes
  bool started_ = false;                          // (reload_mu_)
  tcp::endpoint endpoint_, admin_endpoint_;
  // POST /admin/reload runs here, off the I/O threads, and retired generations are destroyed
  // here.  Last: joined before anything it uses is destroyed.
  boost::asio::thread_pool control_{1};
  // Hands retired generations to control_ until the server is being destroyed.
  class generation_reaper {
   public:
    explicit generation_reaper(boost::asio::thread_pool& pool) : pool_(pool) {}
    void retire(generation* g);
    void close();

   private:
    boost::asio::thread_pool& pool_;
    std::mutex mu_;
    bool open_ = true;
  };
  std::shared_ptr<generation_reaper> reaper_ = std::make_shared<generation_reaper>(control_);
};

}  // namespace tokentap::proxy
