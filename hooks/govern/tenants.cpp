#include "hooks/govern/tenants.hpp"

#include <algorithm>
#include <cstdio>
#include <random>

#include "base/clock.hpp"
#include "base/json.hpp"

namespace tokentap::hooks {

std::string tenant_names::name_of(std::string_view header_value, std::uint64_t credential) {
  std::string name;
  if (!header_value.empty()) {
    for (char c : header_value.substr(0, 64)) {
      const bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                         (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-' || c == ':' ||
                         c == '@';
      name.push_back(plain ? c : '_');
    }
  } else if (credential != 0) {
    char buf[24];
    std::snprintf(buf, sizeof buf, "key-%012llx",
                  static_cast<unsigned long long>(credential >> 16));
    name = buf;
  } else {
    return "anonymous";
  }
  std::lock_guard lk(mu_);
  if (known_.count(name) != 0) return name;
  if (known_.size() >= max_) return "other";
  known_.emplace(name, true);
  return name;
}

std::uint64_t credential_hash(std::string_view secret, std::uint64_t salt) noexcept {
  std::uint64_t h = 14695981039346656037ull ^ salt;
  for (unsigned char c : secret) h = (h ^ c) * 1099511628211ull;
  // (A final avalanche: the printed tenant name shows the hash's high bits.)
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  return h == 0 ? 1 : h;
}

std::uint64_t credential_salt(std::string_view configured) {
  if (!configured.empty()) return credential_hash(configured, 0x6a09e667f3bcc908ull);
  std::random_device rd;
  return (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
}

void tenant_stats::record(const stream_info& s) {
  if (s.tenant.empty()) return;
  const auto now = base::steady_seconds();
  std::lock_guard lk(mu_);
  auto it = by_name_.find(s.tenant);
  if (it == by_name_.end()) {
    if (rows_.size() >= max_rows_) return;  // (tenant names are bounded below this)
    auto r = std::make_unique<row>();
    r->tenant = s.tenant;
    r->seconds = sliding_window<second>(window_.count());
    it = by_name_.emplace(r->tenant, r.get()).first;
    rows_.push_back(std::move(r));
  }
  auto& sec = it->second->seconds.at(now);
  ++sec.requests;
  if (s.outcome == stream_outcome::rejected) {
    ++sec.rejected;
    return;
  }
  if (upstream_failed(s.status, s.outcome)) ++sec.errors;
  if (s.usage.input_tokens > 0)
    sec.input_tokens += static_cast<std::uint64_t>(s.usage.input_tokens);
  if (s.usage.output_tokens > 0)
    sec.output_tokens += static_cast<std::uint64_t>(s.usage.output_tokens);
  if (s.first_token_ns >= 0 && s.start_ns > 0)
    sec.ttft.add(static_cast<double>(s.first_token_ns - s.start_ns) / 1e6);
}

void tenant_stats::write_json(base::json::writer& w, double window_s) {
  const auto now = base::steady_seconds();
  std::lock_guard lk(mu_);
  std::vector<std::pair<const row*, second>> sums;
  for (const auto& r : rows_) {
    second sum;
    r->seconds.for_each(now, [&](std::int64_t, const second& sec) {
      sum.requests += sec.requests;
      sum.rejected += sec.rejected;
      sum.errors += sec.errors;
      sum.input_tokens += sec.input_tokens;
      sum.output_tokens += sec.output_tokens;
      sum.ttft.merge(sec.ttft);
    });
    if (sum.requests > 0) sums.emplace_back(r.get(), std::move(sum));
  }
  std::stable_sort(sums.begin(), sums.end(), [](const auto& a, const auto& b) {
    return a.second.requests > b.second.requests;
  });
  w.begin_array();
  for (const auto& [r, sum] : sums) {
    w.begin_object().field("tenant", r->tenant);
    w.key("request_rate").number(per_second(static_cast<double>(sum.requests), window_s), 3);
    w.field("requests", sum.requests)
        .field("rejected", sum.rejected)
        .field("errors", sum.errors)
        .field("input_tokens", sum.input_tokens)
        .field("output_tokens", sum.output_tokens);
    write_quantiles(w, "ttft_ms", sum.ttft);
    w.end();
  }
  w.end();
}

}  // namespace tokentap::hooks
