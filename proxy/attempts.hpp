#pragma once
// The attempts of one exchange over its upstream's endpoints (DESIGN.md §10): the request as
// each attempt sends it, the endpoints tried so far, where the request goes after an attempt
// failed while nothing had reached the client — another endpoint of its upstream, else of that
// upstream's fallback, while the upstream's `retries` and its retry budget allow — and what each
// attempt says of its endpoint (outlier detection, the hooks, the endpoint's response counts).
// The session does the attempts' I/O and asks this object at every turn; the exchange owns it.
#include <array>
#include <cstddef>
#include <optional>
#include <string_view>

#include "config/config.hpp"
#include "proxy/cluster.hpp"
#include "proxy/http_util.hpp"

namespace tokentap::hooks {
class metrics_registry;
}

namespace tokentap::proxy {

struct exchange;

class attempts {
 public:
  attempts() = default;
  attempts(const attempts&) = delete;
  attempts& operator=(const attempts&) = delete;
  ~attempts() { end(); }

  /// Where they begin: the first attempt goes to `ex.upstream_endpoint`, of `primary` (the
  /// route's upstream, or the one the request phase chose), whose `retries` bound the attempts
  /// after it.  Takes the request's fields for the upstream and writes its head for that
  /// endpoint into `ex.request_head`.  `peer` (the client's address, for X-Forwarded-For)
  /// outlives the exchange; `metrics` (may be null) counts the endpoints' responses.
  void begin(exchange& ex, cluster& primary, http::request_header<> fields,
             std::optional<std::size_t> body_length, std::string_view peer, bool identity_encoding,
             hooks::metrics_registry* metrics);

  /// What the attempt on `e` of `c` says of it: to outlier detection (`failed`: it did not
  /// answer, or answered 502/503/504), to the hooks (`error`: why it is not the attempt whose
  /// head is used; empty when it is) and, when a head came (`code`), to the endpoint's responses.
  void outcome(exchange& ex, cluster& c, endpoint& e, bool failed, std::string_view error,
               unsigned code = 0);

  /// Whether the request moves on after the attempt on the exchange's endpoint failed for
  /// `why`: while the client is there and nothing was sent to it, the primary upstream's
  /// `retries` last, an endpoint not tried yet is left (in the failed attempt's upstream, else in
  /// the primary's fallback) and that upstream's retry budget allows.  If so, the exchange now
  /// names that endpoint, its upstream and why it was chosen, and its request head is written
  /// for it.
  bool fail_over(exchange& ex, retry_reason why, bool client_there);

  /// The request's fields are not needed past the response head (no attempt after it).
  void release_request() noexcept { fields_ = {}; }

  /// Gives back the retries held in the upstreams' budgets and forgets the request.  Idempotent.
  void end() noexcept;

  /// Attempts made so far (the one under way included).
  std::size_t made() const noexcept { return tried_count_; }

 private:
  void write_head(exchange& ex) const;

  cluster* primary_ = nullptr;
  hooks::metrics_registry* metrics_ = nullptr;
  http::request_header<> fields_;
  std::optional<std::size_t> body_length_;
  std::string_view peer_;
  bool identity_encoding_ = false;
  // The endpoints failed on; the one under way is the tried_count_'th.
  std::array<endpoint*, 1 + config::max_retries> tried_{};
  std::size_t tried_count_ = 0;
  // The upstream whose retry budget each retry holds (tried_count_ - 1 of them).
  std::array<cluster*, config::max_retries> held_{};
};

}  // namespace tokentap::proxy
