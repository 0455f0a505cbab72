#pragma once
// A fast path for the payload that dominates streaming traffic: one OpenAI chat completion chunk,
// `{"id":…,"choices":[{"index":0,"delta":{"content":"…"},"finish_reason":null}],…}`, read in
// one pass without simdjson.  For the simulator's 250-byte chunk simdjson's stage 1 and the
// on-demand walk over every field cost ~3.2 k instructions, this reader ~1.9 k (BENCHMARKS.md,
// round 7).
//
// It reads strict JSON (RFC 8259) and says no — read() returns false — to anything it is not
// certain the simdjson decoder (stream_decoder.cpp, decode_openai) reads the same way: invalid
// JSON or UTF-8, keys with escapes, a lone or invalid surrogate escape in a kept text, nesting
// deeper than max_depth, more than max_parts texts, documents over max_bytes, and the fields
// that decoder acts on beyond texts (`usage` other than null, `error`, `timings`,
// `tokens_cached`).  The caller then decodes the payload with simdjson; the differential tests
// (openai_chunk_test.cpp, stream_decoder_test.cpp) and fuzz_decoder_openai_chat hold the two
// paths to the same calls in the same order.
//
// Pure: no I/O, never throws; its one buffer is bounded by max_bytes and reused.
#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace tokentap::parsers {

class openai_chunk_reader {
 public:
  /// What a text is, in the decoder's terms.  `content` comes from `choices[].delta.content`,
  /// `choices[].message.content` or `choices[].text` (legacy completions); `reasoning` from
  /// `reasoning_content` / `reasoning`; `tool_arguments` from
  /// `tool_calls[].function.arguments`; `finish_reason` from `choices[].finish_reason`.
  enum class field : std::uint8_t { content, reasoning, tool_arguments, finish_reason };
  struct part {
    field what;
    std::string_view text;  ///< unescaped, never empty; valid until the next read()
  };

  static constexpr int max_depth = 32;
  static constexpr std::size_t max_parts = 8;
  static constexpr std::size_t max_bytes = 64 * 1024;

  /// True when `doc` (one JSON object, surrounding whitespace allowed) was read; parts() then
  /// holds its non-empty string texts in document order.  False: decode it the slow way.
  bool read(std::string_view doc) noexcept;
  std::span<const part> parts() const noexcept { return {parts_.data(), count_}; }

 private:
  struct scan;  // the parser proper (openai_chunk.cpp)

  std::array<part, max_parts> parts_{};
  std::size_t count_ = 0;
  std::string unescaped_;  // texts with escapes, decoded; capacity >= the payload, never moves
};

}  // namespace tokentap::parsers
