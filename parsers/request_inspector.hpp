#pragma once
// Request inspector: reads the few fields of an inference request body that the proxy and the
// simulator need (model, stream flag, usage option, output budget, prompt size).  Pure: no I/O,
// no Boost.  simdjson stays behind a pimpl so that this header is cheap to include.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tokentap::parsers {

/// One conversation element in canonical form: role + text, independent of JSON key order,
/// whitespace and escaping.  `tools` and `system` count as elements before the messages.
struct message_digest {
  std::uint64_t hash = 0;          ///< of this element alone (role + text)
  std::uint64_t chain = 0;         ///< cumulative: this element and every one before it
  std::uint32_t chars = 0;         ///< text bytes of this element
  std::uint64_t chars_before = 0;  ///< text bytes of the elements before it
  std::string_view role;  ///< "tools", "system", "user", "assistant", "tool", ... (static storage)
};

/// The position of a conversation's root: its first user message (its last element when it has
/// none).  The conversation must not be empty.  Its `chain` digest names the conversation: every
/// later turn of it has the same root.
std::size_t root_of(std::span<const message_digest> conversation) noexcept;

/// A 64-bit finalizer (splitmix64's): every input bit moves every output bit.  For spreading
/// digests over buckets or endpoints.
constexpr std::uint64_t mix64(std::uint64_t x) noexcept {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/// What the inspector learned from one request body.  Fields the body does not carry keep their
/// defaults; `error` is set (and the rest is best effort) when the body is not a JSON object.
struct request_info {
  std::string model;           ///< `model`, empty when absent
  bool stream = false;         ///< `stream: true`
  bool stream_given = false;   ///< the body has a `stream` key (Ollama streams without one)
  bool include_usage = false;  ///< `stream_options.include_usage: true` (OpenAI)
  /// `stream_options.continuous_usage_stats: true` (vLLM): the usage so far in every chunk.
  bool continuous_usage = false;
  bool reasoning =
      false;  ///< Anthropic `thinking.type == "enabled"`, OpenAI `reasoning_effort` / `reasoning`
  /// `max_completion_tokens`, `max_tokens`, `max_output_tokens` or Ollama's `options.num_predict`
  std::optional<std::int64_t> max_tokens;
  std::size_t messages =
      0;  ///< elements of `messages` (or Responses `input`), plus `system` if any
  std::size_t prompt_chars = 0;         ///< bytes of text in system/messages/prompt/input
  std::string_view error;               ///< empty on success, else a static description
  std::vector<message_digest> digests;  ///< conversation elements in order (when requested)
  std::string canonical;  ///< the conversation as one canonical string (when requested)
};

/// What to compute beyond the basic fields.
struct inspect_options {
  bool digests = false;    ///< message_digest per conversation element
  bool canonical = false;  ///< the canonical conversation text (the simulator's prefix cache)
};

/// Inspects request bodies.  One instance per session (it reuses its simdjson parser and padding
/// buffer); not thread safe.  Never throws.
class request_inspector {
 public:
  /// Bodies larger than `max_bytes` are not parsed (`error` = "body too large to inspect").
  explicit request_inspector(std::size_t max_bytes = 16u << 20);
  ~request_inspector();
  request_inspector(request_inspector&&) noexcept;
  request_inspector& operator=(request_inspector&&) noexcept;

  request_info inspect(std::string_view body, inspect_options opts = {});

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace tokentap::parsers
