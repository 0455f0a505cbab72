#pragma once
// One request sent and its response measured exactly as the proxy measures what it forwards:
// the same decoders and timing hook on every read, tokens timed by their bytes' arrival (the
// kernel's receive stamp).  `replay send` and `tokentap bench` send through it.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "config/config.hpp"
#include "net/net.hpp"
#include "parsers/stream_decoder.hpp"

namespace tokentap::hooks {
class hook_factory;
}

namespace tokentap::replay {

/// A request to send.
struct outgoing {
  std::string method = "POST";
  std::string target;  ///< path and query
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
};

/// What one response showed.  Times in ms from the request's start; -1: not measured.
struct measurement {
  int status = 0;                       ///< 0: no response
  std::string outcome = "no_response";  ///< ok, stream_error, upstream_reset, no_response …
  std::string error;                    ///< why it failed, when it did (connect, request, …)
  bool ok = false;      ///< a status below 400 and a response that ended as its provider ends one
  double ttft_ms = -1;  ///< first token, reasoning included
  double ttfo_ms = -1;  ///< first answer (content) token
  double e2e_ms = -1;   ///< the whole response, its HTTP framing's end included (the tap's)
  /// To the last body bytes' arrival (the response's last event): where vLLM's and AIPerf's end
  /// to end stop.  A server may end its framing later (llama.cpp: ~1 ms after `[DONE]`).
  double last_byte_ms = -1;
  double tpot_ms = -1;  ///< (last token − first token) / (output tokens − 1)
  double itl_median_ms = -1;
  double tokens_per_s = -1;
  std::vector<double> event_gaps_ms;  ///< between token events, in order (the first max_gaps)
  /// Between tokens, when the server counted its output per chunk (`per_token_gaps`; vLLM's
  /// continuous_usage_stats): an event of k tokens is k gaps of 1/k of the gap before it.
  std::vector<double> token_gaps_ms;
  bool per_token_gaps = false;
  std::uint64_t token_events = 0;
  parsers::usage_counts usage;  ///< as the server reported it (-1: not reported)
  std::string content;          ///< the answer's text (the first max_text bytes)
  /// The last conclusion step's text ("Therefore, …"; with options::analyze and max_text, when
  /// it lies within the first max_text bytes of its channel): what the reasoning concluded.
  std::string conclusion;
  /// Reasoning steps the step tagger found (with measurer::options::analyze): in all, and the
  /// backtracks ("Wait,") among them.
  std::uint32_t steps = 0, backtracks = 0;
  /// Prompt-cache events of the request, as the cache hook names them (`hit`, `miss`, a miss's
  /// cause …), and its verdict: hit, partial or miss (empty: not judged).
  std::vector<std::string> cache_events;
  std::string cache_outcome;
  /// Where its time went (DESIGN.md §13, the tap's attribution; -1 unknown): the connection's
  /// setup (before the request's start: outside TTFT and end to end, as a pooled connection's
  /// would be), request written → response head, head → first token, first token → end; the
  /// engine's own account when the server sent one, and what it leaves unexplained of TTFT.
  double connect_ms = -1, upstream_head_ms = -1, first_token_ms = -1, decode_ms = -1;
  parsers::engine_account engine;
  double unexplained_ms = -1;
  std::string trace_record_id;  ///< its trace record's id (with options::trace_dir)
  std::int64_t sent_ns = 0;     ///< when it was sent (monotonic, base::mono_now_ns)
};

/// Sends requests to one target and measures them; one per run, shared by its coroutines (on
/// one thread).
class measurer {
 public:
  struct options {
    std::string host = "127.0.0.1";
    std::uint16_t port = 8080;
    std::chrono::milliseconds timeout{std::chrono::minutes(10)};  ///< one whole exchange
    std::size_t max_gaps = 4096;  ///< event gaps kept per response (1 .. 1048576)
    std::size_t max_text = 0;     ///< answer bytes kept per response (graded tasks)
    /// Also run the steps and cache hooks (the cache hook keeps what earlier requests of the
    /// run sent, as the proxy's does, to say why a prefix missed).
    bool analyze = false;
    /// Also write a trace record per request into this directory (the proxy's trace hook and
    /// writer: `analyze` and `replay` read them); empty: none.
    std::string trace_dir{};
  };
  explicit measurer(options o);
  ~measurer();
  measurer(const measurer&) = delete;
  measurer& operator=(const measurer&) = delete;

  /// Sends `req` on a connection of its own and measures the response into `m`.
  awaitable<void> measure(const outgoing& req, measurement& m) const;

 private:
  options o_;
  config::config cfg_;  // what the hooks' factories were built from (they may point into it)
  std::vector<std::shared_ptr<hooks::hook_factory>> hooks_;  // timing (steps, cache, trace)
};

}  // namespace tokentap::replay
