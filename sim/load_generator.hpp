#pragma once
// A closed-loop HTTP load generator: N keep-alive clients, each sending one request at a time and
// reading the whole (streamed) response.  Drives `tokentap demo` and the load benchmark.
#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "net/net.hpp"

namespace tokentap::sim {

/// One request template.
struct scenario {
  std::string name;
  std::string path = "/v1/chat/completions";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
};

struct load_options {
  std::string host = "127.0.0.1";
  std::uint16_t port = 8080;
  unsigned concurrency = 8;
  unsigned threads = 1;
  std::chrono::milliseconds think_time{0};  ///< pause after each request, uniform in [0, think]
  /// Each client starts after a delay uniform in [0, spread]: with 0 all streams start together
  /// and, at a fixed inter-token gap, their events arrive in synchronized bursts.
  std::chrono::milliseconds start_spread{0};
  std::uint64_t max_requests = 0;  ///< per client; 0 = until stop()
  std::uint64_t seed = 7;
  /// Picks the next request for client `client` (called on that client's thread).
  std::function<scenario(unsigned client, std::uint64_t n)> next;
};

/// Totals, safe to read while running.
struct load_totals {
  std::atomic<std::uint64_t> ok{0}, failed{0}, events{0}, bytes{0}, connects{0};
  std::atomic<std::uint64_t> active{0};
  /// Time to first body byte and whole-response time of the last (bounded) requests, in ms.
  std::vector<double> ttfb_ms, total_ms;
  /// Per stamped event (`: t <ns>` comments from `x-sim-stamp`), µs after the simulator wrote it:
  /// when it reached the client's socket (the kernel's receive timestamp; the read time where the
  /// kernel gives none), and when the client read it (adds the client's own scheduling delay).
  std::vector<double> event_latency_us, read_latency_us;
  std::mutex mu;
};

class load_generator {
 public:
  explicit load_generator(load_options opts);
  ~load_generator();
  void start();
  /// Asks clients to stop after their current request (does not wait).
  void request_stop() noexcept { stop_ = true; }
  /// request_stop(), then ends the streams still in flight and joins the client threads.
  void stop();
  /// Blocks until every client has sent max_requests (or stop()).
  void wait();
  load_totals& totals() noexcept { return totals_; }

 private:
  awaitable<void> client(unsigned id);
  load_options opts_;
  load_totals totals_;
  std::vector<std::unique_ptr<asio::io_context>> iocs_;
  std::vector<std::thread> threads_;
  std::atomic<bool> stop_{false};
};

/// The demo's traffic mix: streamed and plain OpenAI chat, Anthropic messages with thinking,
/// reasoning models, and a few injected faults so every panel has something to show.
scenario demo_scenario(unsigned client, std::uint64_t n, std::uint64_t seed);

/// Percentile of an unsorted sample (nearest rank); 0 for an empty sample.
double percentile(std::vector<double> v, double q);

}  // namespace tokentap::sim
