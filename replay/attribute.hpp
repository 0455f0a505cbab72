#pragma once
// `tokentap analyze --attribute` (DESIGN.md §13): where TTFT and end to end went at P50, P95 and
// P99, phase by phase, from the records' `attribution`; with two trace sets, which phases grew,
// largest first, in a line a person can paste into an incident — and the cache events and their
// causes beside, so a prefill that grew because conversations lost their prefix says so.
#include <array>
#include <map>
#include <string>
#include <vector>

#include "replay/trace_reader.hpp"

namespace tokentap::replay {

/// The phases a request's TTFT or end to end is cut into, in order.  Where the engine gave its
/// account, the wait for the first token is its queue, load, prefill (a non-streamed answer: and
/// decode, or TGI's inference) and the rest (`unexplained`); otherwise it is `upstream_head` and
/// `first_token`.  So each request's phases sum to its total.
inline constexpr std::array<const char*, 13> attribution_phase_names = {
    "proxy",          "fault",         "failed_attempts",  "connect",
    "upstream_head",  "first_token",   "engine_queue",     "engine_load",
    "engine_prefill", "engine_decode", "engine_inference", "unexplained",
    "decode"};

/// One quantile of one total: the total there, and each phase's mean over the requests around it
/// (their totals' ranks within a few of the quantile's), in milliseconds.
struct attribution_point {
  double total_ms = -1;    ///< the total at the quantile (nearest rank); -1: no request
  double around_ms = 0;    ///< the mean total of the requests around it
  std::size_t around = 0;  ///< how many
  std::array<double, attribution_phase_names.size()> phase_ms{};
};

/// The cache events of a trace set: per event name, and the causes of lost prefixes.
struct cache_summary {
  std::size_t records = 0;      ///< records with cache events
  std::size_t lost_prefix = 0;  ///< of them, with a cause (divergence, truncation, expiry, …)
  std::map<std::string, std::size_t> events, causes;  ///< causes in words ("system prompt changed")
};

struct attribution_summary {
  std::size_t records = 0, attributed = 0;
  /// [0] TTFT, [1] end to end; each at P50, P95, P99.
  std::array<std::array<attribution_point, 3>, 2> at;
  cache_summary cache;
  /// Faults injected on purpose (records' `fault`), by what they were: "slow-net delay 200 ms".
  std::map<std::string, std::size_t> faults;
};

attribution_summary summarize_attribution(const std::vector<record>& records);

/// The summary as text, or as JSON (`{"ttft": {"p50": [{"phase","ms","share"}…], …}, "e2e": …,
/// "cache": …}`).
std::string attribute_report(const attribution_summary& s, bool json);

/// A against B: per total and quantile, each phase's A and B means and their difference, largest
/// growth first, and the line that says it; JSON as DESIGN.md §13.
std::string attribute_compare(const attribution_summary& a, const attribution_summary& b,
                              bool json);

/// The one line for a quantile's comparison: "TTFT P99 +210 %: engine_queue +180 ms (78 %), …".
std::string growth_line(const char* total, const char* quantile, const attribution_point& a,
                        const attribution_point& b);

}  // namespace tokentap::replay
