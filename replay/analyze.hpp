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

/// Two trace sets side by side (A = baseline, B = candidate) with deltas and a distribution-shift
/// score: the KL divergence D(B || A) of output lengths (log2 buckets) and of step kinds.
std::string compare(const std::vector<record>& a, const std::vector<record>& b, bool json);

/// Per-request rows for other load tools: "csv" (timestamps, token counts, TTFT, e2e, ITL list) or
/// "aiperf" (JSON Lines with timestamp, input_length, output_length — AIPerf's trace replay input).
std::string export_rows(const std::vector<record>& records, const std::string& format);

/// KL divergence D(p || q) of two count histograms over the same keys, with add-one smoothing.
double kl_divergence(const std::map<std::string, double>& p,
                     const std::map<std::string, double>& q);

}  // namespace tokentap::replay
