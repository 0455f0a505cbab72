#include "proxy/proxy_server.hpp"

#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "base/clock.hpp"
#include "base/json.hpp"
#include "base/log.hpp"
#include "hooks/govern/tenants.hpp"
#include "hooks/hook_chain.hpp"
#include "hooks/observe/endpoint_stats.hpp"
#include "hooks/observe/metrics.hpp"
#include "hooks/registry.hpp"
#include "net/http_rules.hpp"
#include "net/tls.hpp"
#include "proxy/admin.hpp"
#include "proxy/cluster.hpp"
#include "proxy/deferred_taps.hpp"
#include "proxy/health_checker.hpp"
#include "proxy/otlp_exporter.hpp"
#include "proxy/process_metrics.hpp"
#include "proxy/proxy_session.hpp"
#include "proxy/upstream_pool.hpp"
#include "tokentap/version.hpp"

namespace tokentap::proxy {

namespace {

// What makes two configured endpoints one: a reload that keeps it keeps its pooled connections
// and its outlier and probe state.
std::string endpoint_identity(const config::upstream_config& up, const config::url& u) {
  return up.name + '\x1f' + u.to_string() + '\x1f' + (up.tls_verify ? "v" : "-") + up.ca_file;
}

// A cluster's series, read for as long as its generation lives (`owner`).
void export_cluster(hooks::metrics_registry& m, const cluster& c,
                    const std::weak_ptr<const void>& owner) {
  const auto& up = c.cfg();
  // Retries on other endpoints, per upstream and reason: labels bounded by the config.
  for (std::size_t r = 0; r < static_cast<std::size_t>(retry_reason::count_); ++r) {
    const auto why = static_cast<retry_reason>(r);
    m.add_counter_source(
        "tokentap_upstream_retries_total",
        "Requests moved to another endpoint of their upstream before any byte reached the "
        "client, by reason",
        [&c, why] { return c.retries(why); },
        {{"upstream", up.name}, {"reason", std::string(to_string(why))}}, owner);
  }
  // Routing decisions, by the reasons its policy gives, and its fallback.
  auto reasons = c.reasons();
  reasons.push_back(routing_reason::fallback);
  for (const auto why : reasons)
    m.add_counter_source(
        "tokentap_routing_decisions_total",
        "Requests routed, by the upstream's policy and the reason for the endpoint chosen",
        [&c, why] { return c.decisions(why); },
        {{"upstream", up.name}, {"policy", up.balance}, {"reason", std::string(to_string(why))}},
        owner);
  // Per endpoint: in flight, in balancing (not ejected), ejections, probes.
  for (const auto& e : c.endpoints()) {
    const std::map<std::string, std::string> labels{{"upstream", up.name}, {"endpoint", e->label}};
    const proxy::endpoint* ep = e.get();
    m.add_gauge_source(
        "tokentap_upstream_endpoint_active_streams", "Exchanges in flight on an endpoint",
        [ep] { return static_cast<double>(ep->active.load(std::memory_order_relaxed)); }, labels,
        owner);
    m.add_gauge_source(
        "tokentap_upstream_endpoint_healthy",
        "1 while an endpoint is in balancing, 0 while outlier detection has ejected it or it "
        "fails its health probe",
        [ep] { return ep->available(base::mono_now_ns()) ? 1.0 : 0.0; }, labels, owner);
    m.add_counter_source(
        "tokentap_upstream_ejections_total",
        "Times outlier detection left an endpoint out of balancing",
        [&c, ep] { return c.ejections(*ep); }, labels, owner);
    m.add_endpoint(
        up.name, e->label,
        [ep] { return static_cast<double>(ep->active.load(std::memory_order_relaxed)); },
        [ep] {
          const auto now = base::mono_now_ns();
          hooks::endpoint_health h;
          h.healthy = ep->available(now);
          h.probe_failing = ep->probe_failing.load(std::memory_order_relaxed);
          h.engine_running = ep->engine_running.load(std::memory_order_relaxed);
          h.engine_waiting = ep->engine_waiting.load(std::memory_order_relaxed);
          h.engine_kv_usage = ep->engine_kv_usage.load(std::memory_order_relaxed);
          for (std::size_t i = 0; i < h.engine_ttft_ms.size(); ++i) {
            const double s = ep->engine_ttft_s[i].load(std::memory_order_relaxed);
            h.engine_ttft_ms[i] = s < 0 ? -1 : s * 1000;
          }
          if (const auto until = ep->ejected_until_ns.load(std::memory_order_relaxed); until > 0)
            h.ejection_ends_in_s = static_cast<double>(until - now) / 1e9;
          return h;
        },
        owner);
    if (up.engine_metrics.enabled) {
      // The engine's own load, as its /metrics said at the last scrape (absent until read).
      for (const bool waiting : {false, true})
        m.add_gauge_source(
            "tokentap_engine_requests",
            "The engine's own count of requests running (in its batch) and waiting (queued), "
            "from its /metrics; -1 while unknown",
            [ep, waiting] {
              return (waiting ? ep->engine_waiting : ep->engine_running)
                  .load(std::memory_order_relaxed);
            },
            {{"upstream", up.name},
             {"endpoint", e->label},
             {"state", waiting ? "waiting" : "running"}},
            owner);
      m.add_gauge_source(
          "tokentap_engine_kv_cache_usage_ratio",
          "The engine's KV-cache use (0..1) from its /metrics; -1 while unknown or not reported",
          [ep] { return ep->engine_kv_usage.load(std::memory_order_relaxed); }, labels, owner);
      // What lies between the proxy and the engine: the proxy's TTFT quantile on this endpoint
      // less the engine's own, over the same window.
      static constexpr const char* quantiles[3] = {"0.5", "0.95", "0.99"};
      for (std::size_t i = 0; i < 3; ++i)
        m.add_gauge_source(
            "tokentap_engine_ttft_gap_seconds",
            "The proxy's time to first token less the engine's own (its histogram), at a "
            "quantile over the stats window: the network, the engine's HTTP front end, the "
            "proxy; NaN while either is unknown",
            [&m, ep, i, up = up.name, label = e->label] {
              const auto proxy = m.endpoints().ttft_ms(up, label)[i];
              const double engine = ep->engine_ttft_s[i].load(std::memory_order_relaxed);
              return hooks::endpoint_stats::gap_ms(proxy, engine < 0 ? -1 : engine * 1000) / 1000;
            },
            {{"upstream", up.name}, {"endpoint", e->label}, {"quantile", quantiles[i]}}, owner);
      static constexpr const char* results[3] = {"ok", "error", "garbage"};
      for (int r = 0; r < 3; ++r)
        m.add_counter_source(
            "tokentap_engine_scrapes_total",
            "Scrapes of an engine's /metrics: ok, error (refused, timed out, not 2xx), garbage "
            "(no engine's figures)",
            [ep, r] { return ep->engine_scrapes[r].load(std::memory_order_relaxed); },
            {{"upstream", up.name}, {"endpoint", e->label}, {"result", results[r]}}, owner);
    }
    if (up.health.enabled)
      for (const bool passed : {true, false})
        m.add_counter_source(
            "tokentap_upstream_health_checks_total",
            "Active health probes of an endpoint, by result",
            [ep, passed] {
              return (passed ? ep->probes_passed : ep->probes_failed)
                  .load(std::memory_order_relaxed);
            },
            {{"upstream", up.name},
             {"endpoint", e->label},
             {"result", passed ? "success" : "failure"}},
            owner);
  }
}

// Faults injected, per rule and kind (a header rule's by what its requests asked for).
void export_faults(hooks::metrics_registry& m, const fault_plan& plan,
                   const std::weak_ptr<const void>& owner) {
  for (std::size_t i = 0; i < plan.rules().size(); ++i) {
    const auto& rule = plan.rules()[i];
    for (const auto k :
         {fault_kind::delay, fault_kind::event_delay, fault_kind::cut, fault_kind::abort}) {
      if (rule.kind != fault_kind::from_header && rule.kind != k) continue;
      m.add_counter_source(
          "tokentap_faults_injected_total",
          "Faults injected on purpose (faults:), by rule and kind: delay before forwarding, "
          "event_delay, cut, abort",
          [&plan, i, k] { return plan.injected(i, k); },
          {{"rule", rule.name}, {"kind", std::string(to_string(k))}}, owner);
    }
  }
}

// What outlier detection and the probes know of an endpoint, carried to its successor.
void carry_state(const endpoint& from, endpoint& to) {
  to.consecutive_failures.store(from.consecutive_failures.load(std::memory_order_relaxed),
                                std::memory_order_relaxed);
  to.ejected_until_ns.store(from.ejected_until_ns.load(std::memory_order_relaxed),
                            std::memory_order_relaxed);
  to.ejections.store(from.ejections.load(std::memory_order_relaxed), std::memory_order_relaxed);
  to.probe_failing.store(from.probe_failing.load(std::memory_order_relaxed),
                         std::memory_order_relaxed);
}

}  // namespace

namespace {
constexpr const char* reloads_help =
    "Configuration reloads (SIGHUP, POST /admin/reload), by result: success (applied to new "
    "requests) or failure (refused; the running configuration kept)";
}  // namespace

proxy_stats::proxy_stats(hooks::metrics_registry& m)
    : upstream_connects(m.counter("tokentap_upstream_connects_total",
                                  "Connections the proxy opened to upstream endpoints for "
                                  "exchanges (health checks and engine scrapes not included)")),
      upstream_reuses(m.counter("tokentap_upstream_reuses_total",
                                "Exchanges sent on a kept-alive upstream connection")),
      client_disconnects(m.counter("tokentap_client_disconnects_total",
                                   "Clients that left in the middle of an exchange")),
      rejected_requests(m.counter(
          "tokentap_rejected_requests_total",
          "Requests the proxy answered itself: malformed (400), no route (404), head or body too "
          "large (431, 413), and those a hook answered in its request phase")),
      active_streams(m.gauge("tokentap_proxy_exchanges_in_flight",
                             "Exchanges being forwarded (request sent upstream to response end), "
                             "whatever hooks run")),
      reloads_applied(
          m.counter("tokentap_config_reloads_total", reloads_help, {{"result", "success"}})),
      reloads_refused(
          m.counter("tokentap_config_reloads_total", reloads_help, {{"result", "failure"}})),
      last_reload_ok(m.gauge(
          "tokentap_config_last_reload_successful",
          "1 when the last reload was applied (or none was asked for), 0 when it was refused")) {
  last_reload_ok.set(1);
}

proxy_shared::proxy_shared(std::shared_ptr<hooks::metrics_registry> m)
    : metrics(std::move(m)), stats(*metrics) {}

proxy_shared::~proxy_shared() = default;

proxy_server::proxy_server(config::config cfg, std::shared_ptr<hooks::tap_factory> taps,
                           std::function<void(hooks::hook_registry&)> more_hooks)
    : runtime_(cfg.threads), fixed_taps_(std::move(taps)) {
  // What the hooks' sections imply of the proxy's own settings (an admission rule per tenant
  // tells tenants apart) is set before the metrics and the tenant names read them.
  hooks::builtin_hooks().complete(cfg);
  shared_ = std::make_unique<proxy_shared>(std::make_shared<hooks::metrics_registry>(cfg));
  shared_->credential_salt = hooks::credential_salt(cfg.tenants.salt);
  if (cfg.tenants.enabled)
    shared_->tenants = std::make_unique<hooks::tenant_names>(cfg.tenants.max);
  auto& m = *shared_->metrics;
  m.add_gauge_source("tokentap_config_generation",
                     "The configuration new requests use: 1 at start, one more per applied reload",
                     [s = shared_.get()] { return static_cast<double>(s->current()->number); });
  if (!fixed_taps_) {
    hooks_ = std::make_unique<hooks::hook_registry>(hooks::builtin_hooks(
        shared_->metrics,
        [m = shared_->metrics](const config::otel_config& c) -> std::shared_ptr<hooks::span_sink> {
          auto e = std::make_shared<otlp_exporter>(c);
          e->publish(*m, e);
          return e;
        }));
    if (more_hooks) more_hooks(*hooks_);
  }
  shared_->runtime = &runtime_;
  for (unsigned i = 0; i < runtime_.size(); ++i)
    shared_->pools.push_back(std::make_unique<upstream_pool>(runtime_.at(i).ioc));
  std::lock_guard lk(reload_mu_);
  shared_->publish(build(std::move(cfg), nullptr));
}

std::shared_ptr<generation> proxy_server::build(config::config cfg, const generation* previous) {
  // A retired generation is destroyed on the control thread, never on an I/O thread that let it
  // go last: its hooks may join threads (the OTLP exporter's last export, the Redis sync).
  std::shared_ptr<generation> g(new generation,
                                [r = reaper_](generation* dead) { r->retire(dead); });
  g->number = previous ? previous->number + 1 : 1;
  g->cfg = std::move(cfg);
  const auto& conf = g->cfg;
  g->rules = std::make_shared<const connection_rules>(conf.timeouts, conf.limits);
  for (const auto& up : conf.upstreams) {
    const bool https = up.endpoints.front().tls;
    if (https && !up.tls_verify)
      TT_LOG(warn) << "upstream " << up.name
                   << ": TLS certificate verification is OFF (tls_verify: false); anyone on the "
                      "path can impersonate it";
    g->clusters.push_back(std::make_unique<cluster>(
        up, 0, https ? net::tls_client_context(up.tls_verify, up.ca_file) : nullptr));
    // Ids by identity: the same endpoint keeps its id (its pooled connections) and its state; a
    // new one takes an id never given before (connections to a removed endpoint may still be
    // in flight under its id).
    for (const auto& e : g->clusters.back()->endpoints()) {
      const auto [it, added] =
          endpoint_ids_.try_emplace(endpoint_identity(up, e->target), next_endpoint_id_);
      if (added) ++next_endpoint_id_;
      e->id = it->second;
      if (added || previous == nullptr) continue;
      for (const auto& c : previous->clusters)
        for (const auto& old : c->endpoints())
          if (old->id == e->id) carry_state(*old, *e);
    }
  }
  if (!conf.faults.empty())
    g->faults = std::make_unique<const fault_plan>(conf.faults, conf.admin_token);
  for (const auto& up : conf.upstreams)
    if (!up.fallback.empty())
      g->clusters[static_cast<std::size_t>(&up - conf.upstreams.data())]->set_fallback(
          g->clusters[up.fallback_index].get());
  // The hooks last but for the metrics: makers export their state's series, replacing the
  // running generation's, so nothing may fail after them (a TLS context above may).
  if (hooks_) {
    auto factories = hooks_->build(conf);
    g->count_local_replies = !factories.empty() && std::find(conf.hooks.begin(), conf.hooks.end(),
                                                             "metrics") != conf.hooks.end();
    if (!factories.empty())
      g->taps = std::make_shared<hooks::hook_chain_factory>(conf, std::move(factories));
  } else {
    g->taps = fixed_taps_;
  }
  const std::weak_ptr<const void> owner = g;
  for (const auto& c : g->clusters) export_cluster(*shared_->metrics, *c, owner);
  if (g->faults) export_faults(*shared_->metrics, *g->faults, owner);
  return g;
}

reload_result proxy_server::reload(config::config next) {
  std::lock_guard lk(reload_mu_);
  const auto running = shared_->current();
  std::shared_ptr<generation> g;
  try {
    config::validate(next);
    hooks::builtin_hooks().complete(next);
    if (auto keys = config::restart_only_changes(running->cfg, next); !keys.empty())
      return refused("changes settings that need a restart: " + keys);
    g = build(std::move(next), running.get());
  } catch (const std::exception& e) {
    return refused(e.what());
  }
  // Ids of endpoints the new configuration no longer names: their idle connections go, and the
  // connections of their exchanges still in flight are closed when those end.  Their identities
  // are forgotten (one named again later is a new endpoint), so the map stays the size of the
  // configuration.
  std::set<std::size_t> kept, gone;
  for (const auto& c : g->clusters)
    for (const auto& e : c->endpoints()) kept.insert(e->id);
  for (const auto& c : running->clusters)
    for (const auto& e : c->endpoints())
      if (!kept.contains(e->id)) {
        gone.insert(e->id);
        e->retired.store(true, std::memory_order_relaxed);
      }
  std::erase_if(endpoint_ids_, [&](const auto& entry) { return !kept.contains(entry.second); });
  shared_->publish(g);
  if (base::log::level l; base::log::parse_level(g->cfg.log_level, l)) base::log::set_level(l);
  shared_->stats.reloads_applied.add();
  shared_->stats.last_reload_ok.set(1);
  if (started_) {
    for (unsigned i = 0; i < runtime_.size(); ++i)
      asio::post(runtime_.at(i).ioc, [pool = shared_->pools[i].get(), gone] {
        for (const auto id : gone) pool->retire(id);
      });
    start_probes(g);
  }
  TT_LOG(info) << "configuration reloaded: generation " << g->number
               << " takes new requests; exchanges in flight finish on generation "
               << running->number;
  return {.applied = true, .generation = g->number, .reason = {}};
}

reload_result proxy_server::refused(std::string why) {
  shared_->stats.reloads_refused.add();
  shared_->stats.last_reload_ok.set(0);
  reload_result r{.applied = false,
                  .generation = shared_->current()->number,
                  .reason = config::config_error::one_line(why)};
  TT_LOG(warn) << "configuration reload refused, generation " << r.generation
               << " stays in use: " << r.reason;
  return r;
}

reload_result proxy_server::reload_from_source() {
  if (!config_source_) return refused("this proxy has no configuration file to read again");
  config::config next;
  try {
    next = config_source_();
  } catch (const std::exception& e) {
    return refused(e.what());
  }
  return reload(std::move(next));
}

void proxy_server::start_probes(std::shared_ptr<const generation> g) {
  // The active probes run on the first worker (a session registers on its worker's thread).
  auto& first = runtime_.at(0);
  auto next = std::make_shared<health_checks>();
  asio::post(first.ioc, [&first, next, g = std::move(g), shared = shared_.get(),
                         old = std::move(health_checks_)] {
    if (old) old->stop();
    next->start(first, g, *shared);
  });
  health_checks_ = std::move(next);
}

void proxy_server::generation_reaper::retire(generation* g) {
  std::unique_lock lk(mu_);
  if (open_) {
    // Owned by the handler: a retirement still queued when the pool is abandoned (a constructor
    // that throws) frees the generation as the handler is destroyed.
    asio::post(pool_, [dead = std::unique_ptr<generation>(g)]() mutable { dead.reset(); });
    return;
  }
  lk.unlock();
  delete g;
}

void proxy_server::generation_reaper::close() {
  std::lock_guard lk(mu_);
  open_ = false;
}

void proxy_server::set_config_source(std::function<config::config()> source) {
  config_source_ = std::move(source);
}

proxy_server::~proxy_server() {
  shutdown(std::chrono::milliseconds(0));
  join();
  // Generations retired from here on are destroyed where they are let go (this thread).
  reaper_->close();
  control_.join();
}

void proxy_server::start() {
  const auto gen = shared_->current();
  const auto& cfg = gen->cfg;
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
    auto text = m->prometheus_text();
    append_process_metrics(text, version_string);
    return admin::response{200, "text/plain; version=0.0.4; charset=utf-8", std::move(text)};
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
        "{\"endpoints\":[\"/dashboard\",\"/api/stats\",\"/metrics\",\"/healthz\","
        "\"/readyz\",\"/admin/reload\"]}\n"};
  };
  site->slow_handlers["/admin/reload"] = [this](std::string_view method, std::string_view) {
    return reload_request(method);
  };
  site->slow_pool = &control_;
  std::shared_ptr<const admin::site> admin_site = std::move(site);
  admin_endpoint_ = runtime_.listen(
      cfg.admin.host, cfg.admin.port,
      [admin_site](tcp_socket s, net::worker& w) {
        admin::start_admin_session(std::move(s), w, admin_site);
      },
      1024, net::listener_role::control);
  runtime_.start();
  std::lock_guard lk(reload_mu_);
  started_ = true;
  start_probes(shared_->current());
}

admin::response proxy_server::reload_request(std::string_view method) {
  if (method != "POST")
    return {405, "application/json",
            net::error_body(405, "method_not_allowed", "POST /admin/reload to reload")};
  const auto r = reload_from_source();
  std::string body = "{\"applied\":";
  body += r.applied ? "true" : "false";
  body += ",\"generation\":" + std::to_string(r.generation);
  if (!r.applied) {
    body += ",\"reason\":";
    base::json::append_string(body, r.reason);
  }
  body += "}\n";
  return {r.applied ? 200u : 400u, "application/json", std::move(body)};
}

void proxy_server::shutdown() {
  shutdown(shared_->current()->cfg.timeouts.shutdown_grace);
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
