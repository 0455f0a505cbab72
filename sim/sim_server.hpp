#pragma once
// `tokentap sim`: an OpenAI-, Anthropic- and Ollama-compatible inference server that streams
// generated text with configurable latency, reasoning, usage and injected faults.  The demo's
// upstream and the integration tests' fixture.
//
// Endpoints: POST /v1/chat/completions, POST /v1/messages, POST /api/chat and /api/generate
// (Ollama's, NDJSON), GET /v1/models, GET /healthz,
// GET /sim/stats, GET /metrics (vLLM's names: the engine model's batch, queue, cache and
// latency).  Per-request overrides: `x-sim-*` headers (see sim::apply_header).
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "net/server_runtime.hpp"
#include "sim/generator.hpp"
#include "sim/prefix_cache.hpp"

namespace tokentap::sim {

struct server_options {
  std::string host = "127.0.0.1";
  std::uint16_t port = 8081;
  unsigned threads = 1;
  params defaults;
  std::string tls_cert, tls_key;   ///< both set: serve HTTPS
  prefix_cache_options cache;      ///< capacity 0 = no prefix cache (cached_tokens always 0)
  std::size_t context_window = 0;  ///< tokens; longer conversations lose their oldest messages
  // The engine model (DESIGN.md §13): at most max_batch sequences decode at once (0: no limit),
  // the others wait in a queue, first come first served; each sequence in the batch beside a
  // request's own adds itl_per_seq_us to its inter-token gap; answers carry the engine's timing
  // report in the shape `engine` names.
  int max_batch = 0;
  double itl_per_seq_us = 0;
  engine_shape engine = engine_shape::none;
};

/// Live counters, readable from any thread (tests use them to observe the upstream side).
struct server_stats {
  std::atomic<std::uint64_t> connections{0};        ///< TCP connections accepted
  std::atomic<std::uint64_t> requests{0};           ///< requests read
  std::atomic<std::uint64_t> streams_completed{0};  ///< responses sent to their end
  std::atomic<std::uint64_t> disconnects{0};        ///< clients gone before the response ended
  std::atomic<std::int64_t> last_disconnect_ns{0};  ///< monotonic time the last one was noticed
  std::atomic<std::uint64_t> open_connections{0};
  std::atomic<std::uint64_t> bytes_sent{0};  ///< streamed event bytes written to clients
  std::atomic<std::int64_t> running{0};      ///< sequences in the batch (the engine model's)
  std::atomic<std::int64_t> waiting{0};      ///< requests queued for a batch slot
  std::atomic<std::uint64_t> queued{0};      ///< requests that ever waited for a slot
  std::atomic<std::uint64_t> prompt_tokens{0}, cached_tokens{0};  ///< over every request
};

class server {
 public:
  explicit server(server_options opts);
  ~server();
  /// Binds and starts the I/O threads; throws on bind or TLS set-up failure.
  void start();
  tcp::endpoint endpoint() const { return endpoint_; }
  const server_stats& stats() const noexcept { return *stats_; }
  void shutdown(std::chrono::milliseconds grace = std::chrono::milliseconds(2000));
  void join();

 private:
  struct impl;
  server_options opts_;
  std::shared_ptr<server_stats> stats_;
  std::unique_ptr<impl> impl_;
  net::server_runtime runtime_;
  tcp::endpoint endpoint_;
};

}  // namespace tokentap::sim
