#include "hooks/observe/cache_hook.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "base/clock.hpp"
#include "base/json.hpp"
#include "hooks/observe/metrics.hpp"
#include "hooks/registry.hpp"

namespace tokentap::hooks {

namespace {

std::uint64_t mix(std::uint64_t a, std::uint64_t b) {
  return (a ^ (b + 0x9e3779b97f4a7c15ull + (a << 6) + (a >> 2))) * 0xff51afd7ed558ccdull;
}

std::uint64_t hash_str(std::string_view s) {
  std::uint64_t h = 14695981039346656037ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

constexpr std::size_t bytes_per_token = 4;  // the usual estimate for English text

}  // namespace

prefix_tracker::prefix_tracker(const cache_settings& cfg) : cfg_(cfg) {}

prefix_tracker::analysis prefix_tracker::observe(std::uint64_t scope,
                                                 std::span<const parsers::message_digest> conv,
                                                 clock::time_point started,
                                                 clock::time_point cacheable) {
  analysis a;
  if (conv.empty()) return a;
  std::lock_guard lk(mu_);
  // 1. The longest prefix cacheable before this request was sent, and how long before.
  for (std::size_t i = conv.size(); i-- > 0;) {
    auto* e = prefixes_.find(mix(scope, conv[i].chain));
    if (e == nullptr || e->first > started) continue;
    a.found = true;
    a.at_message = i + 1;
    a.shared_chars = conv[i].chars_before + conv[i].chars;
    // (Made cacheable again since it was sent: it was live then.)
    a.age_s = e->last <= started ? std::chrono::duration<double>(started - e->last).count() : 0;
    a.prefix_key = mix(scope, conv[i].chain);
    break;
  }
  if (!a.found) a.prefix_key = mix(scope, conv.back().chain);  // this whole prompt, next time

  // 2. The conversation it continues: the one with the same first user message.
  std::size_t first_user = conv.size();
  for (std::size_t i = 0; i < conv.size(); ++i)
    if (conv[i].role == "user") {
      first_user = i;
      break;
    }
  std::uint64_t conv_key = 0;
  a.continues = first_user + 1 < conv.size();
  if (first_user < conv.size()) {
    conv_key = mix(scope, conv[first_user].hash);
    if (auto* prev = conversations_.find(conv_key)) {
      const auto& p = prev->chains;
      std::size_t k = 0;
      while (k < p.size() && k < conv.size() && p[k] == conv[k].chain) ++k;
      if (k < p.size() && k < conv.size()) {
        a.divergence_at = static_cast<int>(k);
        a.previous_elements = p.size();
      } else if (k == p.size() && k < conv.size()) {
        a.previous_input_tokens = prev->input_tokens;  // the previous turn, whole, then more
      }
    } else if (auto* pos = user_positions_.find(mix(scope, conv[first_user].hash));
               pos && pos->index > 0) {
      // 3. Its first user message was a later user message of a recent conversation: the head of
      //    that conversation was dropped (a sliding window, or the client trimming history).
      a.dropped_messages = static_cast<int>(pos->index);
    }
  }

  // 4. Remember this request.
  for (const auto& d : conv) {
    auto& e = prefixes_.put(mix(scope, d.chain), cfg_.max_prefixes);
    const bool fresh = e.first == clock::time_point{};
    e.first = fresh ? cacheable : std::min(e.first, cacheable);
    e.last = fresh ? cacheable : std::max(e.last, cacheable);
  }
  if (conv_key) {
    auto& c = conversations_.put(conv_key, cfg_.max_conversations);
    c.input_tokens = -1;
    c.chains.clear();
    c.user_hashes.clear();
    for (const auto& d : conv) {
      c.chains.push_back(d.chain);
      if (d.role == "user") c.user_hashes.push_back(d.hash);
    }
    c.last = cacheable;
    for (std::size_t i = 0; i < c.user_hashes.size(); ++i) {
      auto& p = user_positions_.put(mix(scope, c.user_hashes[i]), cfg_.max_prefixes);
      // Keep the earliest position a message was seen at (its own conversation's start is 0).
      if (p.conversation == 0 || p.conversation == conv_key) {
        p.conversation = conv_key;
        p.index = i;
      }
    }
  }
  return a;
}

void prefix_tracker::remember_input(std::uint64_t scope,
                                    std::span<const parsers::message_digest> conv,
                                    std::int64_t input_tokens) {
  if (conv.empty()) return;
  const auto root = parsers::root_of(conv);
  if (conv[root].role != "user") return;
  std::lock_guard lk(mu_);
  auto* c = conversations_.find(mix(scope, conv[root].hash));
  if (c && c->chains.size() == conv.size() && c->chains.back() == conv.back().chain)
    c->input_tokens = input_tokens;
}

std::size_t prefix_tracker::record_miss(std::uint64_t prefix_key, clock::time_point now) {
  std::lock_guard lk(mu_);
  if (misses_.size() > cfg_.max_prefixes) misses_.clear();  // bounded: forget under pressure
  auto& q = misses_[prefix_key];
  while (!q.empty() && now - q.front() > cfg_.repeated_miss_window) q.pop_front();
  q.push_back(now);
  return q.size();
}

std::pair<double, std::size_t> prefix_tracker::prefill_sample(std::uint64_t model_scope,
                                                              double ms) {
  std::lock_guard lk(mu_);
  if (prefill_.size() > 10000) prefill_.clear();
  auto& w = prefill_[model_scope];
  auto& sorted = w.sorted;
  // The median as the element at size / 2 in sorted order (what nth_element picked, when each
  // request copied the window and selected it: ~5 k instructions and an allocation per request).
  const std::pair<double, std::size_t> before{sorted.empty() ? 0.0 : sorted[sorted.size() / 2],
                                              sorted.size()};
  if (!std::isfinite(ms)) return before;  // kept out: the window stays ordered
  sorted.insert(std::upper_bound(sorted.begin(), sorted.end(), ms), ms);
  w.arrived.push_back(ms);
  if (w.arrived.size() > 200) {  // a rolling median over the last 200 requests
    sorted.erase(std::lower_bound(sorted.begin(), sorted.end(), w.arrived.front()));
    w.arrived.pop_front();
  }
  return before;
}

namespace {

class cache_hook final : public hook {
 public:
  explicit cache_hook(std::shared_ptr<prefix_tracker> t) : tracker_(std::move(t)) {}

