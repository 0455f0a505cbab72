#pragma once
// Admission (DESIGN.md §11): request-phase rules that refuse what is over its limits before
// anything reaches the upstream — concurrency, requests per minute and tokens per minute, per
// tenant, route, model or for all requests.  Rates are token buckets refilled continuously (a
// per-minute limit is also the burst); a token budget reserves the request's estimate at
// admission and settles at stream end from the normalized usage, so a stream cannot overrun it
// unseen (an overrun is charged: the bucket goes into debt).  State is local to the process.
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "hooks/hook.hpp"

namespace tokentap::hooks {

class metrics_registry;

/// Why a rule refused: the `reason` label of tokentap_admission_rejections_total.
enum class admission_reason : std::uint8_t { concurrency, requests, tokens, count_ };
std::string_view to_string(admission_reason r) noexcept;

/// Tenants told apart (tenants_config): the first `max` distinct names keep their own, later ones
/// share `other`.  Thread safe.
class tenant_names {
 public:
  explicit tenant_names(std::size_t max) : max_(max) {}
  /// The request's tenant: `header_value` when present (at most 64 bytes, anything but letters,
  /// digits and `._-:@` replaced by `_`), else `key-` and 12 hex digits of the salted credential
  /// hash (`credential`, 0: none), else `anonymous` — bounded as above.
  std::string name_of(std::string_view header_value, std::uint64_t credential);

 private:
  std::size_t max_;
  std::mutex mu_;
  std::unordered_map<std::string, bool> known_;
};

/// Every rule's counters, shared by all exchanges.
class admission_state {
 public:
  admission_state(const config::config& cfg, std::shared_ptr<metrics_registry> metrics);

  /// What one admission decision held: per rule, the bucket it counted on and the tokens it
  /// reserved; released (concurrency) and settled (tokens) once, at stream end.
  struct ticket {
    struct hold {
      std::size_t rule;
      void* bucket;
      double reserved_tokens;
      bool concurrent;
    };
    std::vector<hold> holds;
  };

  /// A refusal: which rule, why, and what the reply says.
  struct refusal {
    std::size_t rule = 0;
    admission_reason reason{};
    unsigned status = 429;
    std::uint32_t retry_after_s = 1;
    // The refusing rule's limits and what is left (for the rate-limit headers); 0 limit: none.
    std::uint64_t request_limit = 0, requests_left = 0, token_limit = 0, tokens_left = 0;
    double requests_reset_s = 0, tokens_reset_s = 0;
  };

  struct facts {
    std::string_view tenant, route, model;
    double estimate_tokens = 0;  ///< prompt estimate + output budget
    std::int64_t max_tokens = -1;
  };

  /// Admits (filling `t`) or refuses (`t` left empty, nothing held).  `now` on the steady clock.
  bool admit(const facts& f, ticket& t, refusal& r, std::chrono::steady_clock::time_point now);
  /// The exchange ended: concurrency released, reserved tokens replaced by `used` (< 0: unknown,
  /// the reservation stands).
  void settle(ticket& t, double used, std::chrono::steady_clock::time_point now);

  const config::config& cfg() const noexcept { return *cfg_; }
  std::uint64_t rejections(std::size_t rule, admission_reason r) const noexcept {
    return rules_[rule]->rejected[static_cast<std::size_t>(r)].load(std::memory_order_relaxed);
  }
  tenant_names& tenants() noexcept { return tenants_; }

 private:
  struct bucket {
    std::uint32_t in_flight = 0;
    double requests = 0, tokens = 0;  // available
    std::chrono::steady_clock::time_point refilled{};
  };
  struct rule_state {
    const config::admission_rule* cfg;
    std::size_t max_keys;
    std::mutex mu;
    std::unordered_map<std::string, std::unique_ptr<bucket>> buckets;
    std::array<std::atomic<std::uint64_t>, static_cast<std::size_t>(admission_reason::count_)>
        rejected{};
  };
  bucket& bucket_of(rule_state& rs, std::string_view key,
                    std::chrono::steady_clock::time_point now);
  static void refill(const config::admission_rule& r, bucket& b,
                     std::chrono::steady_clock::time_point now);

  const config::config* cfg_;
  std::vector<std::unique_ptr<rule_state>> rules_;
  tenant_names tenants_;
};

/// The "admission" hook (added by the config when it has admission rules).
class admission_hook_factory final : public hook_factory {
 public:
  explicit admission_hook_factory(std::shared_ptr<admission_state> state)
      : state_(std::move(state)) {}
  std::unique_ptr<hook> create() override;

 private:
  std::shared_ptr<admission_state> state_;
};

}  // namespace tokentap::hooks
