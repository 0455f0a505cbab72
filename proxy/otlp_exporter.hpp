#pragma once
// The OTLP/HTTP span exporter (DESIGN.md §12): the `otel` hook's spans, batched and POSTed to a
// receiver (an OpenTelemetry Collector, Jaeger, Tempo...) by a thread of its own.  It never
// blocks or slows the proxy: export_spans only appends to a bounded queue (full: the spans are
// dropped and counted); a batch leaves when it has batch_spans spans or batch_delay passed; a
// receiver that answers 429, 502, 503 or 504 gets the batch again after its Retry-After (else a
// doubling back-off), a few times, while newer spans queue behind it; any other failure
// (refused, timed out, garbage, another status) drops the batch, counted.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/ssl/context.hpp>

#include "config/config.hpp"
#include "hooks/export/otel_hook.hpp"

namespace tokentap::hooks {
class metrics_registry;
}

namespace tokentap::proxy {

class otlp_exporter final : public hooks::span_sink {
 public:
  /// Starts the export thread.
  explicit otlp_exporter(config::otel_config cfg);
  /// Exports tokentap_otel_spans_total{result} (`exported`, `queue_full`, `failed`) and
  /// tokentap_otel_queue_spans for as long as `owner` (holding this exporter) lives.
  void publish(hooks::metrics_registry& metrics, std::weak_ptr<const void> owner);
  /// Sends what is queued (one attempt, bounded by export_timeout), then stops.
  ~otlp_exporter() override;

  void export_spans(std::vector<hooks::otel_span> spans) noexcept override;

  /// At most this many attempts of one batch (the first and its retries).
  static constexpr int max_attempts = 5;

  struct counts {
    std::atomic<std::uint64_t> exported{0}, queue_full{0}, failed{0}, requests{0}, retries{0};
  };
  const counts& stats() const noexcept { return counts_; }

 private:
  void run();
  // One POST of `body`: the HTTP status, 0 when no answer came; `retry_after_s`: its Retry-After
  // (-1 when none or not a number of seconds).
  unsigned post(const std::string& body, int& retry_after_s);
  void export_batch(std::vector<hooks::otel_span> batch);

  const config::otel_config cfg_;
  hooks::otel_resource resource_;
  std::optional<config::url> target_;  // the endpoint, and its path as the request target
  std::string path_;
  std::shared_ptr<boost::asio::ssl::context> tls_;  // for an https endpoint (system trust store)
  std::mutex mu_;
  std::condition_variable wake_;
  std::deque<hooks::otel_span> queue_;  // (mu_)
  bool stopping_ = false;               // (mu_)
  counts counts_;
  std::chrono::steady_clock::time_point last_warning_{};  // (the export thread's)
  std::uint64_t dropped_unlogged_ = 0;
  std::thread thread_;
};

}  // namespace tokentap::proxy