  // The conversation is compared at the stream's end, with what the endpoint that answered
  // saw before: each replica keeps its own cache.
  void on_request(const request_view& r) override {
    model_ = std::string(r.model);
    scope_ = mix(mix(r.tenant, hash_str(r.route)), hash_str(r.model));
    model_scope_ = mix(hash_str(r.route), hash_str(r.model));
    conversation_.assign(r.conversation.begin(), r.conversation.end());
  }

  unsigned per_event() const noexcept override { return 0; }

  void fill(stream_info& s) override {
    const auto& cfg = tracker_->cfg();
    const auto& u = s.usage;
    const auto& attempts = s.upstream.attempts;
    const auto scope = attempts.empty() ? scope_ : mix(scope_, hash_str(attempts.back().endpoint));
    if (!conversation_.empty()) {
      // The request's start and its first token on the tracker's clock (the same monotonic
      // clock as the stream's stamps).
      const auto now = prefix_tracker::clock::now();
      const auto now_ns = base::mono_now_ns();
      const auto at = [&](mono_ns t) { return now - std::chrono::nanoseconds(now_ns - t); };
      a_ = tracker_->observe(scope, conversation_, s.start_ns > 0 ? at(s.start_ns) : now,
                             s.first_token_ns > 0 ? at(s.first_token_ns) : now);
      observed_ = true;
      if (u.input_tokens > 0) tracker_->remember_input(scope, conversation_, u.input_tokens);
    }
    // Provider-reported events, judged against what could have been cached: a turn that repeats
    // the previous one whole and had (nearly) all of it cached is a hit, however long the new
    // part is.
    auto cls = cache_class(u);
    if (cls == "partial" && a_.previous_input_tokens > 0 &&
        static_cast<double>(u.cached_input_tokens) >=
            0.9 * static_cast<double>(std::min(a_.previous_input_tokens, u.input_tokens)))
      cls = "hit";
    if (cls != "unknown") s.cache_outcome = cls;
    std::string counts = "\"cached_tokens\":" + std::to_string(u.cached_input_tokens) +
                         ",\"input_tokens\":" + std::to_string(u.input_tokens);
    if (a_.previous_input_tokens >= 0)
      counts += ",\"previous_turn_input_tokens\":" + std::to_string(a_.previous_input_tokens);
    if (cls == "hit" || cls == "partial" || cls == "miss") add(std::string(cls), counts);
    // A known conversation that changed before the end of its previous turn.  Not a first turn
    // set against a longer conversation that opened with the same message: that is a new
    // conversation.  And not when the engine reports the whole prompt cached (but for the one
    // or two tokens an engine always computes again): then the comparison was wrong, not the
    // cache.  (Caches reuse tokens, not messages: a partly cached prompt may have diverged
    // inside a message, past the element's start that shared_tokens_est counts to.)
    if (a_.divergence_at >= 0 && (a_.continues || a_.previous_elements <= conversation_.size())) {
      const auto& d = conversation_[static_cast<std::size_t>(a_.divergence_at)];
      const auto shared_est = static_cast<std::int64_t>(d.chars_before / bytes_per_token);
      const bool contradicted = u.cache_fields && u.cached_input_tokens > 0 &&
                                u.cached_input_tokens >= u.input_tokens - 2;
      // The evidence carries the provider's own count beside the estimate (the elements before
      // the change): more cached than estimated means the change lies inside that element.
      if (!contradicted)
        add("prefix_divergence",
            "\"at_message\":" + std::to_string(a_.divergence_at) + ",\"role\":\"" +
                std::string(d.role) +
                "\",\"previous_messages\":" + std::to_string(a_.previous_elements) +
                ",\"shared_tokens_est\":" + std::to_string(shared_est) +
                (u.cache_fields && u.cached_input_tokens >= 0
                     ? ",\"cached_tokens\":" + std::to_string(u.cached_input_tokens) +
                           ",\"input_tokens\":" + std::to_string(u.input_tokens) +
                           (u.cached_input_tokens > shared_est ? ",\"within_message\":true" : "")
                     : std::string()));
    }
    if (a_.dropped_messages > 0) {
      add("truncation", "\"reason\":\"head_dropped\",\"dropped_user_messages\":" +
                            std::to_string(a_.dropped_messages));
    }
    if (u.cache_write_tokens > 0)
      add("write", "\"cache_write_tokens\":" + std::to_string(u.cache_write_tokens));

    // The context window (per model, from config).
    for (const auto& [model, window] : cfg.context_windows) {
      if (model == model_ && window > 0 && u.input_tokens >= 0 &&
          static_cast<double>(u.input_tokens) >=
              cfg.truncation_fraction * static_cast<double>(window)) {
        char f[32];
        std::snprintf(f, sizeof f, "%.3f",
                      static_cast<double>(u.input_tokens) / static_cast<double>(window));
        add("truncation",
            "\"reason\":\"context_window\",\"input_tokens\":" + std::to_string(u.input_tokens) +
                ",\"context_window\":" + std::to_string(window) + ",\"fraction\":" + f);
      }
    }

    // A reusable prefix that the provider did not reuse.
    const auto now = prefix_tracker::clock::now();
    const std::uint64_t shared_tokens = a_.shared_chars / bytes_per_token;
    bool missed = false;
    if (observed_ && u.cache_fields && u.cached_input_tokens >= 0) {
      if (a_.found && shared_tokens >= cfg.min_prefix_tokens &&
          static_cast<double>(u.cached_input_tokens) < 0.5 * static_cast<double>(shared_tokens)) {
        missed = true;
        char age[32];
        std::snprintf(age, sizeof age, "%.3f", a_.age_s);
        const bool expired = a_.age_s > std::chrono::duration<double>(cfg.ttl).count();
        add(expired ? "expired" : "unexpected_miss",
            "\"at_message\":" + std::to_string(a_.at_message) +
                ",\"shared_tokens_est\":" + std::to_string(shared_tokens) +
                ",\"cached_tokens\":" + std::to_string(u.cached_input_tokens) +
                ",\"age_s\":" + age + ",\"ttl_s\":" + std::to_string(cfg.ttl.count()));
      } else if (u.cached_input_tokens == 0 &&
                 u.input_tokens >= static_cast<std::int64_t>(cfg.min_prefix_tokens)) {
        missed = true;  // a large prompt served cold, seen before or not
      }
      if (missed) {
        const auto n = tracker_->record_miss(a_.prefix_key, now);
        if (n >= cfg.repeated_miss_count) {
          add("repeated_miss", "\"prefix_misses\":" + std::to_string(n) + ",\"window_s\":" +
                                   std::to_string(cfg.repeated_miss_window.count()));
        }
      }
    }

    // Prefill slower than usual for this model, per uncached token.
    if (s.timing.ttft_ms > 0 && u.input_tokens > 0) {
      const auto uncached = u.input_tokens - std::max<std::int64_t>(0, u.cached_input_tokens);
      if (uncached >= prefill_min_uncached) {
        const double per_token = s.timing.ttft_ms / static_cast<double>(uncached);
        const auto [median, samples] = tracker_->prefill_sample(model_scope_, per_token);
        if (samples >= cfg.prefill_min_samples && median > 0 &&
            per_token > cfg.prefill_factor * median) {
          char buf[160];
          std::snprintf(buf, sizeof buf,
                        "\"ttft_ms\":%.3f,\"uncached_tokens\":%lld,\"ms_per_uncached_token\":%.5f,"
                        "\"median_ms_per_token\":%.5f,\"factor\":%.2f,\"samples\":%zu",
                        s.timing.ttft_ms, static_cast<long long>(uncached), per_token, median,
                        per_token / median, samples);
          add("prefill_anomaly", buf);
        }
      }
    }
    s.cache_events = std::move(events_);
  }

