#pragma once
// `balance: prefix` (DESIGN.md §10): send a conversation back to the endpoint that served its
// longest prefix recently, so its KV cache is reused — within load bounds, with the provider's
// reported cached tokens as evidence.
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <mutex>
#include <optional>
#include <span>
#include <vector>

#include "config/config.hpp"
#include "parsers/request_inspector.hpp"
#include "proxy/cluster.hpp"

namespace tokentap::proxy {

/// Which endpoint served which conversation prefix, and when: an approximate, bounded map from a
/// prefix's cumulative digest (parsers::message_digest::chain) to the endpoint that last served a
/// request extending it.  Set associative, as a CPU cache: a prefix may live in one of `ways`
/// slots of its set and pushes out the set's least recently served one, so the index never grows
/// past its capacity and forgets the coldest prefixes first.  Sharded locks: every I/O thread
/// reads and writes it.  Keeps, per endpoint, its footprint: the text bytes of the prefixes it
/// holds in the index (a measure of how much of its cache the conversations sent to it use).
class prefix_index {
 public:
  /// `capacity`: prefixes kept (rounded up to whole sets); `endpoints`: ids run below it.
  prefix_index(std::size_t capacity, std::size_t endpoints);

  struct hit {
    std::uint32_t endpoint = 0;
    std::uint32_t depth = 0;   ///< the matched element's position in the conversation
    std::int64_t seen_ns = 0;  ///< when a request with this prefix was last served there
  };

  /// The deepest element of `conversation`, at `min_depth` or deeper, whose prefix is indexed on
  /// an endpoint that `accept` (endpoint, seen_ns) -> bool takes; nothing when none is.
  template <class Accept>
  std::optional<hit> longest(std::span<const parsers::message_digest> conversation,
                             std::size_t min_depth, Accept&& accept) {
    for (std::size_t i = conversation.size(); i-- > min_depth;) {
      const auto key = conversation[i].chain;
      auto& sh = shard_of(key);
      std::lock_guard lock(sh.mu);
      for (const auto& s : set_of(sh, key)) {
        if (s.used && s.key == key) {
          if (accept(std::uint32_t{s.endpoint}, s.seen_ns))
            return hit{s.endpoint, static_cast<std::uint32_t>(i), s.seen_ns};
          break;
        }
      }
    }
    return std::nullopt;
  }

  /// Every prefix of `conversation` was served by `endpoint` at `now_ns`.
  void insert(std::span<const parsers::message_digest> conversation, std::uint32_t endpoint,
              std::int64_t now_ns) noexcept;

  /// Text bytes of the prefixes indexed on `endpoint`.
  std::uint64_t footprint(std::uint32_t endpoint) const noexcept {
    return endpoint < footprint_.size() ? footprint_[endpoint].load(std::memory_order_relaxed) : 0;
  }
  std::size_t capacity() const noexcept { return shards * sets_per_shard_ * ways; }

  static constexpr std::size_t ways = 4;
  static constexpr std::size_t shards = 16;

 private:
  struct slot {
    std::uint64_t key = 0;
    std::int64_t seen_ns = 0;
    std::uint32_t chars = 0;
    std::uint16_t endpoint = 0;
    bool used = false;
  };
  struct shard {
    std::mutex mu;
    std::vector<slot> slots;  // sets_per_shard_ × ways
  };
  shard& shard_of(std::uint64_t key) noexcept { return shards_[key % shards]; }
  std::span<slot> set_of(shard& sh, std::uint64_t key) noexcept {
    return {sh.slots.data() + (key / shards) % sets_per_shard_ * ways, ways};
  }
  void add_footprint(std::uint32_t endpoint, std::int64_t delta) noexcept;

  std::size_t sets_per_shard_;
  std::array<shard, shards> shards_;
  std::vector<std::atomic<std::uint64_t>> footprint_;
};

/// The `prefix` policy.  A conversation's root is its elements up to its first user message
/// (tools, system, that message): the conversation's identity.  A request whose conversation
/// has a prefix at least as long as its root indexed on a usable endpoint goes there
/// (`prefix_match`) unless that endpoint is past the load bounds (then the least busy one:
/// `load_bound`).  A shorter match (a system prompt many conversations share) does not bind:
/// every replica caches that once.  A conversation that matches nothing is new: it goes to the
/// usable endpoint with the fewest streams in flight and then the smallest footprint
/// (`least_request`), or with `new: hash` to the winner of a rendezvous hash of its root over the
/// usable endpoints (`hash`, load bounds applying), which every tokentap instance with the same
/// endpoints computes alike.  A retry takes the least busy endpoint not tried yet.
///
/// Evidence: when an endpoint chosen for a matched prefix reports a miss (cache fields, zero
/// cached tokens), it no longer holds what it served up to then: its prefixes served until the
/// missed one's time stop matching.  A reported hit on an older prefix than that moves the cut
/// back.  Prefixes it serves later match again.
class prefix_balancer final : public load_balancer {
 public:
  prefix_balancer(const config::prefix_config& cfg, std::size_t endpoints);

  pick_result choose(cluster& c, const pick_context& ctx) noexcept override;
  void served(endpoint& e, std::span<const parsers::message_digest> conversation,
              std::int64_t now_ns) noexcept override;
  void cache_report(endpoint& e, const pick_result& d, std::int64_t cached,
                    std::int64_t now_ns) noexcept override;
  std::vector<routing_reason> reasons() const override;
  bool routes_by_conversation() const noexcept override { return true; }

  const prefix_index& index() const noexcept { return index_; }
  /// Prefixes endpoint `i` served at or before this time are believed gone from its cache.
  std::int64_t evicted_through_ns(std::size_t i) const noexcept {
    return evicted_through_[i].load(std::memory_order_relaxed);
  }

 private:
  endpoint* least_load(cluster& c, const pick_context& ctx) const noexcept;
  endpoint* rendezvous(cluster& c, const pick_context& ctx) const noexcept;

  config::prefix_config cfg_;
  prefix_index index_;
  std::vector<std::atomic<std::int64_t>> evicted_through_;
};

}  // namespace tokentap::proxy
