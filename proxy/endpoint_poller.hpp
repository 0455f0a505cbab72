#pragma once
// One endpoint's periodic request — the health probe (health_checker.cpp), the engine-metrics
// scrape (engine_scraper.cpp) — as a session of its worker: every interval one `poll()`, until
// the worker drains or the generation it belongs to is replaced.  Used on that worker's thread.
#include <memory>

#include "net/server_runtime.hpp"
#include "proxy/cluster.hpp"
#include "proxy/upstream_pool.hpp"

namespace tokentap::proxy {

struct proxy_shared;
struct generation;

class endpoint_poller : public net::session_base {
 public:
  endpoint_poller(net::worker& w, proxy_shared& shared, std::shared_ptr<const generation> g,
                  cluster& c, endpoint& e);

  /// Runs `p`'s loop on its worker; `what` names it in a log line should it throw.
  static void spawn(net::worker& w, std::shared_ptr<endpoint_poller> p, const char* what);

  void drain() noexcept override { stop(); }
  void force_close() noexcept override { stop(); }

 protected:
  /// One request and its bookkeeping; the loop waits `interval()` from its start to the next.
  virtual awaitable<void> poll() = 0;
  virtual clock::duration interval() const = 0;

  upstream_pool& pool();
  bool stopped() const noexcept { return stopped_; }

  cluster& cluster_;
  endpoint& endpoint_;
  upstream_connection* conn_ = nullptr;  // the request's, while one is open (a stop closes it)

 private:
  static awaitable<void> run(std::shared_ptr<endpoint_poller> self);  // (holds it while it runs)
  awaitable<void> loop();
  void stop() noexcept;

  proxy_shared& shared_;
  std::shared_ptr<const generation> generation_;  // what cluster_ and endpoint_ belong to
  steady_timer timer_;
  bool stopped_ = false;
};

}  // namespace tokentap::proxy
