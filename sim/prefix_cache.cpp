#include "sim/prefix_cache.hpp"

#include "sim/generator.hpp"

namespace tokentap::sim {

std::size_t prefix_cache::lookup_and_insert(std::string_view prompt,
                                            std::chrono::steady_clock::time_point now) {
  if (!enabled()) return 0;
  const std::size_t block_bytes = opts_.block_tokens * bytes_per_token;
  const std::size_t blocks = prompt.size() / block_bytes;  // a partial last block is never cached
  std::lock_guard lk(mu_);
  const bool evicted =
      opts_.evict_rate > 0 && std::uniform_real_distribution<double>(0, 1)(rng_) < opts_.evict_rate;
  std::size_t hit_blocks = 0;
  bool matching = !evicted;
  std::uint64_t key = 14695981039346656037ull;
  for (std::size_t b = 0; b < blocks; ++b) {
    key = fnv1a(std::string_view(reinterpret_cast<const char*>(&key), sizeof key)) ^
          fnv1a(prompt.substr(b * block_bytes, block_bytes));
    auto it = index_.find(key);
    if (matching && it != index_.end() && now - it->second->last <= opts_.ttl) {
      ++hit_blocks;
    } else {
      matching = false;
    }
    // Store or refresh the block (most recently used first).
    if (it != index_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second);
      it->second->last = now;
    } else {
      lru_.push_front({key, now});
      index_[key] = lru_.begin();
      if (lru_.size() > opts_.capacity_blocks) {
        index_.erase(lru_.back().key);
        lru_.pop_back();
      }
    }
  }
  return hit_blocks * opts_.block_tokens;
}

double prefix_cache::usage() {
  if (!enabled()) return 0;
  std::lock_guard lk(mu_);
  return static_cast<double>(lru_.size()) / static_cast<double>(opts_.capacity_blocks);
}

}  // namespace tokentap::sim
