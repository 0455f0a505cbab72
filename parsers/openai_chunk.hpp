#pragma once
// A fast path for the payload that dominates streaming traffic: one OpenAI chat completion chunk,
// `{"id":…,"choices":[{"index":0,"delta":{"content":"…"},"finish_reason":null}],…}`, read in
// one pass without simdjson, in about 60 % of the instructions simdjson's stage 1 and on-demand
// walk take for the simulator's 250-byte chunk (BENCHMARKS.md, parsing).
//
// It reads strict JSON (RFC 8259) and says no — read() returns false — to anything it is not
// certain the simdjson decoder (stream_decoder.cpp, decode_openai) reads the same way: invalid
// JSON or UTF-8, keys with escapes, a lone or invalid surrogate escape in a kept text, nesting
// deeper than max_depth, more than max_parts texts, documents over max_bytes, a key repeated in
// an object, a choice `index` that is not a plain integer, and the fields
// that decoder acts on beyond texts (`usage` other than null, `error`, `timings`,
// `tokens_cached`).  The caller then decodes the payload with simdjson; the differential tests
// (openai_chunk_test.cpp, stream_decoder_test.cpp) and fuzz_decoder_openai_chat hold the two
// paths to the same calls in the same order.
//
// A stream's chunks differ, as a rule, only in one text: the id, model, fingerprint and choice
// around it repeat byte for byte.  Given the stream's `shape` — the bytes before and after the one
// text string of the last chunk read — a chunk that has those same bytes around a valid string
// is read by checking just that string (~0.1 k instructions instead of ~1.6 k for the
// simulator's chunk): the bytes around it parse as they did, so the document is valid and its
// texts are that one string's.
//
// Pure: no I/O, never throws; its buffers are bounded by max_bytes (max_shape_bytes for a
// shape) and reused.
#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "parsers/hot_lines.hpp"

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
    std::uint32_t choice;   ///< `choices[].index` (0 when absent; see stream_decoder.hpp)
    std::string_view text;  ///< unescaped, never empty; may point into the doc read: valid
                            ///< while that doc lives and until the next read()
  };

  static constexpr int max_depth = 32;
  static constexpr std::size_t max_parts = 8;
  static constexpr std::size_t max_bytes = 64 * 1024;
  static constexpr std::size_t max_shape_bytes = 1024;

  /// One stream's last chunk with exactly one string text, kept as the bytes around that
  /// string (its quotes included).  Empty until a read() given it records one.
  class shape {
   public:
    bool empty() const noexcept { return prefix_ == 0; }
    /// The kept bytes: the chunk's through its text's opening quote, then from the closing one.
    std::string_view bytes() const noexcept { return around_; }
    /// How many of bytes() come before the text.
    std::size_t prefix() const noexcept { return prefix_; }
    /// Changes whenever bytes() or prefix() do.
    std::uint32_t version() const noexcept { return version_; }
    /// The doc of the last read() given this shape is exactly bytes()[0, prefix()), its one
    /// string text's raw bytes, bytes()[prefix(), end): it was read by the shape, or recorded
    /// as it.
    bool fits_last() const noexcept { return fits_; }
    /// Adds the kept bytes (the next read compares with them): see hot_lines.
    void add_hot_lines(hot_lines& l) const noexcept { l.add(around_.data(), around_.size()); }

   private:
    friend class openai_chunk_reader;
    std::string around_;        // the bytes through the opening quote, then from the closing one
    std::uint32_t prefix_ = 0;  // how many of around_ come before the text (<= max_shape_bytes)
    std::uint32_t version_ = 0;
    std::uint32_t choice_ = 0;
    field what_ = field::content;
    bool fits_ = false;
  };

  /// True when `doc` (one JSON object, surrounding whitespace allowed) was read; parts() then
  /// holds its non-empty string texts in the decoder's order, whatever the order of the keys:
  /// per choice in array order, reasoning (`delta`'s, `message`'s), content (`delta`,
  /// `message`, `text`), tool arguments (`delta`'s, `message`'s), finish reason.  A key met twice
  /// in one object, both `reasoning_content` and `reasoning`, or an `index` that is not a plain
  /// integer is declined.  False: decode it the slow way. With `last`, a doc shaped like the
  /// stream's last chunk is read by its text alone, and a doc read in full with one string text (up
  /// to max_shape_bytes) becomes the new shape.
  bool read(std::string_view doc, shape* last = nullptr) noexcept;
  std::span<const part> parts() const noexcept { return {parts_.data(), count_}; }
  /// Reads so far that took a shape's short way.
  std::uint64_t shaped_reads() const noexcept { return shaped_reads_; }

 private:
  struct scan;  // the parser proper (openai_chunk.cpp)

  std::array<part, max_parts> parts_{};
  std::size_t count_ = 0;
  std::uint64_t shaped_reads_ = 0;
  std::string unescaped_;  // texts with escapes, decoded; capacity >= the payload, never moves
};

}  // namespace tokentap::parsers
