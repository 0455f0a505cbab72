#include "proxy/cluster.hpp"

#include "base/clock.hpp"
#include "proxy/prefix_balancer.hpp"

#include <chrono>
#include <functional>
#include <random>
#include <thread>

namespace tokentap::proxy {

cluster::cluster(const config::upstream_config& cfg, std::size_t first_id,
                 std::shared_ptr<boost::asio::ssl::context> tls,
                 std::unique_ptr<load_balancer> balancer)
    : cfg_(&cfg),
      tls_(std::move(tls)),
      balancer_(balancer ? std::move(balancer) : make_balancer(cfg)) {
  for (const auto& u : cfg.endpoints) {
    auto e = std::make_shared<endpoint>();
    e->id = first_id + endpoints_.size();
    e->index = static_cast<std::uint32_t>(endpoints_.size());
    e->target = u;
    e->host_header = u.host_header();
    e->label = (u.host.find(':') != std::string::npos ? "[" + u.host + "]" : u.host) + ":" +
               std::to_string(u.port);
    std::uint64_t h = 14695981039346656037ull;  // FNV-1a
    for (unsigned char ch : e->label) h = (h ^ ch) * 1099511628211ull;
    e->label_hash = h;
    endpoints_.push_back(std::move(e));
  }
}

std::string_view to_string(retry_reason r) noexcept {
  switch (r) {
    case retry_reason::connect:
      return "connect";
    case retry_reason::reset:
      return "reset";
    case retry_reason::timeout:
      return "timeout";
    case retry_reason::status_429:
      return "status_429";
    case retry_reason::status_502:
      return "status_502";
    case retry_reason::status_503:
      return "status_503";
    case retry_reason::count_:
      break;
  }
  return "unknown";
}

std::string_view to_string(routing_reason r) noexcept {
  switch (r) {
    case routing_reason::round_robin:
      return "round_robin";
    case routing_reason::least_request:
      return "least_request";
    case routing_reason::prefix_match:
      return "prefix_match";
    case routing_reason::hash:
      return "hash";
    case routing_reason::load_bound:
      return "load_bound";
    case routing_reason::fallback:
      return "fallback";
    case routing_reason::count_:
      break;
  }
  return "unknown";
}

// The balancing policies an upstream's `balance` may name, one line each (the first is the
// default).  A policy is a load_balancer and a maker, defined in its own file or here.
std::unique_ptr<load_balancer> make_prefix_balancer(const config::upstream_config& cfg);

namespace {

struct balancing_policy {
  std::string_view name;
  std::unique_ptr<load_balancer> (*make)(const config::upstream_config&);
};

constexpr balancing_policy policies[] = {
    {"least_request",
     [](const config::upstream_config&) -> std::unique_ptr<load_balancer> {
       return std::make_unique<least_request_balancer>();
     }},
    {"round_robin",
     [](const config::upstream_config&) -> std::unique_ptr<load_balancer> {
       return std::make_unique<round_robin_balancer>();
     }},
    {"prefix", make_prefix_balancer},
};

const balancing_policy& policy_of(const config::upstream_config& cfg) {
  for (const auto& p : policies)
    if (p.name == cfg.balance) return p;
  std::string names;
  for (const auto& p : policies) names += (names.empty() ? "" : ", ") + std::string(p.name);
  const auto what = "upstream '" + cfg.name + "': balance must be one of " + names + ", not '" +
                    cfg.balance + "'";
  config::fail_at(cfg.balance_line, what);
}

}  // namespace

std::unique_ptr<load_balancer> make_balancer(const config::upstream_config& cfg) {
  return policy_of(cfg).make(cfg);
}

void check_balancing(const config::config& cfg) {
  for (const auto& up : cfg.upstreams) (void)policy_of(up);
}

void cluster::cache_report(endpoint& e, const pick_result& d, std::int64_t prompt,
                           std::int64_t cached) noexcept {
  if (prompt < 0 || cached < 0) return;
  e.prompt_tokens.fetch_add(static_cast<std::uint64_t>(prompt), std::memory_order_relaxed);
  e.cached_tokens.fetch_add(static_cast<std::uint64_t>(std::min(cached, prompt)),
                            std::memory_order_relaxed);
  balancer_->cache_report(e, d, cached, base::mono_now_ns());
}

bool cluster::record_failure(endpoint& e) noexcept {
  const auto& o = cfg_->outlier;
  const auto failures = e.consecutive_failures.fetch_add(1, std::memory_order_relaxed) + 1;
  if (o.consecutive_failures == 0 || failures < o.consecutive_failures) return false;
  const auto now = base::mono_now_ns();
  std::size_t out = 0;
  for (const auto& x : endpoints_) out += x->ejected(now) ? 1 : 0;
  if ((out + 1) * 100 > static_cast<std::size_t>(o.max_ejected_percent) * endpoints_.size())
    return false;  // too many out already: it stays in
  auto until = e.ejected_until_ns.load(std::memory_order_relaxed);
  if (until > now) return false;  // (another thread ejected it)
  const auto times = e.ejections.load(std::memory_order_relaxed) + 1;
  const auto span = std::min<std::int64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(o.base_ejection).count() * times,
      std::chrono::duration_cast<std::chrono::nanoseconds>(o.max_ejection).count());
  if (!e.ejected_until_ns.compare_exchange_strong(until, now + span, std::memory_order_relaxed))
    return false;
  e.ejections.fetch_add(1, std::memory_order_relaxed);
  e.consecutive_failures.store(0, std::memory_order_relaxed);
  return true;
}

