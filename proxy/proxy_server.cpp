#include "proxy/proxy_server.hpp"

#include <algorithm>
#include <map>
#include <string>

#include "config/log.hpp"
#include "hooks/endpoint_stats.hpp"
#include "hooks/hook_chain.hpp"
#include "hooks/metrics.hpp"
#include "hooks/tenants.hpp"
#include "net/tls.hpp"
#include "proxy/admin.hpp"
#include "proxy/cluster.hpp"
#include "proxy/deferred_taps.hpp"
#include "proxy/health_checker.hpp"
#include "proxy/proxy_session.hpp"
#include "proxy/upstream_pool.hpp"

namespace tokentap::proxy {

proxy_server::proxy_server(config::config cfg, std::shared_ptr<hooks::tap_factory> taps,
                           std::function<void(hooks::hook_registry&)> more_hooks)
    : runtime_(cfg.threads), shared_(std::make_unique<proxy_shared>()) {
  shared_->cfg = std::move(cfg);
  shared_->metrics = std::make_shared<hooks::metrics_registry>(shared_->cfg);
  shared_->credential_salt = hooks::credential_salt(shared_->cfg.tenants.salt);
  if (shared_->cfg.tenants.enabled)
    shared_->tenants = std::make_unique<hooks::tenant_names>(shared_->cfg.tenants.max);
  // What the proxy answers or loses on its own, before or outside any tapped stream.
  shared_->metrics->add_counter_source(
      "tokentap_rejected_requests_total",
      "Requests the proxy answered itself: malformed (400), no route (404), head or body too "
      "large (431, 413)",
      [s = shared_.get()] { return s->stats.rejected_requests.load(std::memory_order_relaxed); });
  shared_->metrics->add_counter_source(
      "tokentap_client_disconnects_total", "Clients that left in the middle of an exchange",
      [s = shared_.get()] { return s->stats.client_disconnects.load(std::memory_order_relaxed); });
  if (!taps) {
    auto registry = hooks::builtin_hooks(shared_->metrics);
    if (more_hooks) more_hooks(registry);
    auto factories = registry.build(shared_->cfg);
    const auto& hooks = shared_->cfg.hooks;
    shared_->count_local_replies =
        !factories.empty() && std::find(hooks.begin(), hooks.end(), "metrics") != hooks.end();
    if (!factories.empty())
      taps = std::make_shared<hooks::hook_chain_factory>(shared_->cfg, std::move(factories));
  }
  shared_->taps = std::move(taps);
  shared_->runtime = &runtime_;
  std::size_t endpoints = 0;
  for (const auto& up : shared_->cfg.upstreams) {
    const bool https = up.endpoints.front().tls;
    if (https && !up.tls_verify)
      TT_LOG(warn) << "upstream " << up.name
                   << ": TLS certificate verification is OFF (tls_verify: false); anyone on the "
                      "path can impersonate it";
    shared_->clusters.push_back(std::make_unique<cluster>(
        up, endpoints, https ? net::tls_client_context(up.tls_verify, up.ca_file) : nullptr));
    endpoints += up.endpoints.size();
    // Retries on other endpoints, per upstream and reason: labels bounded by the config.
    const auto* c = shared_->clusters.back().get();
    for (std::size_t r = 0; r < static_cast<std::size_t>(retry_reason::count_); ++r) {
      const auto why = static_cast<retry_reason>(r);
      shared_->metrics->add_counter_source(
          "tokentap_upstream_retries_total",
          "Requests moved to another endpoint of their upstream before any byte reached the "
          "client, by reason",
          [c, why] { return c->retries(why); },
          {{"upstream", up.name}, {"reason", std::string(to_string(why))}});
    }
    // Routing decisions, by the reasons its policy gives (and its fallback).
    std::vector<routing_reason> reasons;
    switch (up.balance) {
      case config::balance_policy::round_robin:
        reasons = {routing_reason::round_robin};
        break;
      case config::balance_policy::least_request:
        reasons = {routing_reason::least_request};
        break;
      case config::balance_policy::prefix:
        reasons = {routing_reason::prefix_match, routing_reason::least_request,
                   routing_reason::load_bound};
        if (up.prefix.new_conversations == config::prefix_config::placement::hash)
          reasons.push_back(routing_reason::hash);
        break;
    }
    reasons.push_back(routing_reason::fallback);
    for (const auto why : reasons)
      shared_->metrics->add_counter_source(
          "tokentap_routing_decisions_total",
          "Requests routed, by the upstream's policy and the reason for the endpoint chosen",
          [c, why] { return c->decisions(why); },
          {{"upstream", up.name},
           {"policy", std::string(config::to_string(up.balance))},
           {"reason", std::string(to_string(why))}});
    // Per endpoint: in flight, in balancing (not ejected), ejections.
    for (const auto& e : c->endpoints()) {
      const std::map<std::string, std::string> labels{{"upstream", up.name},
                                                      {"endpoint", e->label}};
      const proxy::endpoint* ep = e.get();
      shared_->metrics->add_gauge_source(
          "tokentap_upstream_endpoint_active_streams", "Exchanges in flight on an endpoint",
          [ep] { return static_cast<double>(ep->active.load(std::memory_order_relaxed)); }, labels);
      shared_->metrics->add_gauge_source(
          "tokentap_upstream_endpoint_healthy",
          "1 while an endpoint is in balancing, 0 while outlier detection has ejected it or it "
          "fails its health probe",
          [ep] { return ep->available(steady_now_ns()) ? 1.0 : 0.0; }, labels);
      shared_->metrics->add_counter_source(
          "tokentap_upstream_ejections_total",
          "Times outlier detection left an endpoint out of balancing",
          [c, ep] { return c->ejections(*ep); }, labels);
      shared_->metrics->endpoints().add(
          up.name, e->label,
          [ep] { return static_cast<double>(ep->active.load(std::memory_order_relaxed)); },
          [ep] { return ep->available(steady_now_ns()); });
      if (up.health.enabled)
        for (const bool passed : {true, false})
          shared_->metrics->add_counter_source(
              "tokentap_upstream_health_checks_total",
              "Active health probes of an endpoint, by result",
              [ep, passed] {
                return (passed ? ep->probes_passed : ep->probes_failed)
                    .load(std::memory_order_relaxed);
              },
              {{"upstream", up.name},
               {"endpoint", e->label},
               {"result", passed ? "success" : "failure"}});
    }
  }
  for (const auto& up : shared_->cfg.upstreams)
    if (!up.fallback.empty())
      shared_->clusters[static_cast<std::size_t>(&up - shared_->cfg.upstreams.data())]
          ->set_fallback(shared_->clusters[up.fallback_index].get());
  for (unsigned i = 0; i < runtime_.size(); ++i)
    shared_->pools.push_back(
        std::make_unique<upstream_pool>(runtime_.at(i).ioc, shared_->cfg, endpoints));
}

proxy_server::~proxy_server() {
  shutdown(std::chrono::milliseconds(0));
  join();
}

void proxy_server::start() {
  auto& cfg = shared_->cfg;
  auto* shared = shared_.get();
  endpoint_ = runtime_.listen(
      cfg.listen.host, cfg.listen.port,
      [shared](tcp_socket s, net::worker& w) { start_proxy_session(std::move(s), w, *shared); },
      cfg.limits.max_connections, net::listener_role::traffic, cfg.reuse_port);

  auto site = std::make_shared<admin::site>();
  site->bearer_token = cfg.admin_token;
  auto& handlers = site->handlers;
  handlers["/healthz"] = [](std::string_view, std::string_view) {
    return admin::response{200, "application/json", "{\"status\":\"ok\"}\n"};
  };
  handlers["/readyz"] = [rt = &runtime_](std::string_view, std::string_view) {
    if (rt->draining())
      return admin::response{503, "application/json", "{\"status\":\"draining\"}\n"};
    return admin::response{200, "application/json", "{\"status\":\"ready\"}\n"};
  };
  handlers["/metrics"] = [m = shared_->metrics](std::string_view, std::string_view) {
    return admin::response{200, "text/plain; version=0.0.4; charset=utf-8", m->prometheus_text()};
  };
  handlers["/api/stats"] = [m = shared_->metrics](std::string_view, std::string_view) {
    return admin::response{200, "application/json", m->stats_json()};
  };
  handlers["/dashboard"] = [](std::string_view, std::string_view) {
    return admin::response{200, "text/html; charset=utf-8", std::string(admin::dashboard_html())};
  };
  handlers["/"] = [](std::string_view, std::string_view) {
    return admin::response{
        200, "application/json",
        "{\"endpoints\":[\"/dashboard\",\"/api/stats\",\"/metrics\",\"/healthz\",\"/readyz\"]}\n"};
  };
  std::shared_ptr<const admin::site> admin_site = std::move(site);
  admin_endpoint_ = runtime_.listen(
      cfg.admin.host, cfg.admin.port,
      [admin_site](tcp_socket s, net::worker& w) {
        admin::start_admin_session(std::move(s), w, admin_site);
      },
      1024, net::listener_role::control);
  runtime_.start();
  // The active probes run on the first worker (a session registers on its worker's thread).
  auto& first = runtime_.at(0);
  asio::post(first.ioc, [&first, shared] { start_health_checks(first, *shared); });
}

void proxy_server::shutdown() {
  shutdown(shared_->cfg.timeouts.shutdown_grace);
}

void proxy_server::shutdown(std::chrono::milliseconds grace) {
  runtime_.shutdown(grace);
}

void proxy_server::join() {
  runtime_.join();
}

// A per-io_context counter of an Asio service, summed over the I/O threads (0 where the service
// was never made).
template <class Service, class Count>
static std::uint64_t sum_over_workers(net::server_runtime& rt, Count count) {
  std::uint64_t n = 0;
  for (unsigned i = 0; i < rt.size(); ++i) {
    auto& ioc = rt.at(i).ioc;
    if (asio::has_service<Service>(ioc)) n += count(asio::use_service<Service>(ioc));
  }
  return n;
}

std::uint64_t proxy_server::deferred_taps() {
  return sum_over_workers<proxy::deferred_taps>(
      runtime_, [](proxy::deferred_taps& d) { return d.deferred(); });
}

std::uint64_t proxy_server::deferred_taps_waiting() {
  return sum_over_workers<proxy::deferred_taps>(
      runtime_, [](proxy::deferred_taps& d) { return d.waiting(); });
}

std::uint64_t proxy_server::reads_behind() {
  return sum_over_workers<proxy::deferred_taps>(runtime_,
                                                [](proxy::deferred_taps& d) { return d.behind(); });
}

}  // namespace tokentap::proxy
