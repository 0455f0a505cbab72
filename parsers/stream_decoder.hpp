#pragma once
// Provider decoders: turn a response body (SSE, NDJSON or one JSON document), fed as it arrives,
// into token events per channel, provider errors and normalized usage (DESIGN.md §6).
//
// Pure: no I/O, no Boost, never throws.  One decoder per stream; it reuses one simdjson parser and
// one padding buffer, so the steady state does not allocate per event.  Malformed JSON, unknown
// event types, invalid UTF-8 and oversized events are counted and skipped; decoding resumes at the
// next event and the forwarded stream is never affected (the proxy forwards before it decodes).
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "parsers/hot_lines.hpp"

namespace tokentap::parsers {

/// The `provider` label (DESIGN.md §4): one value per line of providers.def, then `unknown`.
enum class provider : std::uint8_t {
#define TOKENTAP_PROVIDER(id, ...) id,
#include "parsers/providers.def"
  unknown
};
std::string_view to_string(provider p) noexcept;

/// Provider implied by the request path (`/v1/messages` -> anthropic, ...), or unknown.
provider provider_from_path(std::string_view path) noexcept;

enum class channel : std::uint8_t { content, reasoning, tool };
std::string_view to_string(channel c) noexcept;

/// Why a payload was not decoded (the `stage` label of tokentap_parse_errors_total).
enum class parse_stage : std::uint8_t { framing, json, oversize };
std::string_view to_string(parse_stage s) noexcept;

/// Usage in one meaning for every provider (DESIGN.md §6).  -1 = not reported.
/// cached_input_tokens and reasoning_tokens are subsets of input and output, never added twice.
struct usage_counts {
  std::int64_t input_tokens = -1;   ///< all prompt tokens, cached included
  std::int64_t output_tokens = -1;  ///< all generated tokens, reasoning included
  std::int64_t reasoning_tokens = -1;
  std::int64_t cached_input_tokens = -1;
  std::int64_t cache_write_tokens = -1;
  bool cache_fields = false;  ///< the provider reported cache fields (so 0 cached is a real miss)
};

/// What the engine itself said of the time it spent on the request (DESIGN.md §13), read from
/// the stream: llama.cpp's `timings` (`prompt_ms`, `predicted_ms`: prefill of the uncached
/// prompt and decode), vLLM's per-request `metrics` object (`queue_time_ms`,
/// `time_to_first_token_ms` — from scheduling, so prefill —, `generation_time_ms`), Ollama's
/// final object (`load_duration`, `prompt_eval_duration`, `eval_duration`: nanoseconds); TGI's
/// `x-queue-time` / `x-inference-time` headers are read by the tap (engine_header_ms).
/// Milliseconds; -1 = not reported.  A value that is no duration (negative, NaN, not a number,
/// over max_engine_ms) is not reported either, and counted in `invalid`.
struct engine_account {
  enum class source_t : std::uint8_t { none, llamacpp, vllm, ollama, tgi };
  source_t source = source_t::none;
  double queue_ms = -1;      ///< waiting to be scheduled (vLLM, TGI)
  double load_ms = -1;       ///< loading the model first (Ollama)
  double prefill_ms = -1;    ///< the prompt's uncached part
  double decode_ms = -1;     ///< generating the output
  double inference_ms = -1;  ///< prefill and decode as one figure (TGI)
  std::uint32_t invalid = 0;
  bool reported() const noexcept { return source != source_t::none; }
};
/// `source` as the trace record names it: llama.cpp, vllm, ollama, tgi ("" for none).
std::string_view to_string(engine_account::source_t s) noexcept;
/// The longest duration taken from an engine: about 11.6 days.
inline constexpr double max_engine_ms = 1e9;
/// A duration as engine_account takes one: `ms` when it is one (finite, 0 .. max_engine_ms),
/// else -1.
double engine_duration(double ms) noexcept;
/// A JSON number's text as a finite value >= 0, or -1: how both walks of the decoder read an
/// engine's figures, so that they agree on every number (an exponent past a double's range is
/// no figure, whatever its mantissa).  Scaled to milliseconds, engine_duration then judges it.
double engine_number(std::string_view text) noexcept;
/// A timing header's value in milliseconds (TGI's `x-queue-time`, `x-inference-time`: an
/// integer, or a decimal); -1 when it is absent or no duration.
double engine_header_ms(std::string_view value) noexcept;

/// Several choices (`n > 1`): each token and finish reason says which choice it belongs to
/// (`choices[].index`; 0 for every provider without choices).  State kept per choice (the
/// `<think>` splitter here, a choice's last token time in the chain, its text in a trace) is
/// kept for the first `tracked_choices` indexes; choices past them share the last slot.
inline constexpr std::uint32_t tracked_choices = 64;

/// The longest response id or model name a decoder keeps.
inline constexpr std::size_t max_identity_bytes = 256;

/// Receives what the decoder finds.  Text views are valid only during the call.
///
/// Every decoder reads a payload's JSON object whole before it reports anything, and reports
/// in one order whatever the order of the object's keys (RFC 8259 §4): per choice in array
/// order its reasoning, content and tool texts, then its finish reason; then the payload's
/// other texts, finish reasons and, last, a provider error.  A payload that is not valid JSON
/// reports only the parse error.
class decoder_handler {
 public:
  virtual ~decoder_handler() = default;
  /// A token-bearing delta (non-empty text) on a channel of one choice, read at t_ns.
  virtual void on_token(channel ch, std::string_view text, std::int64_t t_ns,
                        std::uint32_t choice) noexcept = 0;
  /// A provider error reported inside the stream (`data: {"error":…}`, `event: error`, …).
  virtual void on_stream_error(std::string_view type, std::string_view message,
                               std::int64_t t_ns) noexcept {}
  /// finish_reason / stop_reason / done_reason of one choice.
  virtual void on_finish_reason(std::string_view reason, std::uint32_t choice) noexcept {}
  /// The output tokens so far, as a chat chunk's usage reported them (vLLM's
  /// `continuous_usage_stats` puts usage in every chunk): after the chunk's token events, read
  /// at t_ns.  With it, a chunk's tokens are the difference from the last count.
  virtual void on_output_count(std::int64_t output_tokens, std::int64_t t_ns) noexcept {}
  /// A payload that could not be decoded (counted; decoding continues with the next one).
  virtual void on_parse_error(parse_stage stage, std::int64_t t_ns) noexcept {}
};

/// A read that held exactly one event, a chat completion chunk with one string text shaped like
/// the stream's last such chunk (openai_chunk_reader::shape): the read is exactly its bytes
/// before the doc, shape[0, prefix), the text's raw bytes, shape[prefix, end) and its bytes
/// after the doc.  A log can keep such a read without the shape's bytes, which change only a
/// few times per stream (hooks::event_log::append_shaped).
struct read_shape {
  std::string_view shape;     ///< valid until the next feed()
  std::size_t prefix = 0;     ///< how many of shape's bytes come before the text
  std::uint32_t version = 0;  ///< changes whenever shape or prefix do
  std::size_t doc_at = 0;     ///< where the chunk's JSON starts in the read
  std::size_t doc_size = 0;   ///< its size (at least shape.size())
};

class stream_decoder {
 public:
  /// `p` from the request path (refined from the stream when unknown); `content_type` of the
  /// response picks the framing (event stream, NDJSON, else one JSON document).
  stream_decoder(provider p, std::string_view content_type, std::size_t max_event_bytes = 1u << 20);
  ~stream_decoder();
  stream_decoder(stream_decoder&&) noexcept;
  stream_decoder& operator=(stream_decoder&&) noexcept;

