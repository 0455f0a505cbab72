#pragma once
// The OpenAI chat completion chunk decoder's reader — `{"id":…,"choices":[{"index":0,"delta":
// {"content":"…"},"finish_reason":null}],…}`, and llama.cpp's native /completion chunk, which
// shares the walk — in one pass, without simdjson: about 60 % of the instructions simdjson's
// stage 1 and on-demand walk take for the simulator's 250-byte chunk (BENCHMARKS.md, parsing).
//
// It reads what the walk of decode_openai_chat.cpp reads, with the same meaning: per choice the
// texts of `delta`/`message` (content, reasoning_content or reasoning, tool call arguments),
// `text`, `finish_reason` and `index`; `usage` (prompt, completion, cached and reasoning counts),
// `error`, llama.cpp's `timings`, vLLM's `metrics`, `tokens_cached`, the top-level `content`
// and `stop_type`, and the chunk's `id` and `model`.
// A key met twice in an object: the last one wins, as in any JSON walk.  Keys with escapes are
// unescaped.  It reads strict JSON (RFC 8259): invalid JSON or UTF-8, a lone surrogate escape in
// a text, or nesting deeper than max_depth, and read() returns false — the caller's parse error.
// With set_fast_paths(false) the decoder walks the same fields with simdjson instead: the tests'
// oracle (openai_chunk_test.cpp, stream_decoder_test.cpp, fuzz_decoder_openai_chat hold the two
// to the same calls in the same order on every valid document).
//
// A stream's chunks differ, as a rule, only in one text: the id, model, fingerprint and choice
// around it repeat byte for byte.  Given the stream's `shape` — the bytes before and after the one
// text string of the last chunk read — a chunk that has those same bytes around a valid string
// is read by checking just that string (~0.1 k instructions instead of ~1.6 k for the
// simulator's chunk): the bytes around it parse as they did, so the document is valid and its
// texts are that one string's.  Only a chunk whose one string text is all it says (no counts,
// error or repeated key) becomes a shape.
//
// Pure: no I/O, never throws; its buffers grow to the largest document read and are reused.
#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "parsers/hot_lines.hpp"

namespace tokentap::parsers {

class openai_chunk_reader {
 public:
  /// What a text is, in the decoder's terms.  `content` comes from `choices[].delta.content`,
  /// `choices[].message.content` or `choices[].text` (legacy completions); `reasoning` from
  /// `reasoning_content` (else `reasoning`); `tool_arguments` from
  /// `tool_calls[].function.arguments`; `finish_reason` from `choices[].finish_reason`.
  enum class field : std::uint8_t { content, reasoning, tool_arguments, finish_reason };
  struct part {
    field what;
    std::uint32_t choice;   ///< `choices[].index` (0 when absent; see stream_decoder.hpp)
    std::string_view text;  ///< unescaped, never empty; may point into the doc read: valid
                            ///< while that doc lives and until the next read()
  };

  /// What a chunk says besides its choices' texts.  A count is absent (nullopt) when its key
  /// is; present, it is the value as the decoder takes a count: an integer, a float truncated,
  /// -1 for anything else.
  struct facts {
    struct {
      std::optional<std::int64_t> prompt, completion, reasoning;
      /// `prompt_tokens_details.cached_tokens`, else DeepSeek's `prompt_cache_hit_tokens`:
      /// present only when one of them is a count >= 0.
      std::optional<std::int64_t> cached;
    } usage;
    bool timings = false;  ///< a `timings` key (llama.cpp), whatever its value
    std::optional<std::int64_t> prompt_n, cache_n, predicted_n;  ///< `timings`' counts
    std::optional<std::int64_t> tokens_cached;                   ///< llama.cpp
    /// `timings`' durations (ms): present when the key is and not null; NaN when its value is
    /// no duration (engine_duration).
    std::optional<double> prompt_ms, predicted_ms;
    /// vLLM's per-request `metrics` object (ms), the same way.
    bool metrics = false;  ///< a `metrics` key that is an object
    std::optional<double> queue_time_ms, time_to_first_token_ms, generation_time_ms;
    bool error = false;                          ///< an `error` that is a string or an object
    std::string_view error_type, error_message;  ///< `type` (else `code`) and `message`
    std::string_view top_content, stop_type;     ///< llama.cpp's native /completion
  };

  static constexpr int max_depth = 1024;  ///< simdjson's default
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
  /// holds its non-empty texts in the decoder's order, whatever the order of the keys: per
  /// choice in array order, reasoning (`delta`'s, `message`'s), content (`delta`, `message`,
  /// `text`), tool arguments (`delta`'s, `message`'s), finish reason; and facts() the rest.
  /// False: not valid JSON (nothing was read).  With `last`, a doc shaped like the stream's last
  /// chunk is read by its text alone, and a doc read in full whose one string text is all it
  /// says (up to max_shape_bytes) becomes the new shape.
  bool read(std::string_view doc, shape* last = nullptr) noexcept;
  std::span<const part> parts() const noexcept { return parts_; }
  const facts& chunk_facts() const noexcept { return facts_; }
  /// Whether the chunk read said anything besides texts (chunk_facts() is not empty).
  bool has_facts() const noexcept { return facts_dirty_; }
  /// The chunk's top-level `id` and `model` strings (unescaped; empty when absent, not strings,
  /// or the read took a shape's short way: a shaped chunk repeats the last one's).  Valid
  /// until the next read().  They are no facts: a chunk that names them can still be a shape.
  std::string_view id() const noexcept { return id_; }
  std::string_view model() const noexcept { return model_; }
  /// Reads so far that took a shape's short way.
  std::uint64_t shaped_reads() const noexcept { return shaped_reads_; }

 private:
  struct scan;  // the parser proper (openai_chunk.cpp)

  // One choice as the walk fills it: a key met again overwrites its slot.
  struct choice_slots {
    std::uint32_t index = 0;
    std::array<std::string_view, 2> reasoning_content{}, reasoning{};  // delta, message
    std::array<std::string_view, 3> content{};                         // delta, message, text
    std::array<std::array<std::uint32_t, 2>, 2> tools{};  // [begin, end) in tool_texts_
    std::string_view finish;
  };

  std::vector<part> parts_;
  std::vector<choice_slots> choices_;
  std::vector<std::string_view> tool_texts_;
  facts facts_;
  bool facts_dirty_ = false;  // facts_ holds something of an earlier read
  std::string_view id_, model_;
  std::uint64_t shaped_reads_ = 0;
  std::string unescaped_;  // texts and keys with escapes, decoded; capacity >= the doc: no moves
};

}  // namespace tokentap::parsers
