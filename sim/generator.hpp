#pragma once
// The simulator's pure part: what to send and when.  Given the parameters of one request and a
// seed it produces the complete list of wire events (bytes + send offset), in the OpenAI Chat
// Completions, Anthropic Messages or Ollama chat/generate format.  No I/O, no Boost:
// unit-testable and deterministic.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tokentap::sim {

/// The API a request came in on.  Ollama's native `/api/chat` and `/api/generate` stream NDJSON
/// lines (the same but for `message.content` vs `response`).
enum class api { openai_chat, anthropic_messages, ollama_chat, ollama_generate };
constexpr bool is_ollama(api a) noexcept {
  return a == api::ollama_chat || a == api::ollama_generate;
}

/// How a stamped event begins (params::stamp): the SSE comment `: t <monotonic ns>\n`.  The load
/// generator and the benchmarks' capture matcher (test/bench/transit.hpp) read it back.
inline constexpr std::string_view stamp_prefix = ": t ";

enum class latency_dist { fixed, uniform, normal, exponential };

/// Everything that shapes one simulated response.  Server defaults come from flags; each request
/// may override them with `x-sim-*` headers (see apply_header).
struct params {
  double ttft_ms = 150;      ///< request read -> first token event
  double itl_ms = 15;        ///< mean gap between token events
  double itl_jitter_ms = 0;  ///< spread: uniform half-width or normal sd
  latency_dist dist = latency_dist::fixed;
  int output_tokens = 48;    ///< answer tokens (capped by the request's max_tokens)
  int reasoning_tokens = 0;  ///< reasoning tokens before the answer
  int tokens_per_event = 1;  ///< OpenAI chat: tokens per streamed chunk (the last one's time)
  std::string reasoning_field = "reasoning_content";  ///< OpenAI delta field (vLLM: "reasoning")
  std::uint64_t seed = 42;

  // Faults.
  int fault_status = 0;  ///< answer with this HTTP status and a provider error body
  int error_after = -1;  ///< after N token events send a provider error event and end
  int reset_after = -1;  ///< after N token events reset the TCP connection
  int stall_after = -1;  ///< after N token events pause for stall_ms (0 = until the client leaves)
  double stall_ms = 0;
  bool hang = false;  ///< read the request, never answer (header timeout tests)
  /// Precede each streamed event with an SSE comment `: t <monotonic ns>` taken as it is written:
  /// clients ignore comments, benchmarks measure per-event latency through a proxy with them.
  bool stamp = false;

  // Prefill: TTFT grows with the prompt tokens the cache did not cover.
  double prefill_us_per_token = 0;
  bool cache_bypass = false;  ///< this request neither reads nor fills the prefix cache
};

/// Applies one `x-sim-NAME: value` override (NAME without the prefix).  Returns an error message
/// for an unknown name or a bad value, or nullopt when applied.
std::optional<std::string> apply_header(params& p, std::string_view name, std::string_view value);

/// What the request asked for (from the request inspector).
struct request_shape {
  api kind = api::openai_chat;
  std::string model;
  bool stream = false;  ///< (Ollama streams unless the body says `stream: false`)
  bool include_usage = false;
  bool continuous_usage = false;  ///< `stream_options.continuous_usage_stats`: usage per chunk
  std::optional<std::int64_t> max_tokens;
  std::size_t prompt_chars = 0;
  std::size_t messages = 0;
  std::uint64_t body_hash = 0;    ///< mixes the request into the seed
  std::size_t prompt_tokens = 0;  ///< when > 0, overrides the estimate from prompt_chars
  std::size_t cached_tokens = 0;  ///< prompt tokens served from the prefix cache
  bool cache_control = false;     ///< Anthropic request marked blocks for caching (reports writes)
};

/// One wire event: `bytes` to send `at_ms` after the request was read.
struct wire_event {
  std::string bytes;
  double at_ms = 0;
  bool token = false;  ///< carries a content/reasoning token (counts for *_after faults)
};

/// The planned response.
struct plan {
  std::vector<wire_event> events;  ///< streaming: SSE events (Ollama: NDJSON lines) in order
  std::string body;                ///< non-streaming: the JSON body, sent at `body_at_ms`
  double body_at_ms = 0;
  std::string reasoning_text, content_text;
  int prompt_tokens = 0, completion_tokens = 0, reasoning_tokens = 0, cached_tokens = 0;
  int cache_write_tokens = 0;  ///< Anthropic cache_creation_input_tokens
  bool truncated = false;      ///< max_tokens cut the answer (finish_reason "length")
  enum class end { normal, error_event, reset, stall } ending = end::normal;
  std::size_t fault_index = 0;  ///< events[fault_index] is the first one after the fault point
  double first_token_ms = 0, last_token_ms = 0;  ///< when the first and last tokens are due
};

/// Which engine's timing report the simulator adds to its answers (`tokentap sim --engine`,
/// DESIGN.md §13): vLLM's per-request `metrics` object, llama.cpp's `timings`, TGI's
/// `x-queue-time` / `x-inference-time` headers (on non-streamed answers, as TGI does), Ollama's
/// durations in nanoseconds on the final object of `/api/chat` and `/api/generate` (Ollama's
/// OpenAI-compatible `/v1` answers carry none).
enum class engine_shape { none, vllm, llamacpp, tgi, ollama };
std::optional<engine_shape> engine_shape_of(std::string_view name);

/// What the simulated engine spent on one request (ms): waiting for a batch slot, prefill (up to
/// the first token), decode (first to last token).
struct engine_times {
  double queue_ms = 0, prefill_ms = 0, decode_ms = 0;
};
/// The times the plan says, with the queue measured by the server.
engine_times engine_times_of(const plan& pl, double queue_ms);

/// Adds the engine's report to an answer that ended normally: to its last JSON event (OpenAI's
/// usage chunk when there is one, Ollama's `done` line), or to the non-streamed body.  A report
/// goes only where that engine puts it: Ollama's on Ollama's native API, the others' on OpenAI's.
void add_engine_report(plan& pl, api kind, engine_shape e, const engine_times& t);

/// Plans the response for one request.  Same params + shape = same bytes and timing.
plan make_plan(const params& p, const request_shape& shape);

/// Provider-shaped error body for `fault_status` answers.
std::string error_body(api kind, int status);

/// FNV-1a, used to mix request bodies into the seed.
std::uint64_t fnv1a(std::string_view s) noexcept;

}  // namespace tokentap::sim
