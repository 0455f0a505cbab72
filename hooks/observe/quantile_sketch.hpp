#pragma once
// The quantile sketch of the stats windows (/api/stats, the dashboard, shed rules, the endpoint
// and tenant tables): DDSketch's log buckets in a dense store, mergeable second by second.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/json.hpp"

namespace tokentap::hooks {

/// DDSketch-style log-bucketed quantile sketch: every quantile it reports is within 2 % (relative)
/// of a value that was added.  Mergeable; memory grows with the spread of values, not their count.
class quantile_sketch {
 public:
  static constexpr double relative_error = 0.02;
  void add(double v, std::uint64_t n = 1) { add_key(key_of(v), n); }
  /// The bucket of a value (zero_key for zero, negative or NaN): compute once, add to several.
  static constexpr int zero_key = -1000000;
  static int key_of(double v) noexcept;
  void add_key(int key, std::uint64_t n = 1);
  /// A key in 16 bits (key_of's range is ±2,000; zero_key becomes INT16_MIN): what a stream
  /// keeps per value until it folds them into shared sketches.
  static std::int16_t packed_key(double v) noexcept;
  /// Adds packed keys to this sketch and to `also` (if any) — once per distinct key when they
  /// cluster, as one stream's gaps between two folds do.
  void add_packed(const std::vector<std::int16_t>& keys, quantile_sketch* also = nullptr);
  void merge(const quantile_sketch& o);
  /// -1 when empty.
  double quantile(double q) const;
  std::uint64_t count() const noexcept { return count_; }

 private:
  static constexpr int min_key = -2000, max_key = 2000;  // |ln v| <= 40: e^-40 .. e^40
  void bump(int key, std::uint64_t n);
  // Dense counts for keys offset_ .. offset_ + counts_.size() - 1 (DDSketch's dense store):
  // the values one series sees in a second span a handful of neighbouring buckets, so an array
  // indexed by key beats a map lookup per value.
  std::vector<std::uint64_t> counts_;
  int offset_ = 0;
  std::uint64_t zeros_ = 0, count_ = 0;
};

/// `"key":{"p50":…,"p95":…,"p99":…,"n":…}` of a sketch, in ms (/api/stats).
void write_quantiles(base::json::writer& w, std::string_view key, const quantile_sketch& q);

}  // namespace tokentap::hooks
