#pragma once
// `tokentap analyze`: summaries of trace files — counts, outcome mix, latency percentiles, tokens,
// cache and reasoning-step statistics, the slowest requests — as text or JSON, optionally grouped.
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

}  // namespace tokentap::replay
