#include "hooks/observe/quantile_sketch.hpp"

#include <algorithm>
#include <climits>
#include <cmath>

#include "base/json.hpp"

namespace tokentap::hooks {

namespace {
// gamma = (1 + a) / (1 - a): a value v lands in bucket ceil(log_gamma v) and is reported as the
// bucket's midpoint 2 gamma^i / (gamma + 1), within a (relative) of v.
const double sketch_gamma =
    (1 + quantile_sketch::relative_error) / (1 - quantile_sketch::relative_error);
const double sketch_log_gamma = std::log(sketch_gamma);
}  // namespace

int quantile_sketch::key_of(double v) noexcept {
  if (!(v > 1e-9)) return zero_key;  // zero, negative (clock noise) or NaN
  const double k = std::ceil(std::log(v) / sketch_log_gamma);
  return k < min_key ? min_key : k > max_key ? max_key : static_cast<int>(k);
}

void quantile_sketch::add_key(int key, std::uint64_t n) {
  count_ += n;
  if (key == zero_key)
    zeros_ += n;
  else
    bump(key, n);
}

std::int16_t quantile_sketch::packed_key(double v) noexcept {
  const int k = key_of(v);
  return static_cast<std::int16_t>(k == zero_key ? INT16_MIN : k);
}

void quantile_sketch::add_packed(const std::vector<std::int16_t>& keys, quantile_sketch* also) {
  auto add = [&](int key, std::uint64_t n) {
    add_key(key, n);
    if (also) also->add_key(key, n);
  };
  int lo = INT_MAX, hi = INT_MIN;
  std::uint64_t zeros = 0;
  for (const auto k : keys) {
    if (k == INT16_MIN) {
      ++zeros;
      continue;
    }
    lo = std::min<int>(lo, k);
    hi = std::max<int>(hi, k);
  }
  if (zeros != 0) add(zero_key, zeros);
  if (lo > hi) return;
  // Counted in a local histogram first when the keys span at most 256 buckets (a factor of
  // ~20,000 between the smallest and the largest value): one add per bucket, not per key.
  constexpr int span = 256;
  if (hi - lo >= span) {
    for (const auto k : keys)
      if (k != INT16_MIN) add(k, 1);
    return;
  }
  std::array<std::uint32_t, span> n{};
  for (const auto k : keys)
    if (k != INT16_MIN) ++n[static_cast<std::size_t>(k - lo)];
  for (int i = 0; i <= hi - lo; ++i)
    if (n[static_cast<std::size_t>(i)] != 0) add(lo + i, n[static_cast<std::size_t>(i)]);
}

void quantile_sketch::bump(int key, std::uint64_t n) {
  if (counts_.empty()) {
    offset_ = key;
    counts_.assign(1, 0);
  } else if (key < offset_) {
    counts_.insert(counts_.begin(), static_cast<std::size_t>(offset_ - key), 0);
    offset_ = key;
  } else if (key >= offset_ + static_cast<int>(counts_.size())) {
    counts_.resize(static_cast<std::size_t>(key - offset_) + 1, 0);
  }
  counts_[static_cast<std::size_t>(key - offset_)] += n;
}

void quantile_sketch::merge(const quantile_sketch& o) {
  count_ += o.count_;
  zeros_ += o.zeros_;
  for (std::size_t i = 0; i < o.counts_.size(); ++i)
    if (o.counts_[i] != 0) bump(o.offset_ + static_cast<int>(i), o.counts_[i]);
}

double quantile_sketch::quantile(double q) const {
  if (count_ == 0) return -1;
  const auto rank = static_cast<std::uint64_t>(std::ceil(q * static_cast<double>(count_)));
  std::uint64_t seen = zeros_;
  if (rank <= seen) return 0;
  const auto value = [](int k) { return 2 * std::pow(sketch_gamma, k) / (sketch_gamma + 1); };
  for (std::size_t i = 0; i < counts_.size(); ++i) {
    seen += counts_[i];
    if (seen >= rank) return value(offset_ + static_cast<int>(i));
  }
  return value(offset_ + static_cast<int>(counts_.size()) - 1);
}

void write_quantiles(base::json::writer& w, std::string_view key, const quantile_sketch& q) {
  w.key(key).begin_object();
  w.key("p50").ms(q.quantile(0.5));
  w.key("p95").ms(q.quantile(0.95));
  w.key("p99").ms(q.quantile(0.99));
  w.field("n", q.count()).end();
}

}  // namespace tokentap::hooks
