#include "proxy/cluster.hpp"

#include <chrono>
#include <functional>
#include <random>
#include <thread>

namespace tokentap::proxy {

cluster::cluster(const config::upstream_config& cfg, std::size_t first_id,
                 std::shared_ptr<boost::asio::ssl::context> tls,
                 std::unique_ptr<load_balancer> balancer)
    : cfg_(&cfg), tls_(std::move(tls)), balancer_(std::move(balancer)) {
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

endpoint* least_request_balancer::pick(cluster& c, const pick_context&) noexcept {
  auto& eps = c.endpoints();
  if (eps.empty()) return nullptr;
  if (eps.size() == 1) return eps.front().get();
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
  return second->active.load(std::memory_order_relaxed) <
                 first->active.load(std::memory_order_relaxed)
             ? second
             : first;
}

}  // namespace tokentap::proxy
