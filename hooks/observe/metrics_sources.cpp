// What /metrics and /api/stats show beside the streams' own series: counters and gauges other
// components count into, or keep themselves and have read at each scrape (dropped with their
// owner); their /api/stats sections; response heads per upstream endpoint.
#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <algorithm>
#include <sstream>

#include "hooks/observe/endpoint_stats.hpp"
#include "hooks/observe/metrics.hpp"

namespace tokentap::hooks {

void counter_ref::add(std::uint64_t n) const noexcept {
  c_->Increment(static_cast<double>(n));
}

std::uint64_t counter_ref::value() const noexcept {
  return static_cast<std::uint64_t>(c_->Value());
}

void gauge_ref::add(double n) const noexcept {
  g_->Increment(n);
}

void gauge_ref::sub(double n) const noexcept {
  g_->Decrement(n);
}

void gauge_ref::set(double v) const noexcept {
  g_->Set(v);
}

double gauge_ref::value() const noexcept {
  return g_->Value();
}

counter_ref metrics_registry::counter(const std::string& name, const std::string& help,
                                      const std::map<std::string, std::string>& labels) {
  std::lock_guard lk(mu_);
  return counter_ref(
      prometheus::BuildCounter().Name(name).Help(help).Register(*registry_).Add(labels));
}

gauge_ref metrics_registry::gauge(const std::string& name, const std::string& help,
                                  const std::map<std::string, std::string>& labels) {
  std::lock_guard lk(mu_);
  return gauge_ref(prometheus::BuildGauge().Name(name).Help(help).Register(*registry_).Add(labels));
}

void metrics_registry::add_counter_source(const std::string& name, const std::string& help,
                                          std::function<std::uint64_t()> read,
                                          const std::map<std::string, std::string>& labels,
                                          owner_ref owner) {
  std::lock_guard lk(mu_);
  auto& family = prometheus::BuildCounter().Name(name).Help(help).Register(*registry_);
  auto* counter = &family.Add(labels);
  const bool has_owner = !owner.expired();
  const auto same =
      std::find_if(sources_.begin(), sources_.end(),
                   [counter](const counter_source& s) { return s.metric == counter; });
  if (same == sources_.end()) {
    counter_source s{{std::move(owner), has_owner}, &family, counter, std::move(read)};
    sources_.push_back(std::move(s));
    return;
  }
  // The series had a source: what it counted since the last scrape first, then the new one's
  // count from where it stands now.
  bool alive = false;
  if (auto keep = same->lock(alive); alive) {
    const auto now = same->read();
    if (now > same->seen) counter->Increment(static_cast<double>(now - same->seen));
  }
  same->owner = std::move(owner);
  same->has_owner = has_owner;
  same->read = std::move(read);
  same->seen = same->read();
}

void metrics_registry::add_gauge_source(const std::string& name, const std::string& help,
                                        std::function<double()> read,
                                        const std::map<std::string, std::string>& labels,
                                        owner_ref owner) {
  std::lock_guard lk(mu_);
  auto& family = prometheus::BuildGauge().Name(name).Help(help).Register(*registry_);
  auto* gauge = &family.Add(labels);
  const bool has_owner = !owner.expired();
  const auto same = std::find_if(gauge_sources_.begin(), gauge_sources_.end(),
                                 [gauge](const gauge_source& g) { return g.metric == gauge; });
  if (same == gauge_sources_.end()) {
    gauge_sources_.push_back({{std::move(owner), has_owner}, &family, gauge, std::move(read)});
    return;
  }
  same->owner = std::move(owner);
  same->has_owner = has_owner;
  same->read = std::move(read);
}

void metrics_registry::add_endpoint(const std::string& upstream, const std::string& endpoint,
                                    std::function<double()> active,
                                    std::function<endpoint_health()> health, owner_ref owner) {
  endpoints_->add(upstream, endpoint, std::move(active), std::move(health), owner);
  std::lock_guard lk(mu_);
  endpoint_owners_[upstream + '\x1f' + endpoint + '\x1f'] = {std::move(owner), true};
}

namespace {

// Reads each source with `read`; drops those whose owner is gone, and their series.
template <class Source, class Read>
void poll_each(std::vector<Source>& sources, Read read) {
  std::erase_if(sources, [&read](Source& s) {
    bool alive = false;
    const auto keep = s.lock(alive);
    if (!alive) {
      s.family->Remove(s.metric);
      return true;
    }
    read(s);
    return false;
  });
}

}  // namespace

void metrics_registry::poll_sources() {
  // Endpoints no configuration names any more: their response counts go.
  std::erase_if(endpoint_owners_, [this](const auto& e) {
    if (!e.second.owner.expired()) return false;
    auto it = endpoint_counters_.lower_bound(e.first);
    while (it != endpoint_counters_.end() && it->first.starts_with(e.first)) {
      endpoint_responses_->Remove(it->second);
      it = endpoint_counters_.erase(it);
    }
    return true;
  });
  poll_each(sources_, [](counter_source& s) {
    const auto now = s.read();
    if (now > s.seen) s.metric->Increment(static_cast<double>(now - s.seen));
    s.seen = std::max(s.seen, now);
  });
  poll_each(gauge_sources_, [](gauge_source& g) { g.metric->Set(g.read()); });
}

void metrics_registry::add_stats_section(std::string name,
                                         std::function<void(base::json::writer&)> render,
                                         owner_ref owner) {
  std::lock_guard lk(mu_);
  const bool has_owner = !owner.expired();
  const auto same = std::find_if(sections_.begin(), sections_.end(),
                                 [&name](const section& s) { return s.name == name; });
  if (same == sections_.end()) {
    sections_.push_back({{std::move(owner), has_owner}, std::move(name), std::move(render)});
    return;
  }
  same->owner = std::move(owner);
  same->has_owner = has_owner;
  same->render = std::move(render);
}

void metrics_registry::count_endpoint_response(std::string_view upstream, std::string_view endpoint,
                                               unsigned code) {
  std::string key;
  key.reserve(upstream.size() + endpoint.size() + 5);
  key.append(upstream).append(1, '\x1f').append(endpoint).append(1, '\x1f');
  key += std::to_string(code);
  std::lock_guard lk(mu_);
  auto it = endpoint_counters_.find(key);
  if (it == endpoint_counters_.end()) {
    if (endpoint_responses_ == nullptr)
      endpoint_responses_ = &prometheus::BuildCounter()
                                 .Name("tokentap_upstream_endpoint_requests_total")
                                 .Help(
                                     "Response heads from an upstream's endpoint, by status "
                                     "(attempts answered by another endpoint included)")
                                 .Register(*registry_);
    auto& c = endpoint_responses_->Add({{"upstream", std::string(upstream)},
                                        {"endpoint", std::string(endpoint)},
                                        {"code", std::to_string(code)}});
    it = endpoint_counters_.emplace(std::move(key), &c).first;
  }
  it->second->Increment();
}
std::string metrics_registry::prometheus_text() {
  {
    std::lock_guard lk(mu_);
    poll_sources();
  }
  std::ostringstream os;
  prometheus::TextSerializer().Serialize(os, registry_->Collect());
  return os.str();
}

}  // namespace tokentap::hooks
