#pragma once
// The active health probe of an upstream's endpoints (`health:`, DESIGN.md §10): every interval,
// `GET path` on a new connection to each endpoint; a 2xx within the timeout passes.  Failures in
// a row take the endpoint out of balancing (endpoint::probe_failing) until passes in a row bring
// it back.  Passive outlier detection (cluster::record_failure) works alongside: either one
// keeps an endpoint out.  The same owner runs the engine-metrics scrapes (engine_scraper.hpp).
#include <memory>
#include <vector>

#include "net/server_runtime.hpp"

namespace tokentap::proxy {

struct proxy_shared;
struct generation;

/// The probes of one generation's upstreams.  Used on one worker's thread only.
class health_checks {
 public:
  /// Starts probing every endpoint of every upstream of `g` with `health:`, and scraping those
  /// with `engine_metrics:`, on worker `w` (its thread).  The probes stop when the worker drains or
  /// stop() is called.
  void start(net::worker& w, std::shared_ptr<const generation> g, proxy_shared& shared);
  /// Ends the probes (a reload replaced their generation); each lets its generation go.
  void stop();

 private:
  std::vector<std::weak_ptr<net::session_base>> probes_;
};

}  // namespace tokentap::proxy
