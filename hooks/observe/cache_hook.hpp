#pragma once
// The cache hook: not only "hit or miss" but *why* a prompt cache missed.
//
// Providers report how many prompt tokens were cached; tokentap sees every prompt.  For each
// request the hook keeps the chain of cumulative hashes of its conversation (parsers::
// message_digest), scoped by tenant (a salted hash of the credential, never the key), route,
// model and by the endpoint that answered (each replica has its own cache), in bounded LRUs.
// It judges hit / partial / miss against what the engine could have had cached — the previous
// turn's prompt when the request repeats it — and recognizes:
//   prefix_divergence  a known conversation (same first user message) changed before the end of
//                      its previous turn (at_message 0 = the first element, e.g. the system
//                      prompt); only for a request that continues a conversation (a first turn
//                      is a new one), never when the provider reports a hit
//   truncation         the conversation's head was dropped (its first user message sits later in a
//                      recent conversation), or the input reached a fraction of the context window
//   unexpected_miss    a prefix worth >= min_prefix_tokens was prefilled (an earlier request's
//                      first token) before this request was sent, within the TTL, yet the
//                      provider reports < 50 % of it cached — requests sent together with a new
//                      prefix are no such miss, whichever ends first
//   expired            the same, but it was last prefilled longer ago than the TTL
//   prefill_anomaly    TTFT per uncached input token above k x the model's rolling median, for
//                      prompts of >= prefill_min_uncached uncached tokens (below that TTFT is
//                      the engine's fixed floor, not prefill)
//   repeated_miss      the same prefix missed >= N times within a window
// plus the provider-reported hit / partial / miss / write.  Each event carries its evidence.
#include <chrono>
#include <deque>
#include <list>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "config/section.hpp"
#include "hooks/hook.hpp"

namespace tokentap::hooks {

/// The `cache:` section.
struct cache_settings {
  std::size_t max_prefixes = 100000;      ///< remembered conversation prefixes (LRU)
  std::size_t max_conversations = 10000;  ///< remembered conversations (LRU)
  std::chrono::seconds ttl{300};          ///< a provider's prefix cache lifetime
  std::size_t min_prefix_tokens = 1024;   ///< smaller reusable prefixes raise no miss events
  double prefill_factor = 3;              ///< prefill_anomaly: k x the rolling median
  std::size_t prefill_min_samples = 20;
  std::size_t repeated_miss_count = 3;  ///< repeated_miss: this many misses of one prefix ...
  std::chrono::seconds repeated_miss_window{600};  ///< ... within this window
  double truncation_fraction = 0.9;                ///< of the model's context window
  std::vector<std::pair<std::string, std::size_t>> context_windows;  ///< model -> tokens
  /// Reads `cache: {max_prefixes, max_conversations, ttl_s, min_prefix_tokens, prefill_factor,
  /// prefill_min_samples, repeated_miss_count, repeated_miss_window_s, truncation_fraction,
  /// context_windows: {model: tokens}}` (absent: the defaults).
  static cache_settings parse(const config::section& s);
};

/// Shared, thread-safe memory of recent conversations.  One lock per request (never per token).
class prefix_tracker {
 public:
  using clock = std::chrono::steady_clock;
  explicit prefix_tracker(const cache_settings& cfg);

  struct analysis {
    bool found = false;              ///< some prefix of this request was seen before
    std::size_t at_message = 0;      ///< elements in that prefix
    std::uint64_t shared_chars = 0;  ///< text bytes in that prefix
    double age_s = 0;                ///< since it was last seen, when this request was sent
    std::uint64_t prefix_key = 0;    ///< identifies the prefix (for repeated misses)
    int divergence_at = -1;          ///< prefix_divergence: first differing element
    std::size_t previous_elements = 0;
    int dropped_messages = -1;  ///< truncation of the head: elements dropped
    /// The previous request of this conversation, when this one repeats it whole and goes on:
    /// its input tokens (-1 unknown) — what the engine could have kept cached for this one.
    std::int64_t previous_input_tokens = -1;
    bool continues = false;  ///< the request goes on past its first user message
  };

  /// Compares the request with what was seen, then remembers it.  `started`: when it was sent —
  /// a prefix counts as seen before it only if an earlier request had made it cacheable by then
  /// (requests sent together with the same new prefix did not find it cached, however they end);
  /// `cacheable`: when its own prompt was prefilled (its first token), what later requests are
  /// compared with.
  analysis observe(std::uint64_t scope, std::span<const parsers::message_digest> conv,
                   clock::time_point started, clock::time_point cacheable);

  /// The provider's count of the request's input tokens, for the next turn of its conversation
  /// (`observe` remembered the conversation; nothing when it was forgotten since).
  void remember_input(std::uint64_t scope, std::span<const parsers::message_digest> conv,
                      std::int64_t input_tokens);

  /// Counts a miss of `prefix_key`; returns the misses within the window (this one included).
  std::size_t record_miss(std::uint64_t prefix_key, clock::time_point now);

  /// Adds a prefill sample (ms per uncached token) for `model_scope`; returns the median of the
  /// samples before it and their count.
  std::pair<double, std::size_t> prefill_sample(std::uint64_t model_scope, double ms_per_token);

  const cache_settings& cfg() const noexcept { return cfg_; }

 private:
  struct prefix_entry {
    std::uint64_t key;
    clock::time_point first, last;  // cacheable since, and last made so
  };
  struct conversation {
    std::uint64_t key;
    std::vector<std::uint64_t> chains;
    std::int64_t input_tokens = -1;          // the provider's count for its last request
    std::vector<std::uint64_t> user_hashes;  // hashes of its user messages, in order
    clock::time_point last;
  };
  template <class Entry>
  struct lru {
    std::list<Entry> items;  // most recent first
    std::unordered_map<std::uint64_t, typename std::list<Entry>::iterator> index;
    Entry* find(std::uint64_t k) {
      auto it = index.find(k);
      return it == index.end() ? nullptr : &*it->second;
    }
    Entry& put(std::uint64_t k, std::size_t cap) {
      if (auto it = index.find(k); it != index.end()) {
        items.splice(items.begin(), items, it->second);
        return items.front();
      }
      items.push_front(Entry{});
      items.front().key = k;
      index[k] = items.begin();
      if (items.size() > cap) {
        index.erase(items.back().key);
        items.pop_back();
      }
      return items.front();
    }
  };

  cache_settings cfg_;
  std::mutex mu_;
  lru<prefix_entry> prefixes_;
  lru<conversation> conversations_;
  struct position {
    std::uint64_t key;
    std::uint64_t conversation;
    std::size_t index;  // of the user message among the conversation's user messages
  };
  lru<position> user_positions_;
  std::unordered_map<std::uint64_t, std::deque<clock::time_point>> misses_;
  // A model's last 200 prefill samples, in arrival order and sorted (the median is the middle
  // of the sorted copy: no copy and selection per request).
  struct prefill_window {
    std::deque<double> arrived;
    std::vector<double> sorted;
  };
  std::unordered_map<std::uint64_t, prefill_window> prefill_;
};

class cache_hook_factory final : public hook_factory {
 public:
  explicit cache_hook_factory(const cache_settings& settings = {});
  std::unique_ptr<hook> create() override;
  prefix_tracker& tracker() noexcept { return *tracker_; }

 private:
  std::shared_ptr<prefix_tracker> tracker_;
};

class hook_registry;
/// Registers "cache" (it needs the TTFT, for prefill anomalies).
void register_cache_hook(hook_registry& r);

}  // namespace tokentap::hooks
