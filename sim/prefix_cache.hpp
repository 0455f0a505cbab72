#pragma once
// The simulator's prefix (KV) cache, modelled on a real engine's: the prompt is cut into blocks of
// `block_tokens` tokens (4 bytes of canonical text per token), each block keyed by the hash of
// everything up to and including it, kept in an LRU of `capacity_blocks` with a TTL.  A request
// reuses its longest run of cached leading blocks.  Thread safe.
#include <chrono>
#include <cstdint>
#include <list>
#include <mutex>
#include <random>
#include <string_view>
#include <unordered_map>

namespace tokentap::sim {

struct prefix_cache_options {
  std::size_t capacity_blocks = 0;  ///< 0 = no cache
  std::chrono::milliseconds ttl{300000};
  double evict_rate = 0;  ///< probability that a request finds its prefix evicted
  std::size_t block_tokens = 16;
  std::uint64_t seed = 42;
};

class prefix_cache {
 public:
  explicit prefix_cache(prefix_cache_options o) : opts_(o), rng_(o.seed) {}
  bool enabled() const noexcept { return opts_.capacity_blocks > 0; }

  /// Looks up `prompt` (canonical text) at `now`, returns the cached prefix in tokens, and stores
  /// every block of the prompt.
  std::size_t lookup_and_insert(std::string_view prompt, std::chrono::steady_clock::time_point now);

  /// Blocks held over capacity (0 .. 1; 0 without a cache): the engine's KV cache use.
  double usage();

  static constexpr std::size_t bytes_per_token = 4;

 private:
  struct entry {
    std::uint64_t key;
    std::chrono::steady_clock::time_point last;
  };
  prefix_cache_options opts_;
  std::mutex mu_;
  std::list<entry> lru_;  // most recent first
  std::unordered_map<std::uint64_t, std::list<entry>::iterator> index_;
  std::mt19937_64 rng_;
};

}  // namespace tokentap::sim