 private:
  void add(std::string event, const std::string& evidence) {
    events_.emplace_back(event, "{\"event\":\"" + event + "\"," + evidence + "}");
  }

  std::shared_ptr<prefix_tracker> tracker_;
  // Below this many uncached tokens TTFT is the engine's fixed floor (scheduling, the first
  // decode step, its HTTP front end), not prefill: a near-complete cache hit with 1 uncached
  // token and 3 ms TTFT is no prefill anomaly.
  static constexpr std::int64_t prefill_min_uncached = 32;

  std::string model_;
  std::vector<parsers::message_digest> conversation_;  // the request's (bounded by the inspector)
  std::uint64_t scope_ = 0, model_scope_ = 0;
  prefix_tracker::analysis a_;
  bool observed_ = false;
  std::vector<std::pair<std::string, std::string>> events_;
};

}  // namespace

cache_hook_factory::cache_hook_factory(const cache_settings& settings)
    : tracker_(std::make_shared<prefix_tracker>(settings)) {}

std::unique_ptr<hook> cache_hook_factory::create() {
  return std::make_unique<cache_hook>(tracker_);
}

cache_settings cache_settings::parse(const config::section& s) {
  cache_settings c;
  if (!s) return c;
  s.check_keys({"max_prefixes", "max_conversations", "ttl_s", "min_prefix_tokens", "prefill_factor",
                "prefill_min_samples", "repeated_miss_count", "repeated_miss_window_s",
                "truncation_fraction", "context_windows"},
               "cache");
  auto count = [&](std::string_view key, std::size_t& field) {
    if (const auto& v = s[key]) field = v.non_negative(key);
  };
  auto seconds = [&](std::string_view key, std::chrono::seconds& field) {
    if (const auto& v = s[key]) field = std::chrono::seconds(v.non_negative(key));
  };
  count("max_prefixes", c.max_prefixes);
  count("max_conversations", c.max_conversations);
  seconds("ttl_s", c.ttl);
  count("min_prefix_tokens", c.min_prefix_tokens);
  if (const auto& v = s["prefill_factor"]) c.prefill_factor = v.number("prefill_factor");
  count("prefill_min_samples", c.prefill_min_samples);
  count("repeated_miss_count", c.repeated_miss_count);
  seconds("repeated_miss_window_s", c.repeated_miss_window);
  if (const auto& v = s["truncation_fraction"])
    c.truncation_fraction = v.number("truncation_fraction");
  if (const auto& w = s["context_windows"]) {
    if (w.type() != config::section::kind::map)
      w.fail("cache.context_windows must map model -> tokens");
    for (const auto& m : w.members())
      c.context_windows.emplace_back(m.key, m.value.non_negative("context_windows"));
  }
  return c;
}

void register_cache_hook(hook_registry& r) {
  r.add_with_settings<cache_settings>(
      "cache", &cache_settings::parse,
      [](const config::config&, const cache_settings& c) -> std::shared_ptr<hook_factory> {
        return std::make_shared<cache_hook_factory>(c);
      },
      {.provides = {"cache_events"}, .needs = {"timing"}, .reads = {}});
}

}  // namespace tokentap::hooks
