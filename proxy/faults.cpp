#include "proxy/faults.hpp"

#include <openssl/crypto.h>

#include <charconv>
#include <random>

#include <boost/beast/core/string.hpp>

namespace tokentap::proxy {

namespace {

// Whether a request with `percent` (0..100) takes the rule's fault: a per-thread generator,
// never shared between I/O threads.
bool roll(double percent) noexcept {
  if (percent >= 100) return true;
  if (percent <= 0) return false;
  thread_local std::mt19937_64 rng{std::random_device{}()};
  return static_cast<double>(rng() >> 11) * 0x1.0p-53 * 100.0 < percent;
}

struct header_kind {
  std::string_view name;  // after the prefix
  fault_kind kind;
  std::uint32_t lo, hi;  // as the configuration's keys
};
constexpr header_kind header_kinds[] = {{"delay-ms", fault_kind::delay, 1, 600000},
                                        {"event-delay-ms", fault_kind::event_delay, 1, 60000},
                                        {"cut-after-events", fault_kind::cut, 0, 1000000000},
                                        {"abort-status", fault_kind::abort, 400, 599}};

}  // namespace

std::string_view to_string(fault_kind k) noexcept {
  switch (k) {
    case fault_kind::delay:
      return "delay";
    case fault_kind::event_delay:
      return "event_delay";
    case fault_kind::cut:
      return "cut";
    case fault_kind::abort:
      return "abort";
    case fault_kind::from_header:
      break;
  }
  return "header";
}

fault_plan::fault_plan(const std::vector<config::fault_rule>& rules, std::string admin_token)
    : rules_(rules),
      admin_token_(std::move(admin_token)),
      counts_(std::make_unique<std::array<std::atomic<std::uint64_t>, 4>[]>(rules.size())) {
  for (const auto& r : rules_) {
    if (r.kind != fault_kind::from_header) continue;
    reads_headers_ = true;
    if (admin_token_.empty())
      throw config::config_error("fault rule '" + r.name +
                                 "' takes faults from request headers: they need the admin "
                                 "token (admin_token_file or TOKENTAP_ADMIN_TOKEN)");
  }
}

fault_plan::verdict fault_plan::choose(
    std::string_view route, const std::function<std::string_view(std::string_view)>& header) const {
  verdict v;
  for (const auto& r : rules_) {
    if (!r.route.empty() && r.route != route) continue;
    if (r.kind != fault_kind::from_header) {
      if (!roll(r.percent)) continue;
      v.fault = {&r, r.kind, r.value};
      return v;
    }
    // Per request: one x-tokentap-fault-* header, with the admin token.
    std::string name;
    const header_kind* asked = nullptr;
    std::string_view value;
    for (const auto& h : header_kinds) {
      name.assign(fault_header_prefix).append(h.name);
      const auto got = header(name);
      if (got.empty()) continue;
      if (asked != nullptr) {
        v.status = 400;
        v.message = "one x-tokentap-fault-* header per request";
        return v;
      }
      asked = &h;
      value = got;
    }
    if (asked == nullptr) continue;
    const auto token = header(fault_token_header);
    if (token.size() != admin_token_.size() ||
        CRYPTO_memcmp(token.data(), admin_token_.data(), token.size()) != 0) {
      v.status = 403;
      v.message = "x-tokentap-fault-* needs the admin token in x-tokentap-admin-token";
      return v;
    }
    std::uint32_t n = 0;
    const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
    if (ec != std::errc{} || end != value.data() + value.size() || n < asked->lo || n > asked->hi) {
      v.status = 400;
      v.message = "x-tokentap-fault-" + std::string(asked->name) + " must be a whole number from " +
                  std::to_string(asked->lo) + " to " + std::to_string(asked->hi);
      return v;
    }
    if (!roll(r.percent)) continue;
    v.fault = {&r, asked->kind, n};
    return v;
  }
  return v;
}

void fault_plan::count(const fault_choice& f) const noexcept {
  const auto i = static_cast<std::size_t>(f.rule - rules_.data());
  counts_[i][static_cast<std::size_t>(f.kind)].fetch_add(1, std::memory_order_relaxed);
}

std::unique_ptr<event_pacer> pacer_for(std::string_view content_type, io_executor ex,
                                       const fault_choice& f) {
  const auto starts = [content_type](std::string_view p) {
    return content_type.size() >= p.size() &&
           boost::beast::iequals(content_type.substr(0, p.size()), p);
  };
  using framing = parsers::event_bounds::framing;
  if (starts("text/event-stream")) return std::make_unique<event_pacer>(ex, f, framing::sse);
  if (starts("application/x-ndjson") || starts("application/jsonl"))
    return std::make_unique<event_pacer>(ex, f, framing::ndjson);
  return nullptr;
}

}  // namespace tokentap::proxy
