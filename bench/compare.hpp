#pragma once
// `tokentap bench compare A B` (DESIGN.md §14): for each latency metric (TTFT, TTFO, TPOT, end to
// end; P50 and P99) and each accuracy (all graded tasks, and per category), how run B moved from
// run A, with a bootstrap 95 % interval and a verdict.  Requests are paired by level and id when
// both runs ran the same workload (every request in both, once), which cancels what a request
// costs in both runs; otherwise each run is resampled on its own.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "bench/stats.hpp"
#include "bench/summary.hpp"

namespace tokentap::bench {

struct compare_options {
  /// A latency metric is worse (better) only when its whole interval lies above (below) this
  /// change in percent: two runs of one target differ by a percent or two for reasons no change
  /// of theirs explains (the machine's neighbours, the time of day), which thousands of requests
  /// make significant.  Accuracies need only an interval that excludes 0.
  double min_change_pct = 5;
  std::uint64_t seed = 1;
  std::size_t resamples = 2000;
};

struct metric_change {
  enum class verdict : std::uint8_t { better, worse, same };
  std::string name;     ///< `ttft_ms.p50`, `e2e_ms.p99`, `accuracy`, `accuracy.math` …
  bool latency = true;  ///< lower is better; else an accuracy (higher is better)
  std::size_t n_a = 0, n_b = 0;
  change c;
  verdict v = verdict::same;
};
std::string_view to_string(metric_change::verdict v) noexcept;

struct comparison {
  bool paired = false;
  std::vector<metric_change> metrics;
  /// A latency or accuracy metric is worse: `compare` exits 1.
  bool regressed() const noexcept;
};

/// Compares the runs' requests (warm-up requests are left out; latencies of the requests that
/// succeeded, accuracies of the graded ones).  A metric neither run measured is left out.
comparison compare_runs(std::span<const request_result> a, std::span<const request_result> b,
                        const compare_options& opts = {});

/// `{"paired": bool, "metrics": [{"name", "a", "b", "delta_pct", "ci95": [lo, hi], "verdict",
/// "n_a", "n_b"}]}` (DESIGN.md §14); a percentage that does not exist (run A's figure is 0) is
/// null.
std::string comparison_json(const comparison& c);
/// The same as a table for people.
std::string comparison_text(const comparison& c);

}  // namespace tokentap::bench
