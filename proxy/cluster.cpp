#include "proxy/cluster.hpp"

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
      balancer_(balancer ? std::move(balancer) : make_balancer(cfg.balance)) {
  for (const auto& u : cfg.endpoints) {
    auto e = std::make_shared<endpoint>();
    e->id = first_id + endpoints_.size();
    e->target = u;
    e->host_header = u.host_header();
    e->label = (u.host.find(':') != std::string::npos ? "[" + u.host + "]" : u.host) + ":" +
               std::to_string(u.port);
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

std::unique_ptr<load_balancer> make_balancer(config::balance_policy p) {
  switch (p) {
    case config::balance_policy::round_robin:
      return std::make_unique<round_robin_balancer>();
    case config::balance_policy::least_request:
      break;
  }
  return std::make_unique<least_request_balancer>();
}

std::int64_t steady_now_ns() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

bool cluster::record_failure(endpoint& e) noexcept {
  const auto& o = cfg_->outlier;
  const auto failures = e.consecutive_failures.fetch_add(1, std::memory_order_relaxed) + 1;
  if (o.consecutive_failures == 0 || failures < o.consecutive_failures) return false;
  const auto now = steady_now_ns();
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

namespace {

// The least busy usable endpoint (neither tried nor ejected); nullptr when there is none.
endpoint* least_busy_usable(cluster& c, const pick_context& ctx) noexcept {
  endpoint* best = nullptr;
  for (const auto& e : c.endpoints()) {
    if (!ctx.usable(*e)) continue;
    if (best == nullptr ||
        e->active.load(std::memory_order_relaxed) < best->active.load(std::memory_order_relaxed))
      best = e.get();
  }
  return best;
}

}  // namespace

endpoint* round_robin_balancer::pick(cluster& c, const pick_context& ctx) noexcept {
  auto& eps = c.endpoints();
  const auto n = eps.size();
  if (n == 0) return nullptr;
  // A retry takes the endpoints after the one that failed, without taking the next request's
  // turn.
  std::size_t at = ctx.tried.empty()
                       ? static_cast<std::size_t>(next_.fetch_add(1, std::memory_order_relaxed))
                       : ctx.tried.back()->id - eps.front()->id + 1;
  for (std::size_t i = 0; i < n; ++i, ++at)
    if (auto* e = eps[at % n].get(); ctx.usable(*e)) return e;
  return nullptr;
}

endpoint* least_request_balancer::pick(cluster& c, const pick_context& ctx) noexcept {
  auto& eps = c.endpoints();
  if (!ctx.tried.empty()) return least_busy_usable(c, ctx);
  if (eps.empty()) return nullptr;
  if (eps.size() == 1) return ctx.usable(*eps.front()) ? eps.front().get() : nullptr;
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
  if (!ctx.usable(*first) || !ctx.usable(*second)) return least_busy_usable(c, ctx);
  return second->active.load(std::memory_order_relaxed) <
                 first->active.load(std::memory_order_relaxed)
             ? second
             : first;
}

}  // namespace tokentap::proxy
