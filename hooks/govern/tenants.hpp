#pragma once
// Tenants (DESIGN.md §11): who a request is for, with a bounded set of names, and the
// per-tenant table of /api/stats.
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "hooks/hook.hpp"
#include "hooks/observe/metrics.hpp"
#include "hooks/sliding_window.hpp"

namespace tokentap::hooks {

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

/// The salted hash of a credential (never the credential itself); never 0.
std::uint64_t credential_hash(std::string_view secret, std::uint64_t salt) noexcept;
/// The salt for credential_hash: derived from the configured salt text, else random (per process).
std::uint64_t credential_salt(std::string_view configured);

/// Per tenant over the sliding window: requests, what admission refused, errors, tokens and TTFT
/// quantiles.  Rows appear with a tenant's first request; their number is bounded by the tenant
/// names (tenants.max + `other`, `anonymous`).
class tenant_stats {
 public:
  tenant_stats(std::chrono::seconds window, std::size_t max_rows)
      : window_(window), max_rows_(max_rows) {}

  /// A finished exchange (stream_info::tenant empty: not counted).
  void record(const stream_info& s);

  /// `[{tenant, request_rate, requests, rejected, errors, input_tokens, output_tokens,
  /// ttft_ms: {...}}, ...]` over the window, busiest first.
  void write_json(base::json::writer& w, double window_s);

 private:
  struct second {
    std::uint64_t requests = 0, rejected = 0, errors = 0, input_tokens = 0, output_tokens = 0;
    quantile_sketch ttft;
  };
  struct row {
    std::string tenant;
    sliding_window<second> seconds{1};
  };
  std::chrono::seconds window_;
  std::size_t max_rows_;
  std::mutex mu_;
  std::vector<std::unique_ptr<row>> rows_;
  std::unordered_map<std::string, row*> by_name_;  // rows_ by tenant (up to tenants.max + 3)
};

}  // namespace tokentap::hooks
