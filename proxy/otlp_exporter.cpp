#include "proxy/otlp_exporter.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <optional>

#include <boost/beast/http/field.hpp>

#include "base/log.hpp"
#include "hooks/observe/metrics.hpp"
#include "net/http_client.hpp"
#include "net/tls.hpp"
#include "tokentap/version.hpp"

namespace tokentap::proxy {

namespace {

namespace http = beast::http;

// service.name, the configured resource attributes, then what the exporter knows of itself
// (host.name, process.pid, ...) unless the configuration said it already.
hooks::otel_resource resource_of(const config::otel_config& cfg) {
  hooks::otel_resource r;
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  r.attributes = {{"service.name", cfg.service_name}};
  for (const auto& [key, value] : cfg.resource_attributes) r.attributes.push_back({key, value});
  const auto add = [&r](std::string key, hooks::otel_attribute::value_type v) {
    if (std::none_of(r.attributes.begin(), r.attributes.end(),
                     [&key](const auto& a) { return a.key == key; }))
      r.attributes.push_back({std::move(key), std::move(v)});
  };
  add("service.version", std::string(version_string));
  add("host.name", std::string(host));
  add("process.pid", static_cast<std::int64_t>(::getpid()));
  add("telemetry.sdk.name", std::string("tokentap"));
  add("telemetry.sdk.language", std::string("cpp"));
  add("telemetry.sdk.version", std::string(version_string));
  r.scope_name = "tokentap";
  r.scope_version = version_string;
  return r;
}

}  // namespace

otlp_exporter::otlp_exporter(config::otel_config cfg)
    : cfg_(std::move(cfg)), resource_(resource_of(cfg_)) {
  std::string err;
  target_ = config::parse_url(cfg_.endpoint, err);  // (checked by config::validate)
  // parse_url keeps the URL's path as its base path: here, the request's target.
  if (target_) path_ = target_->base_path.empty() ? std::string("/") : target_->base_path;
  if (target_ && target_->tls) tls_ = net::tls_client_context(true, "");
  thread_ = std::thread([this] { run(); });
}

void otlp_exporter::publish(hooks::metrics_registry& metrics, std::weak_ptr<const void> owner) {
  const std::pair<const char*, const std::atomic<std::uint64_t>*> results[] = {
      {"exported", &counts_.exported},
      {"queue_full", &counts_.queue_full},
      {"failed", &counts_.failed}};
  for (const auto& [result, count] : results)
    metrics.add_counter_source(
        "tokentap_otel_spans_total",
        "Spans for the OTLP receiver, by result: exported (the receiver took them), queue_full "
        "(dropped: the export queue was full), failed (dropped: the receiver refused them or "
        "could not be reached)",
        [count] { return count->load(std::memory_order_relaxed); }, {{"result", result}}, owner);
  metrics.add_gauge_source(
      "tokentap_otel_queue_spans", "Spans waiting for the OTLP exporter",
      [this] {
        std::lock_guard lk(mu_);
        return static_cast<double>(queue_.size());
      },
      {}, owner);
}

otlp_exporter::~otlp_exporter() {
  {
    std::lock_guard lk(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void otlp_exporter::export_spans(std::vector<hooks::otel_span> spans) noexcept {
  bool full_batch = false;
  {
    std::lock_guard lk(mu_);
    if (queue_.size() + spans.size() > cfg_.queue_spans) {
      counts_.queue_full.fetch_add(spans.size(), std::memory_order_relaxed);
      return;
    }
    for (auto& s : spans) queue_.push_back(std::move(s));
    full_batch = queue_.size() >= cfg_.batch_spans;
  }
  if (full_batch) wake_.notify_one();
}

void otlp_exporter::run() {
  std::unique_lock lk(mu_);
  for (;;) {
    wake_.wait_for(lk, cfg_.batch_delay,
                   [this] { return stopping_ || queue_.size() >= cfg_.batch_spans; });
    const bool last = stopping_;
    while (!queue_.empty()) {
      const auto n = std::min(queue_.size(), cfg_.batch_spans);
      std::vector<hooks::otel_span> batch(std::make_move_iterator(queue_.begin()),
                                          std::make_move_iterator(queue_.begin() + n));
      queue_.erase(queue_.begin(), queue_.begin() + n);
      lk.unlock();
      export_batch(std::move(batch));
      lk.lock();
      if (!stopping_ && queue_.size() < cfg_.batch_spans) break;  // a partial batch waits
    }
    if (last) return;
  }
}

void otlp_exporter::export_batch(std::vector<hooks::otel_span> batch) {
  auto body = cfg_.protocol == config::otel_config::protocol_kind::json
                  ? hooks::otlp_json(resource_, batch)
                  : hooks::otlp_protobuf(resource_, batch);
  if (cfg_.compression == config::otel_config::compression_kind::gzip) {
    auto compressed = hooks::otlp_gzip(body);
    if (!compressed) {  // (the body must be what Content-Encoding says)
      counts_.failed.fetch_add(batch.size(), std::memory_order_relaxed);
      return;
    }
    body = std::move(*compressed);
  }
  auto backoff = std::chrono::seconds(1);
  for (int attempt = 1;; ++attempt) {
    int retry_after_s = -1;
    const unsigned status = post(body, retry_after_s);
    counts_.requests.fetch_add(1, std::memory_order_relaxed);
    if (status >= 200 && status < 300) {
      counts_.exported.fetch_add(batch.size(), std::memory_order_relaxed);
      return;
    }
    const bool retryable = status == 429 || status == 502 || status == 503 || status == 504;
    std::unique_lock lk(mu_);
    if (!retryable || attempt >= max_attempts || stopping_) {
      counts_.failed.fetch_add(batch.size(), std::memory_order_relaxed);
      dropped_unlogged_ += batch.size();
      // One line a minute at most while the receiver stays unusable (the counter has them all).
      const auto now = std::chrono::steady_clock::now();
      if (now - last_warning_ >= std::chrono::minutes(1)) {
        TT_LOG(warn) << "otel: " << dropped_unlogged_ << " spans dropped: the receiver "
                     << (status == 0 ? std::string("could not be reached")
                                     : "answered " + std::to_string(status))
                     << " (" << cfg_.endpoint << "); tokentap_otel_spans_total{result=\"failed\"}";
        last_warning_ = now;
        dropped_unlogged_ = 0;
      }
      return;
    }
    const auto wait =
        retry_after_s >= 0 ? std::chrono::seconds(std::min(retry_after_s, 60)) : backoff;
    backoff = std::min(backoff * 2, std::chrono::seconds(30));
    counts_.retries.fetch_add(1, std::memory_order_relaxed);
    if (wake_.wait_for(lk, wait, [this] { return stopping_; })) {
      counts_.failed.fetch_add(batch.size(), std::memory_order_relaxed);
      return;
    }
  }
}

unsigned otlp_exporter::post(const std::string& body, int& retry_after_s) {
  if (!target_) return 0;
  net::http_client_request req{http::verb::post, path_, 11};
  req.set(http::field::host, target_->host_header());
  req.set(http::field::user_agent, std::string("tokentap/") + version_string);
  req.set(http::field::content_type, cfg_.protocol == config::otel_config::protocol_kind::json
                                         ? "application/json"
                                         : "application/x-protobuf");
  if (cfg_.compression == config::otel_config::compression_kind::gzip)
    req.set(http::field::content_encoding, "gzip");
  for (const auto& [name, value] : cfg_.headers) req.set(name, value);
  req.body() = body;
  req.prepare_payload();
  net::http_client_response res;
  if (net::request_once({target_->host, target_->port, tls_}, req, cfg_.export_timeout, 64 * 1024,
                        res))
    return 0;
  const auto ra = res[http::field::retry_after];
  if (!ra.empty() && std::all_of(ra.begin(), ra.end(), [](char c) { return c >= '0' && c <= '9'; }))
    retry_after_s = std::atoi(std::string(ra).c_str());
  return res.result_int();
}

}  // namespace tokentap::proxy
