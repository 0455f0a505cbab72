#pragma once
// Synthetic workloads (DESIGN.md §14): a YAML file whose `synthetic:` section says how many
// requests to make and how long their prompts and answers are, and the tasks are generated from
// it, the same for the same seed:
//
//   synthetic:
//     requests: 200                         # tasks made (a level repeats them as it needs)
//     seed: 7
//     input_tokens: {mean: 300, stddev: 60} # the user message; a number is a fixed length
//     output_tokens: {mean: 120, stddev: 30, min: 16, max: 512}   # each request's max_tokens
//     system_prompt: {tokens: 1000, pool: 4}   # shared prefixes: each request takes one of 4
//     cache_breakers:
//       jittered_system_prompt: 0.1        # share whose system prompt differs in its first words
//
// or, for multi-turn conversations that resend their history (each turn a request; the
// history holds the server's real answers):
//
//   synthetic:
//     conversations: 50                     # instead of requests
//     turns: {mean: 4, min: 2, max: 8}      # per conversation
//     think_time_ms: {mean: 1500, stddev: 500}   # between an answer and the next turn
//     input_tokens: 120                     # each turn's user message
//     output_tokens: 80                     # each turn's max_tokens
//     system_prompt: {tokens: 500, pool: 2}
//     cache_breakers:
//       context_window: 1024   # tokens: a longer history drops its oldest turns (overflow)
//       edited_history: 0.1    # share of turns (from the third) that rewrite an earlier answer
//       jittered_system_prompt: 0.1         # per conversation
//
// A token is a word of a fixed vocabulary of three-letter words: real tokenizers count most of
// them as one token, and the simulator counts four characters (a word and its space) as one.
// Lengths are drawn from a normal distribution (clipped to [min, max]).  Requests that share a
// system prompt share a prefix an engine can cache; a jittered one breaks it at its start.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "bench/workload.hpp"

namespace tokentap::bench {

struct length_dist {
  double mean = 0, stddev = 0;
  std::int64_t min = 1, max = 1 << 20;
};

struct synthetic_spec {
  std::size_t requests = 100;
  std::size_t conversations = 0;  ///< > 0: that many conversations instead of `requests`
  std::uint64_t seed = 1;
  length_dist input{.mean = 256}, output{.mean = 128};
  length_dist turns{.mean = 1};               ///< per conversation
  length_dist think_ms{.mean = 0, .min = 0};  ///< before each turn after the first
  std::int64_t system_tokens = 0;             ///< 0: no system prompt
  std::size_t system_pool = 1;                ///< distinct system prompts the requests share
  double jittered_system_prompt = 0;
  std::int64_t context_window = 0;  ///< conversations: the history kept, in tokens (0: whole)
  double edited_history = 0;        ///< conversations: share of turns (third on) that edit one
};

/// Whether `text` is a YAML workload (its first line but blank lines and comments is
/// `synthetic:`) rather than JSONL.
bool is_synthetic(std::string_view text);

/// Reads the `synthetic:` section.  nullopt with `error` = "FILE:LINE: reason" for a key it does
/// not know or a value out of range.
std::optional<synthetic_spec> read_synthetic(const std::string& text, const std::string& file,
                                             std::string& error);

/// The tasks: ids `s0` … `s<N-1>`, a chat conversation each (its system prompt, when the spec
/// has one, then the user message), `max_tokens` from the output length; with `conversations`,
/// ids `c0` … `c<N-1>`, each its system prompt and its turns (task::turns): a user message,
/// max_tokens and think time each; from the third turn on, at the edited_history share, a turn
/// first rewrites an answer an earlier turn already resent (one before the last), so the engine's
/// cached prefix breaks there.
std::vector<task> synthetic_tasks(const synthetic_spec& spec);

}  // namespace tokentap::bench
