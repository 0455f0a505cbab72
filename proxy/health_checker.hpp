#pragma once
// The active health probe of an upstream's endpoints (`health:`, DESIGN.md §10): every interval,
// `GET path` on a new connection to each endpoint; a 2xx within the timeout passes.  Failures in
// a row take the endpoint out of balancing (endpoint::probe_failing) until passes in a row bring
// it back.  Passive outlier detection (cluster::record_failure) works alongside: either one
// keeps an endpoint out.
#include "net/server_runtime.hpp"

namespace tokentap::proxy {

struct proxy_shared;

/// Starts probing every endpoint of every upstream with `health:`, on worker `w` (its thread;
/// the probes stop when the worker drains).
void start_health_checks(net::worker& w, proxy_shared& shared);

}  // namespace tokentap::proxy
