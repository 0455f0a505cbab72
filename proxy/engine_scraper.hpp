#pragma once
// The engine's own metrics (`engine_metrics:`, DESIGN.md §13): every interval, `GET path` on a new
// connection to each endpoint of an upstream that asks, read as vLLM's, SGLang's, TGI's or
// llama.cpp's names (parsers/engine_metrics.hpp) into the endpoint's engine_* figures: its load,
// its TTFT quantiles over the stats window (from its histogram, where it keeps one) and, with
// `engine_load: true`, its queue as balancing load.  A scrape that fails, hangs (bounded by the
// interval) or returns garbage is counted and leaves the figures unknown; it never touches
// traffic.
#include <memory>
#include <vector>

#include "net/server_runtime.hpp"

namespace tokentap::proxy {

struct proxy_shared;
struct generation;

/// Starts the scrapes of `g`'s upstreams with engine_metrics on worker `w`; each is registered
/// in `out` (a session of the worker's: drained with it, or by the health_checks that own them).
void start_engine_scrapes(net::worker& w, const std::shared_ptr<const generation>& g,
                          proxy_shared& shared, std::vector<std::weak_ptr<net::session_base>>& out);

}  // namespace tokentap::proxy
