#pragma once
// `tokentap analyze`: summaries of trace files — counts, outcome mix, latency percentiles, tokens,
// cache and reasoning-step statistics, the slowest requests — as text or JSON, optionally grouped.
#include <map>
#include <string>
#include <vector>

#include "replay/trace_reader.hpp"

namespace tokentap::replay {

enum class group_by { none, model, route, provider };

struct analyze_options {
  bool json = false;
  group_by by = group_by::none;
  std::size_t slowest = 5;
};

std::string analyze(const std::vector<record>& records, const analyze_options& opts);

/// One exchange in full, for a person: request, answer, outcome, timing, usage, cache events,
/// reasoning steps, reads, and the commands that replay it from `trace_path`.
std::string describe(const record& r, const std::string& trace_path);

/// Two trace sets side by side (A = baseline, B = candidate) with deltas and a distribution-shift
/// score: the KL divergence D(B || A) of output lengths (log2 buckets) and of step kinds.
std::string compare(const std::vector<record>& a, const std::vector<record>& b, bool json);

/// Per-request rows for other load tools: "csv" (timestamps, token counts, TTFT, e2e, ITL list) or
/// "aiperf" (JSON Lines with timestamp, input_length, output_length — AIPerf's trace replay input).
std::string export_rows(const std::vector<record>& records, const std::string& format);

/// Nearest-rank P50/P95/P99 of the values present (negative = absent); -1 when none.
struct percentiles3 {
  double p50 = -1, p95 = -1, p99 = -1;
};
percentiles3 percentiles_of(std::vector<double> values);

struct comparison_row {
  std::string name;
  percentiles3 a, b;
};
/// A text table: each row's P50/P95/P99 for A and B and the change in percent.
std::string side_by_side(const std::vector<comparison_row>& rows, const std::string& a_label,
                         const std::string& b_label);

/// KL divergence D(p || q) of two count histograms over the same keys, with add-one smoothing.
double kl_divergence(const std::map<std::string, double>& p,
                     const std::map<std::string, double>& q);

}  // namespace tokentap::replay
