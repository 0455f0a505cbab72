#include "replay/attribute.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>

#include "base/json.hpp"

namespace tokentap::replay {

namespace {

constexpr std::size_t n_phases = attribution_phase_names.size();
using phase_values = std::array<double, n_phases>;
enum slot : std::size_t {
  proxy,
  fault,
  failed_attempts,
  connect,
  upstream_head,
  first_token,
  engine_queue,
  engine_load,
  engine_prefill,
  engine_decode,
  engine_inference,
  unexplained,
  decode
};
static_assert(recorded_phases == 7);  // proxy, connect, failed_attempts, fault, upstream_head,
                                      // first_token, decode (hooks::phase's order)

constexpr const char* quantile_names[3] = {"p50", "p95", "p99"};
constexpr double quantiles[3] = {0.50, 0.95, 0.99};

// A request's phases for its TTFT (`ttft`) or its end to end; nullopt when the record cannot say
// (no attribution, or no streamed first token for TTFT).
std::optional<phase_values> phases_of(const record& r, bool ttft) {
  const auto& a = r.attribution;
  if (!a.present) return std::nullopt;
  const auto at = [&](std::size_t hook_phase) { return a.phases[hook_phase]; };
  // hooks::phase order: proxy, connect, failed_attempts, fault, upstream_head, first_token, decode
  const auto streamed = at(6).has_value();
  if (ttft && !streamed) return std::nullopt;
  phase_values v{};
  v[proxy] = at(0).value_or(0);
  v[connect] = at(1).value_or(0);
  v[failed_attempts] = at(2).value_or(0);
  v[fault] = at(3).value_or(0);
  v[upstream_head] = at(4).value_or(0);
  v[first_token] = at(5).value_or(0);
  if (!ttft) v[decode] = at(6).value_or(0);
  // The engine's account, as the proxy set it against its own wait (hooks::attribute).
  if (!a.engine_source.empty() && a.unexplained_ms && at(4) && at(5)) {
    v[engine_queue] = std::max(0.0, a.engine_queue_ms.value_or(0));
    v[engine_load] = std::max(0.0, a.engine_load_ms.value_or(0));
    if (a.engine_prefill_ms && (streamed || a.engine_decode_ms)) {
      v[engine_prefill] = *a.engine_prefill_ms;
      if (!streamed) v[engine_decode] = *a.engine_decode_ms;
    } else {
      v[engine_inference] = a.engine_inference_ms.value_or(0);
    }
    v[unexplained] = *a.unexplained_ms;
    v[upstream_head] = v[first_token] = 0;
  }
  return v;
}

double total_of(const phase_values& v) {
  double t = 0;
  for (double x : v) t += x;
  return t;
}

// In words: why a turn lost its cached prefix, from its cache events; "" when none says.
std::string cause_of(const record& r) {
  for (const auto& c : r.cache) {
    if (c.event == "prefix_divergence") {
      if (c.role == "system") return "system prompt changed";
      if (c.role == "tools") return "tool definitions changed";
      return "conversation edited";
    }
    if (c.event == "truncation") return "conversation truncated";
    if (c.event == "expired") return "cached prefix expired";
    if (c.event == "unexpected_miss") return "unexpected miss";
  }
  return "";
}

std::string num(double v, int digits = 1) {
  char b[48];
  std::snprintf(b, sizeof b, "%.*f", digits, v);
  return b;
}

std::string signed_num(double v, int digits = 0) {
  char b[48];
  std::snprintf(b, sizeof b, "%+.*f", digits, v);
  return b;
}

// A point's phases with their shares of the total, largest first (zero ones left out).
std::vector<std::pair<std::size_t, double>> ranked(const attribution_point& p) {
  std::vector<std::pair<std::size_t, double>> out;
  for (std::size_t i = 0; i < n_phases; ++i)
    if (std::abs(p.phase_ms[i]) >= 0.0005) out.emplace_back(i, p.phase_ms[i]);
  std::stable_sort(out.begin(), out.end(),
                   [](const auto& x, const auto& y) { return x.second > y.second; });
  return out;
}

double share(double part, double whole) {
  return whole != 0 ? part / whole : 0;
}

void cache_json(std::string& out, const cache_summary& c) {
  out += "{\"records\":" + std::to_string(c.records) +
         ",\"lost_prefix\":" + std::to_string(c.lost_prefix) + ",\"events\":{";
  bool first = true;
  for (const auto& [k, n] : c.events) {
    if (!first) out += ',';
    first = false;
    base::json::append_string(out, k);
    out += ":" + std::to_string(n);
  }
  out += "},\"causes\":{";
  first = true;
  for (const auto& [k, n] : c.causes) {
    if (!first) out += ',';
    first = false;
    base::json::append_string(out, k);
    out += ":" + std::to_string(n);
  }
  out += "}}";
}

std::string causes_text(const cache_summary& c) {
  std::vector<std::pair<std::string, std::size_t>> v(c.causes.begin(), c.causes.end());
  std::stable_sort(v.begin(), v.end(),
                   [](const auto& x, const auto& y) { return x.second > y.second; });
  std::string out;
  for (const auto& [k, n] : v) out += (out.empty() ? "" : ", ") + k + " " + std::to_string(n);
  return out;
}

std::string lost_share(const cache_summary& c) {
  return c.records
             ? num(100.0 * static_cast<double>(c.lost_prefix) / static_cast<double>(c.records), 0) +
                   " %"
             : std::string("-");
}

// A fault as a person names it: "slow-net delay 200 ms", "cut cut 20 events".
std::string fault_name(const recorded_fault& f) {
  std::string out = f.rule + " " + f.kind + " " + std::to_string(f.value);
  if (f.kind == "delay" || f.kind == "event_delay")
    out += " ms";
  else if (f.kind == "cut")
    out += " events";
  return out;
}

std::string faults_text(const std::map<std::string, std::size_t>& faults) {
  if (faults.empty()) return "none";
  std::string out;
  for (const auto& [name, n] : faults)
    out += (out.empty() ? "" : ", ") + name + " x" + std::to_string(n);
  return out;
}

void faults_json(std::string& out, const std::map<std::string, std::size_t>& faults) {
  out += '{';
  bool first = true;
  for (const auto& [name, n] : faults) {
    if (!first) out += ',';
    first = false;
    base::json::append_string(out, name);
    out += ':' + std::to_string(n);
  }
  out += '}';
}

}  // namespace

attribution_summary summarize_attribution(const std::vector<record>& records) {
  attribution_summary s;
  s.records = records.size();
  for (int kind = 0; kind < 2; ++kind) {
    std::vector<std::pair<double, phase_values>> rows;
    for (const auto& r : records)
      if (auto v = phases_of(r, kind == 0)) rows.emplace_back(total_of(*v), *v);
    if (kind == 1) s.attributed = rows.size();
    std::sort(rows.begin(), rows.end(),
              [](const auto& x, const auto& y) { return x.first < y.first; });
    const auto n = rows.size();
    for (int q = 0; q < 3; ++q) {
      auto& p = s.at[static_cast<std::size_t>(kind)][static_cast<std::size_t>(q)];
      if (n == 0) continue;
      // Nearest rank, and the requests within a few ranks of it (2 %, at least 2 each side).
      const auto k = std::min(
          n - 1, static_cast<std::size_t>(std::ceil(quantiles[q] * static_cast<double>(n))) - 1);
      const std::size_t w = std::max<std::size_t>(2, n / 50);
      const std::size_t lo = k > w ? k - w : 0, hi = std::min(n - 1, k + w);
      p.total_ms = rows[k].first;
      p.around = hi - lo + 1;
      for (std::size_t i = lo; i <= hi; ++i) {
        p.around_ms += rows[i].first;
        for (std::size_t j = 0; j < n_phases; ++j) p.phase_ms[j] += rows[i].second[j];
      }
      p.around_ms /= static_cast<double>(p.around);
      for (auto& x : p.phase_ms) x /= static_cast<double>(p.around);
    }
  }
  for (const auto& r : records)
    if (r.fault) ++s.faults[fault_name(*r.fault)];
  for (const auto& r : records) {
    if (r.cache.empty()) continue;
    ++s.cache.records;
    for (const auto& c : r.cache) ++s.cache.events[c.event];
    if (auto cause = cause_of(r); !cause.empty()) {
      ++s.cache.lost_prefix;
      ++s.cache.causes[cause];
    }
  }
  return s;
}

std::string attribute_report(const attribution_summary& s, bool json) {
  static constexpr const char* totals[2] = {"ttft", "e2e"};
  if (json) {
    std::string out = "{\"records\":" + std::to_string(s.records) +
                      ",\"attributed\":" + std::to_string(s.attributed);
    for (int kind = 0; kind < 2; ++kind) {
      out += ",\"" + std::string(totals[kind]) + "\":{";
      for (int q = 0; q < 3; ++q) {
        const auto& p = s.at[static_cast<std::size_t>(kind)][static_cast<std::size_t>(q)];
        if (q) out += ',';
        out += "\"" + std::string(quantile_names[q]) + "\":{\"total_ms\":";
        base::json::append_ms(out, p.total_ms);
        out += ",\"around\":" + std::to_string(p.around) + ",\"phases\":[";
        bool first = true;
        for (const auto& [i, ms] : ranked(p)) {
          if (!first) out += ',';
          first = false;
          out += "{\"phase\":\"" + std::string(attribution_phase_names[i]) +
                 "\",\"ms\":" + num(ms, 3) + ",\"share\":" + num(share(ms, p.around_ms), 4) + "}";
        }
        out += "]}";
      }
      out += "}";
    }
    out += ",\"cache\":";
    cache_json(out, s.cache);
    out += ",\"faults\":";
    faults_json(out, s.faults);
    return out + "}\n";
  }
  std::string out = "attribution: " + std::to_string(s.attributed) + " of " +
                    std::to_string(s.records) + " records say where their time went\n";
  for (int kind = 0; kind < 2; ++kind) {
    for (int q = 0; q < 3; ++q) {
      const auto& p = s.at[static_cast<std::size_t>(kind)][static_cast<std::size_t>(q)];
      out += q == 0 ? (kind == 0 ? "TTFT " : "e2e  ") : "     ";
      out += std::string(quantile_names[q]) + " ";
      if (p.total_ms < 0) {
        out += "-\n";
        continue;
      }
      out += num(p.total_ms) + " ms:";
      // (Phases under 0.05 ms and 0.5 % are left out of the text; the JSON has them all.)
      bool first = true;
      for (const auto& [i, ms] : ranked(p)) {
        if (std::abs(ms) < 0.05 && std::abs(share(ms, p.around_ms)) < 0.005) continue;
        out += std::string(first ? " " : ", ") + attribution_phase_names[i] + " " + num(ms) + " (" +
               num(100 * share(ms, p.around_ms), 0) + " %)";
        first = false;
      }
      out += "\n";
    }
  }
  if (s.cache.records) {
    out += "cache: " + lost_share(s.cache) + " of " + std::to_string(s.cache.records) +
           " turns lost their prefix";
    if (!s.cache.causes.empty()) out += ": " + causes_text(s.cache);
    out += "\n";
  }
  if (!s.faults.empty()) out += "faults injected: " + faults_text(s.faults) + "\n";
  return out;
}

std::string growth_line(const char* total, const char* quantile, const attribution_point& a,
                        const attribution_point& b) {
  std::string out = std::string(total) + " " + quantile + " ";
  if (a.total_ms <= 0 || b.total_ms < 0) return out + "-";
  out += signed_num(100.0 * (b.total_ms - a.total_ms) / a.total_ms) + " %";
  const double whole = b.around_ms - a.around_ms;
  std::vector<std::pair<std::size_t, double>> d;
  for (std::size_t i = 0; i < n_phases; ++i) d.emplace_back(i, b.phase_ms[i] - a.phase_ms[i]);
  // The phases that moved the way the total did, most first.
  const double sign = whole >= 0 ? 1 : -1;
  std::stable_sort(d.begin(), d.end(),
                   [&](const auto& x, const auto& y) { return sign * x.second > sign * y.second; });
  std::string parts;
  for (const auto& [i, delta] : d) {
    if (sign * delta <= 0 || std::abs(share(delta, whole)) < 0.05) continue;
    parts += (parts.empty() ? ": " : ", ") + std::string(attribution_phase_names[i]) + " " +
             signed_num(delta, std::abs(delta) < 10 ? 1 : 0) + " ms (" +
             num(100 * share(delta, whole), 0) + " %)";
  }
  return out + parts;
}

std::string attribute_compare(const attribution_summary& a, const attribution_summary& b,
                              bool json) {
  static constexpr const char* totals[2] = {"ttft", "e2e"};
  static constexpr const char* labels[2] = {"TTFT", "e2e"};
  std::vector<std::string> lines;
  for (int kind = 0; kind < 2; ++kind)
    for (int q = 0; q < 3; ++q) {
      std::string upper = quantile_names[q];
      upper[0] = 'P';
      lines.push_back(
          growth_line(labels[kind], upper.c_str(),
                      a.at[static_cast<std::size_t>(kind)][static_cast<std::size_t>(q)],
                      b.at[static_cast<std::size_t>(kind)][static_cast<std::size_t>(q)]));
    }
  std::string cache_line;
  if (a.cache.records || b.cache.records) {
    cache_line = "cache: " + lost_share(b.cache) +
                 " of turns lost their prefix (A: " + lost_share(a.cache) + ")";
    if (!b.cache.causes.empty()) cache_line += ": " + causes_text(b.cache);
  }
  // The ground truth of an experiment, when it injected faults: what A and B had.
  std::string fault_line;
  if (!a.faults.empty() || !b.faults.empty())
    fault_line =
        "faults injected: B " + faults_text(b.faults) + " (A: " + faults_text(a.faults) + ")";
  if (!json) {
    std::string out = "B against A (" + std::to_string(a.attributed) + " and " +
                      std::to_string(b.attributed) + " attributed records)\n";
    for (const auto& l : lines) out += l + "\n";
    if (!cache_line.empty()) out += cache_line + "\n";
    if (!fault_line.empty()) out += fault_line + "\n";
    return out;
  }
  std::string out = "{";
  for (int kind = 0; kind < 2; ++kind) {
    out += std::string(kind ? "," : "") + "\"" + totals[kind] + "\":{";
    for (int q = 0; q < 3; ++q) {
      const auto& pa = a.at[static_cast<std::size_t>(kind)][static_cast<std::size_t>(q)];
      const auto& pb = b.at[static_cast<std::size_t>(kind)][static_cast<std::size_t>(q)];
      const double whole = pb.around_ms - pa.around_ms;
      std::vector<std::size_t> order;
      for (std::size_t i = 0; i < n_phases; ++i)
        if (std::abs(pa.phase_ms[i]) >= 0.0005 || std::abs(pb.phase_ms[i]) >= 0.0005)
          order.push_back(i);
      std::stable_sort(order.begin(), order.end(), [&](std::size_t x, std::size_t y) {
        return pb.phase_ms[x] - pa.phase_ms[x] > pb.phase_ms[y] - pa.phase_ms[y];
      });
      out += std::string(q ? "," : "") + "\"" + quantile_names[q] + "\":[";
      for (std::size_t j = 0; j < order.size(); ++j) {
        const auto i = order[j];
        const double delta = pb.phase_ms[i] - pa.phase_ms[i];
        out += std::string(j ? "," : "") + "{\"phase\":\"" + attribution_phase_names[i] +
               "\",\"a_ms\":" + num(pa.phase_ms[i], 3) + ",\"b_ms\":" + num(pb.phase_ms[i], 3) +
               ",\"delta_ms\":" + num(delta, 3) + ",\"share\":" + num(share(delta, whole), 4) + "}";
      }
      out += "]";
    }
    out += "}";
  }
  out += ",\"totals\":{";
  for (int kind = 0; kind < 2; ++kind)
    for (int q = 0; q < 3; ++q) {
      const auto& pa = a.at[static_cast<std::size_t>(kind)][static_cast<std::size_t>(q)];
      const auto& pb = b.at[static_cast<std::size_t>(kind)][static_cast<std::size_t>(q)];
      out += std::string(kind || q ? "," : "") + "\"" + totals[kind] + "_" + quantile_names[q] +
             "\":{\"a_ms\":";
      base::json::append_ms(out, pa.total_ms);
      out += ",\"b_ms\":";
      base::json::append_ms(out, pb.total_ms);
      out += "}";
    }
  out += "},\"lines\":[";
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (i) out += ',';
    base::json::append_string(out, lines[i]);
  }
  if (!cache_line.empty()) {
    out += ',';
    base::json::append_string(out, cache_line);
  }
  if (!fault_line.empty()) {
    out += ',';
    base::json::append_string(out, fault_line);
  }
  out += "],\"cache\":{\"a\":";
  cache_json(out, a.cache);
  out += ",\"b\":";
  cache_json(out, b.cache);
  out += "},\"faults\":{\"a\":";
  faults_json(out, a.faults);
  out += ",\"b\":";
  faults_json(out, b.faults);
  return out + "}}\n";
}

}  // namespace tokentap::replay