  /// One upstream read (the decoded body bytes), at t_ns.
  void feed(std::string_view bytes, std::int64_t t_ns, decoder_handler& h);
  /// End of the body: decodes a whole-JSON body, reports a stream cut mid-event.
  void finish(std::int64_t t_ns, decoder_handler& h);

  /// Usage normalized per DESIGN.md §6, from what the stream said so far (reasoning and output
  /// fall back to counted token events when the provider reports none).
  usage_counts usage() const;
  provider detected_provider() const noexcept;
  /// The response's id and model as the stream first named them (OpenAI chunks' `id` and
  /// `model`, Responses' `response.created`, Anthropic's `message_start`, Ollama's `model`), cut
  /// at max_identity_bytes; empty when it named none (TGI).
  std::string_view response_id() const noexcept;
  std::string_view response_model() const noexcept;
  std::uint64_t token_events(channel c) const noexcept;
  /// The engine's own account of its time, from what the stream said so far.
  const engine_account& engine() const noexcept;

  /// On by default: chat completion chunks are read by openai_chunk_reader, which hands anything
  /// unusual to simdjson.  Off: every payload through simdjson — the reference the differential
  /// tests and fuzz_decoder_openai_chat compare the fast path with.
  void set_fast_paths(bool on) noexcept;

  /// Whether `read`, the bytes of the last feed(), was one chat chunk shaped like the last one
  /// (read_shape); if so, `out` says how.
  bool last_read_shape(std::string_view read, read_shape& out) const noexcept;

  /// Adds where the state lies that the next feed() touches first (its framer, the last chat
  /// chunk's shape): see hot_lines.
  void add_hot_lines(hot_lines& l) const noexcept;

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace tokentap::parsers
