#include "proxy/prefix_balancer.hpp"

#include <algorithm>

namespace tokentap::proxy {

prefix_index::prefix_index(std::size_t capacity, std::size_t endpoints)
    : sets_per_shard_(std::max<std::size_t>(1, (capacity + shards * ways - 1) / (shards * ways))),
      footprint_(endpoints) {
  for (auto& sh : shards_) sh.slots.resize(sets_per_shard_ * ways);
}

void prefix_index::add_footprint(std::uint32_t endpoint, std::int64_t delta) noexcept {
  if (endpoint >= footprint_.size()) return;
  footprint_[endpoint].fetch_add(static_cast<std::uint64_t>(delta), std::memory_order_relaxed);
}

void prefix_index::insert(std::span<const parsers::message_digest> conversation,
                          std::uint32_t endpoint, std::int64_t now_ns) noexcept {
  for (const auto& m : conversation) {
    auto& sh = shard_of(m.chain);
    std::lock_guard lock(sh.mu);
    auto set = set_of(sh, m.chain);
    // Its own slot if it has one, else a free one, else the least recently served.
    slot* s = nullptr;
    for (auto& x : set)
      if (x.used && x.key == m.chain) s = &x;
    if (s == nullptr)
      for (auto& x : set)
        if (!x.used) {
          s = &x;
          break;
        }
    if (s == nullptr)
      s = &*std::min_element(set.begin(), set.end(),
                             [](const slot& a, const slot& b) { return a.seen_ns < b.seen_ns; });
    if (s->used) add_footprint(s->endpoint, -static_cast<std::int64_t>(s->chars));
    *s = {.key = m.chain,
          .seen_ns = now_ns,
          .chars = m.chars,
          .endpoint = static_cast<std::uint16_t>(endpoint),
          .used = true};
    add_footprint(endpoint, m.chars);
  }
}

prefix_balancer::prefix_balancer(const config::prefix_config& cfg, std::size_t endpoints)
    : cfg_(cfg), index_(cfg.index_entries, endpoints), evicted_through_(endpoints) {
  for (auto& t : evicted_through_) t.store(std::numeric_limits<std::int64_t>::min());
}

endpoint* prefix_balancer::least_load(cluster& c, const pick_context& ctx) const noexcept {
  endpoint* best = nullptr;
  std::uint32_t best_load = 0;
  std::uint64_t best_footprint = 0;
  for (const auto& e : c.endpoints()) {
    if (!ctx.usable(*e)) continue;
    const auto load = e->load();
    const auto footprint = index_.footprint(e->index);
    if (best == nullptr || load < best_load || (load == best_load && footprint < best_footprint)) {
      best = e.get();
      best_load = load;
      best_footprint = footprint;
    }
  }
  return best;
}

using parsers::root_of;

endpoint* prefix_balancer::rendezvous(cluster& c, const pick_context& ctx) const noexcept {
  const auto root = ctx.conversation[root_of(ctx.conversation)].chain;
  endpoint* best = nullptr;
  std::uint64_t best_score = 0;
  for (const auto& e : c.endpoints()) {
    if (!ctx.usable(*e)) continue;
    const auto score = parsers::mix64(root ^ e->label_hash);
    if (best == nullptr || score > best_score) {
      best = e.get();
      best_score = score;
    }
  }
  return best;
}

pick_result prefix_balancer::choose(cluster& c, const pick_context& ctx) noexcept {
  auto& eps = c.endpoints();
  if (!ctx.tried.empty()) return {.chosen = least_busy_usable(c, ctx)};
  if (ctx.conversation.empty()) return {.chosen = least_load(c, ctx)};

  pick_result r;
  const auto found = index_.longest(
      ctx.conversation, root_of(ctx.conversation), [&](std::uint32_t i, std::int64_t seen) {
        return i < eps.size() && ctx.usable(*eps[i]) &&
               seen > evicted_through_[i].load(std::memory_order_relaxed);
      });
  if (found) {
    r = {.chosen = eps[found->endpoint].get(),
         .reason = routing_reason::prefix_match,
         .matched_messages = found->depth + 1,
         .match_seen_ns = found->seen_ns};
  } else if (cfg_.new_conversations == config::prefix_config::placement::hash) {
    r = {.chosen = rendezvous(c, ctx), .reason = routing_reason::hash};
  } else {
    return {.chosen = least_load(c, ctx), .reason = routing_reason::least_request};
  }
  if (r.chosen == nullptr || !cfg_.load_bounds) return r;
  // Affinity gives way when the endpoint it points to has both min_gap streams more than the
  // least busy one and max_imbalance times as many.
  auto* least = least_busy_usable(c, ctx);
  const double mine = r.chosen->load();
  const double fewest = least->load();
  if (mine > fewest + cfg_.min_gap && mine > fewest * cfg_.max_imbalance)
    return {.chosen = least, .reason = routing_reason::load_bound};
  return r;
}

void prefix_balancer::served(endpoint& e, std::span<const parsers::message_digest> conversation,
                             std::int64_t now_ns) noexcept {
  index_.insert(conversation, e.index, now_ns);
}

void prefix_balancer::cache_report(endpoint& e, const pick_result& d, std::int64_t cached,
                                   std::int64_t) noexcept {
  if (d.reason != routing_reason::prefix_match || e.index >= evicted_through_.size()) return;
  auto& cut = evicted_through_[e.index];
  auto now_cut = cut.load(std::memory_order_relaxed);
  if (cached == 0) {
    // A miss: what it served until the matched prefix's time is gone.
    while (now_cut < d.match_seen_ns &&
           !cut.compare_exchange_weak(now_cut, d.match_seen_ns, std::memory_order_relaxed)) {
    }
  } else {
    // A hit on a prefix served then: it still holds what it served from then on.
    while (now_cut >= d.match_seen_ns &&
           !cut.compare_exchange_weak(now_cut, d.match_seen_ns - 1, std::memory_order_relaxed)) {
    }
  }
}

std::vector<routing_reason> prefix_balancer::reasons() const {
  std::vector<routing_reason> r = {routing_reason::prefix_match, routing_reason::least_request,
                                   routing_reason::load_bound};
  if (cfg_.new_conversations == config::prefix_config::placement::hash)
    r.push_back(routing_reason::hash);
  return r;
}

std::unique_ptr<load_balancer> make_prefix_balancer(const config::upstream_config& cfg) {
  return std::make_unique<prefix_balancer>(cfg.prefix, cfg.endpoints.size());
}

}  // namespace tokentap::proxy
