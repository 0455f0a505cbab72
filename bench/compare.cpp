#include "bench/compare.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <optional>
#include <set>

#include "base/json.hpp"

namespace tokentap::bench {

std::string_view to_string(metric_change::verdict v) noexcept {
  switch (v) {
    case metric_change::verdict::better:
      return "better";
    case metric_change::verdict::worse:
      return "worse";
    case metric_change::verdict::same:
      break;
  }
  return "same";
}

bool comparison::regressed() const noexcept {
  return std::any_of(metrics.begin(), metrics.end(),
                     [](const metric_change& m) { return m.v == metric_change::verdict::worse; });
}

namespace {

std::vector<const request_result*> measured(std::span<const request_result> run) {
  std::vector<const request_result*> out;
  for (const auto& r : run)
    if (!r.warmup) out.push_back(&r);
  return out;
}

// A request's name in its run: its level and its id (each level sends the workload from its
// start).
using request_key = std::pair<std::size_t, std::string_view>;
request_key key_of(const request_result& r) {
  return {r.level, r.id};
}

// Every request once in each run, and the same ones in both.
bool same_workload(const std::vector<const request_result*>& a,
                   const std::vector<const request_result*>& b) {
  if (a.size() != b.size() || a.empty()) return false;
  std::set<request_key> keys;
  for (const auto* r : a)
    if (!keys.insert(key_of(*r)).second) return false;
  std::set<request_key> seen;
  for (const auto* r : b)
    if (!keys.contains(key_of(*r)) || !seen.insert(key_of(*r)).second) return false;
  return true;
}

using value_of = std::optional<double> (*)(const request_result&);

template <double request_result::*field>
std::optional<double> latency(const request_result& r) {
  if (!r.ok || r.*field < 0) return std::nullopt;
  return r.*field;
}

metric_change::verdict judge(const change& c, bool latency, double min_change) {
  if (std::isnan(c.ci95.lo) || std::isnan(c.ci95.hi)) return metric_change::verdict::same;
  if (latency) {
    if (c.ci95.lo > min_change) return metric_change::verdict::worse;
    if (c.ci95.hi < -min_change) return metric_change::verdict::better;
  } else {
    if (c.ci95.hi < 0) return metric_change::verdict::worse;
    if (c.ci95.lo > 0) return metric_change::verdict::better;
  }
  return metric_change::verdict::same;
}

}  // namespace

comparison compare_runs(std::span<const request_result> run_a,
                        std::span<const request_result> run_b, const compare_options& opts) {
  const auto a = measured(run_a), b = measured(run_b);
  comparison out;
  out.paired = same_workload(a, b);
  std::map<request_key, const request_result*> b_by_id;
  if (out.paired)
    for (const auto* r : b) b_by_id[key_of(*r)] = r;

  // One metric: the values `of` gives on each side (pairs where both have one, when paired).
  std::uint64_t seed = opts.seed;
  const auto add = [&](std::string name, bool is_latency, const statistic& stat, auto of) {
    std::vector<double> va, vb;
    if (out.paired) {
      for (const auto* ra : a) {
        const auto x = of(*ra), y = of(*b_by_id.at(key_of(*ra)));
        if (!x || !y) continue;
        va.push_back(*x);
        vb.push_back(*y);
      }
    } else {
      for (const auto* r : a)
        if (const auto x = of(*r)) va.push_back(*x);
      for (const auto* r : b)
        if (const auto y = of(*r)) vb.push_back(*y);
    }
    if (va.empty() && vb.empty()) return;
    metric_change m;
    m.name = std::move(name);
    m.latency = is_latency;
    m.n_a = va.size();
    m.n_b = vb.size();
    // Each metric its own stream of draws, the same from one report to the next.
    m.c = out.paired ? paired_change(va, vb, stat, seed++, opts.resamples)
                     : unpaired_change(va, vb, stat, seed++, opts.resamples);
    m.v = judge(m.c, is_latency, opts.min_change_pct);
    out.metrics.push_back(std::move(m));
  };

  const struct {
    const char* name;
    value_of of;
  } latencies[] = {{"ttft_ms", latency<&request_result::ttft_ms>},
                   {"ttfo_ms", latency<&request_result::ttfo_ms>},
                   {"tpot_ms", latency<&request_result::tpot_ms>},
                   {"e2e_ms", latency<&request_result::e2e_ms>}};
  for (const auto& l : latencies)
    for (const double q : {50.0, 99.0})
      add(std::string(l.name) + (q == 50 ? ".p50" : ".p99"), true, stat::percentile(q), l.of);

  // Accuracies: of every graded request, then per category.
  std::set<std::string> categories;
  for (const auto* r : a)
    if (r->correct) categories.insert(r->category);
  for (const auto* r : b)
    if (r->correct) categories.insert(r->category);
  const auto graded = [](const request_result& r) -> std::optional<double> {
    if (!r.correct) return std::nullopt;
    return *r.correct ? 1.0 : 0.0;
  };
  add("accuracy", false, stat::mean, graded);
  if (categories.size() > 1)
    for (const auto& cat : categories)
      add("accuracy." + cat, false, stat::mean,
          [&cat, graded](const request_result& r) -> std::optional<double> {
            return r.category == cat ? graded(r) : std::nullopt;
          });
  return out;
}

std::string comparison_json(const comparison& c) {
  std::string out;
  base::json::writer w(out);
  w.begin_object().field("paired", c.paired).key("metrics").begin_array();
  for (const auto& m : c.metrics) {
    w.begin_object().field("name", m.name);
    w.key("a").significant(m.c.a, 6);
    w.key("b").significant(m.c.b, 6);
    w.key("delta_pct").number(m.c.delta_pct, 2);  // null when not a number
    w.key("ci95").begin_array().number(m.c.ci95.lo, 2).number(m.c.ci95.hi, 2).end();
    w.field("verdict", to_string(m.v)).field("n_a", m.n_a).field("n_b", m.n_b).end();
  }
  w.end().end();
  return out;
}

std::string comparison_text(const comparison& c) {
  std::string out = c.paired ? "requests paired by id (the same workload)\n"
                             : "runs resampled independently (not the same workload)\n";
  char line[256];
  std::snprintf(line, sizeof line, "%-22s %12s %12s %9s  %-19s %s\n", "metric", "A", "B", "change",
                "95 % interval", "verdict");
  out += line;
  for (const auto& m : c.metrics) {
    char delta[32] = "-", ci[48] = "-";
    if (!std::isnan(m.c.delta_pct)) std::snprintf(delta, sizeof delta, "%+.1f %%", m.c.delta_pct);
    if (!std::isnan(m.c.ci95.lo))
      std::snprintf(ci, sizeof ci, "%+.1f … %+.1f %%", m.c.ci95.lo, m.c.ci95.hi);
    std::snprintf(line, sizeof line, "%-22s %12.4g %12.4g %9s  %-19s %s\n", m.name.c_str(), m.c.a,
                  m.c.b, delta, ci, std::string(to_string(m.v)).c_str());
    out += line;
  }
  out += c.regressed() ? "verdict: B is worse\n" : "verdict: no regression\n";
  return out;
}

}  // namespace tokentap::bench
