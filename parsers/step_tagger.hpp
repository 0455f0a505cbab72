#pragma once
// Reasoning step tagging (design/STEPS.md), incremental and split-invariant.
//
// Fed the text deltas of one channel as they arrive, it cuts the text into steps: where the
// model planned, concluded, checked itself or backtracked.  A decision at a possible step start
// needs at most a few dozen bytes of lookahead (the longest trigger plus its follower); the tagger
// holds back only that much, so a trigger split across deltas ("Ther" + "efore, ") is found and
// the result never depends on how the text was split.  Linear in the text; no allocation per
// token once its buffers are warm.  Pure: no I/O, no Boost.
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "parsers/hot_lines.hpp"

namespace tokentap::parsers {

enum class step_kind : std::uint8_t { step, conclusion, verification, backtrack, other };
std::string_view to_string(step_kind k) noexcept;

/// Trigger phrases per kind (STEPS.md defaults, replaceable from configuration).
struct step_triggers {
  std::vector<std::string> step, conclusion, verification, backtrack;
  static step_triggers defaults();
};

struct step {
  std::uint64_t offset = 0;  ///< UTF-8 byte offset into the channel's text
  step_kind kind = step_kind::other;
  std::int64_t t_ns = 0;    ///< arrival of the token carrying the step's first character
  std::int64_t end_ns = 0;  ///< arrival of the step's last token
  std::uint32_t tokens =
      0;                   ///< token-bearing deltas whose first non-blank character is in the step
  bool redundant = false;  ///< trigram Jaccard >= 0.8 with an earlier step
};

class step_tagger {
 public:
  /// A trigger set compiled for searching; immutable, shareable across threads and streams.
  struct compiled;
  static std::shared_ptr<const compiled> compile(const step_triggers& triggers);

  /// `max_steps` bounds memory on runaway reasoning (later steps are not recorded).
  explicit step_tagger(const step_triggers& triggers = step_triggers::defaults(),
                       std::size_t max_steps = 4096);
  /// The per-stream form: no compilation, nothing allocated until text arrives.
  step_tagger(std::shared_ptr<const compiled> triggers, std::size_t max_steps);
  ~step_tagger();
  step_tagger(step_tagger&&) noexcept;
  step_tagger& operator=(step_tagger&&) noexcept;

  /// One token-bearing delta of the channel, arrived at t_ns.
  void feed(std::string_view text, std::int64_t t_ns);
  /// End of the text: resolves what was held back and decides redundancy of the last step.
  void finish();

  /// Steps so far (all of them final after finish()).
  const std::vector<step>& steps() const noexcept;
  /// Tokens inside redundant steps (after finish()).
  std::uint64_t redundant_tokens() const noexcept;
  std::uint64_t text_bytes() const noexcept;

  /// Adds where the state lies that the next feed() touches first: see hot_lines.
  void add_hot_lines(hot_lines& l) const noexcept;

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace tokentap::parsers
