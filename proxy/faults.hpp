#pragma once
// Faults injected on purpose (`faults:`, DESIGN.md §13): ground truth for experiments that change
// one variable at a time.  A delay before forwarding, a delay before each forwarded event, a cut
// after N events, an abort with a provider-shaped error; from the configuration (a share of a
// route's requests) or per request from `x-tokentap-fault-*` headers that carry the admin token.
// Each exchange gets at most one: the first rule, in order, that fires.
#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "config/config.hpp"
#include "net/net.hpp"
#include "parsers/event_bounds.hpp"

namespace tokentap::proxy {

using fault_kind = config::fault_rule::kind_t;

/// The kind's name in metrics and trace records: delay, event_delay, cut, abort.
std::string_view to_string(fault_kind k) noexcept;

/// The fault one exchange gets.
struct fault_choice {
  const config::fault_rule* rule = nullptr;  ///< the rule that chose it; nullptr: none
  fault_kind kind = fault_kind::delay;       ///< never from_header: what the headers asked for
  std::uint32_t value = 0;                   ///< ms, events or an HTTP status, by kind
  explicit operator bool() const noexcept { return rule != nullptr; }
};

/// The request headers that control per-request faults (rules with `from_header: true`).
inline constexpr std::string_view fault_token_header = "x-tokentap-admin-token";
inline constexpr std::string_view fault_header_prefix = "x-tokentap-fault-";

/// A generation's fault rules, and what they injected (tokentap_faults_injected_total).
class fault_plan {
 public:
  /// `admin_token`: what `from_header` faults must carry.  Throws config::config_error when a
  /// rule reads headers and there is no admin token.
  fault_plan(const std::vector<config::fault_rule>& rules, std::string admin_token);

  bool empty() const noexcept { return rules_.empty(); }
  /// Some rule takes per-request faults from headers.
  bool reads_headers() const noexcept { return reads_headers_; }

  /// What choose() decided: a fault (or none), or a request to refuse — a fault header that is
  /// malformed (400) or lacks the admin token (403) — with a one-line reason.
  struct verdict {
    fault_choice fault;
    unsigned status = 0;
    std::string message;
  };
  /// The fault for a request on `route`; `header(name)` gives a request header's value (empty
  /// when absent).  Draws its dice from a per-thread generator.
  verdict choose(std::string_view route,
                 const std::function<std::string_view(std::string_view)>& header) const;

  /// A chosen fault took effect: counted once per exchange.
  void count(const fault_choice& f) const noexcept;
  std::uint64_t injected(std::size_t rule, fault_kind k) const noexcept {
    return counts_[rule][static_cast<std::size_t>(k)].load(std::memory_order_relaxed);
  }
  const std::vector<config::fault_rule>& rules() const noexcept { return rules_; }

 private:
  std::vector<config::fault_rule> rules_;
  std::string admin_token_;
  bool reads_headers_ = false;
  // Per rule, per kind (delay, event_delay, cut, abort).
  std::unique_ptr<std::array<std::atomic<std::uint64_t>, 4>[]> counts_;
};

/// The per-event faults of one exchange, applied by its relay (relay.hpp): where the events of
/// the body end, and the timer that holds each one back.
struct event_pacer {
  event_pacer(io_executor ex, const fault_choice& f, parsers::event_bounds::framing framing)
      : fault(f), bounds(framing), timer(ex) {}
  fault_choice fault;  ///< event_delay or cut
  parsers::event_bounds bounds;
  steady_timer timer;
  bool applied = false;  ///< the fault took effect (a delayed event, or the cut)
};

/// The pacer for a per-event fault `f` on a body of `content_type`: event streams (server-sent
/// events, NDJSON) only; other bodies have no events and go through untouched (nullptr).
std::unique_ptr<event_pacer> pacer_for(std::string_view content_type, io_executor ex,
                                       const fault_choice& f);

}  // namespace tokentap::proxy