bool cluster::begin_retry() noexcept {
  std::uint64_t active = 0;
  for (const auto& e : endpoints_) active += e->active.load(std::memory_order_relaxed);
  const auto budget =
      std::max<std::uint64_t>(min_retries_in_flight, active * retry_budget_percent / 100);
  if (retrying_.fetch_add(1, std::memory_order_relaxed) < budget) return true;
  end_retry();
  return false;
}

endpoint* least_busy_usable(cluster& c, const pick_context& ctx) noexcept {
  endpoint* best = nullptr;
  for (const auto& e : c.endpoints()) {
    if (!ctx.usable(*e)) continue;
    if (best == nullptr || e->load() < best->load()) best = e.get();
  }
  return best;
}

pick_result round_robin_balancer::choose(cluster& c, const pick_context& ctx) noexcept {
  auto& eps = c.endpoints();
  const auto n = eps.size();
  if (n == 0) return {};
  // A retry takes the endpoints after the one that failed, without taking the next request's
  // turn.  (By its place in this cluster: ids follow endpoints through reloads, so a cluster's
  // are not always consecutive, and a fallback's retry failed on another cluster.)
  const endpoint* failed = ctx.tried.empty() ? nullptr : ctx.tried.back();
  const bool ours = failed != nullptr && failed->index < n && eps[failed->index].get() == failed;
  std::size_t at = ours ? failed->index + 1
                        : static_cast<std::size_t>(next_.fetch_add(1, std::memory_order_relaxed));
  for (std::size_t i = 0; i < n; ++i, ++at)
    if (auto* e = eps[at % n].get(); ctx.usable(*e))
      return {.chosen = e, .reason = routing_reason::round_robin};
  return {};
}

pick_result least_request_balancer::choose(cluster& c, const pick_context& ctx) noexcept {
  auto& eps = c.endpoints();
  if (!ctx.tried.empty() || eps.size() < 2) return {.chosen = least_busy_usable(c, ctx)};
  // A generator per thread: no shared state between I/O threads.
  thread_local std::minstd_rand rng{static_cast<std::uint_fast32_t>(
      std::hash<std::thread::id>{}(std::this_thread::get_id()) ^
      static_cast<std::size_t>(std::chrono::steady_clock::now().time_since_epoch().count()))};
  const auto n = static_cast<std::uint32_t>(eps.size());
  const auto a = static_cast<std::uint32_t>(rng() % n);
  auto b = static_cast<std::uint32_t>(rng() % (n - 1));
  if (b >= a) ++b;  // two different endpoints
  auto* first = eps[a].get();
  auto* second = eps[b].get();
  if (!ctx.usable(*first) || !ctx.usable(*second)) return {.chosen = least_busy_usable(c, ctx)};
  return {.chosen = second->load() < first->load() ? second : first};
}

}  // namespace tokentap::proxy
