#include "replay/analyze.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <map>

#include "base/json.hpp"
#include "hooks/observe/timing_hook.hpp"

namespace tokentap::replay {

namespace {

struct quantiles {
  double p50 = -1, p95 = -1, p99 = -1;
  std::size_t n = 0;
};

// Nearest-rank quantiles of the values that are present (negative = not applicable).
quantiles quantiles_of(std::vector<double> v) {
  v.erase(std::remove_if(v.begin(), v.end(), [](double x) { return x < 0; }), v.end());
  const auto q = hooks::quantiles_of(v);
  return {q.p50, q.p95, q.p99, q.count};
}

struct summary {
  std::size_t requests = 0;
  std::map<std::string, std::size_t> outcomes, cache_events, step_kinds, statuses;
  std::vector<double> ttft, ttft_answer, e2e, itl_p50, overhead_p99;
  std::int64_t input = 0, output = 0, reasoning = 0, cached = 0, redundant = 0, steps = 0;
  std::vector<const record*> rows;
  void add(const record& r) {
    ++requests;
    ++outcomes[r.outcome];
    ++statuses[std::to_string(r.status)];
    ttft.push_back(r.ttft_ms);
    ttft_answer.push_back(r.ttft_answer_ms);
    e2e.push_back(r.e2e_ms);
    itl_p50.push_back(r.itl_p50);
    overhead_p99.push_back(r.overhead_p99);
    input += std::max<std::int64_t>(0, r.input_tokens);
    output += std::max<std::int64_t>(0, r.output_tokens);
    reasoning += std::max<std::int64_t>(0, r.reasoning_tokens);
    cached += std::max<std::int64_t>(0, r.cached_input_tokens);
    redundant += r.redundant_tokens;
    for (const auto& c : r.cache) ++cache_events[c.event];
    for (const auto& s : r.steps) ++step_kinds[s.kind];
    steps += static_cast<std::int64_t>(r.steps.size());
    rows.push_back(&r);
  }
};

std::string key_of(const record& r, group_by by) {
  switch (by) {
    case group_by::model:
      return r.model;
    case group_by::route:
      return r.route;
    case group_by::provider:
      return r.provider;
    case group_by::none:
      return "all";
  }
  return "all";
}

std::string fmt(double v, int decimals = 1) {
  if (v < 0) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

void json_q(std::string& out, const char* name, const quantiles& q) {
  out += "\"";
  out += name;
  out += "\":{\"p50\":";
  base::json::append_ms(out, q.p50);
  out += ",\"p95\":";
  base::json::append_ms(out, q.p95);
  out += ",\"p99\":";
  base::json::append_ms(out, q.p99);
  out += ",\"n\":" + std::to_string(q.n) + "}";
}

void json_map(std::string& out, const char* name, const std::map<std::string, std::size_t>& m) {
  out += "\"";
  out += name;
  out += "\":{";
  bool first = true;
  for (const auto& [k, v] : m) {
    if (!first) out += ",";
    first = false;
    base::json::append_string(out, k);
    out += ":" + std::to_string(v);
  }
  out += "}";
}

}  // namespace

std::string analyze(const std::vector<record>& records, const analyze_options& opts) {
  std::map<std::string, summary> groups;
  for (const auto& r : records) groups[key_of(r, opts.by)].add(r);
  std::string out;
  if (opts.json) out += "{\"groups\":[";
  bool first_group = true;
  for (auto& [key, s] : groups) {
    const auto ttft = quantiles_of(s.ttft), answer = quantiles_of(s.ttft_answer),
               e2e = quantiles_of(s.e2e), itl = quantiles_of(s.itl_p50),
               overhead = quantiles_of(s.overhead_p99);
    const double hit_ratio =
        s.input > 0 ? static_cast<double>(s.cached) / static_cast<double>(s.input) : -1;
    const double redundant_share =
        s.reasoning > 0 ? static_cast<double>(s.redundant) / static_cast<double>(s.reasoning) : -1;
    std::sort(s.rows.begin(), s.rows.end(),
              [](const record* a, const record* b) { return a->e2e_ms > b->e2e_ms; });
    if (opts.json) {
      if (!first_group) out += ",";
      first_group = false;
      out += "{\"group\":";
      base::json::append_string(out, key);
      out += ",\"requests\":" + std::to_string(s.requests) + ",";
      json_map(out, "outcomes", s.outcomes);
      out += ",";
      json_map(out, "statuses", s.statuses);
      out += ",";
      json_q(out, "ttft_ms", ttft);
      out += ",";
      json_q(out, "ttft_answer_ms", answer);
      out += ",";
      json_q(out, "e2e_ms", e2e);
      out += ",";
      json_q(out, "itl_median_ms", itl);
      out += ",";
      json_q(out, "overhead_p99_ms", overhead);
      out += ",\"tokens\":{\"input\":" + std::to_string(s.input) +
             ",\"output\":" + std::to_string(s.output) +
             ",\"reasoning\":" + std::to_string(s.reasoning) +
             ",\"cached_input\":" + std::to_string(s.cached) + "},\"cache_hit_ratio\":";
      base::json::append_ms(out, hit_ratio);
      out += ",";
      json_map(out, "cache_events", s.cache_events);
      out += ",\"steps_per_response\":";
      base::json::append_ms(
          out, s.requests ? static_cast<double>(s.steps) / static_cast<double>(s.requests) : -1);
      out += ",";
      json_map(out, "steps_by_kind", s.step_kinds);
      out += ",\"redundant_token_share\":";
      base::json::append_ms(out, redundant_share);
      out += ",\"slowest\":[";
      for (std::size_t i = 0; i < s.rows.size() && i < opts.slowest; ++i) {
        const auto* r = s.rows[i];
        if (i) out += ",";
        out += "{\"id\":";
        base::json::append_string(out, r->id);
        out += ",\"model\":";
        base::json::append_string(out, r->model);
        out += ",\"e2e_ms\":";
        base::json::append_ms(out, r->e2e_ms);
        out += ",\"ttft_ms\":";
        base::json::append_ms(out, r->ttft_ms);
        out += ",\"outcome\":";
        base::json::append_string(out, r->outcome);
        out += "}";
      }
      out += "]}";
      continue;
    }
    out += "== " + key + ": " + std::to_string(s.requests) + " requests\n";
    out += "  outcomes:";
    for (const auto& [k, v] : s.outcomes) out += " " + k + "=" + std::to_string(v);
    out += "\n                 p50      p95      p99   (ms)\n";
    auto line = [&](const char* name, const quantiles& q, int d = 1) {
      char buf[128];
      std::snprintf(buf, sizeof buf, "  %-13s %8s %8s %8s   (n=%zu)\n", name, fmt(q.p50, d).c_str(),
                    fmt(q.p95, d).c_str(), fmt(q.p99, d).c_str(), q.n);
      out += buf;
    };
    line("TTFT", ttft);
    line("answer TTFT", answer);
    line("end to end", e2e);
    line("ITL (median)", itl, 2);
    line("overhead p99", overhead, 3);
    out += "  tokens: input=" + std::to_string(s.input) + " output=" + std::to_string(s.output) +
           " reasoning=" + std::to_string(s.reasoning) +
           " cached_input=" + std::to_string(s.cached) + " (hit ratio " +
           (hit_ratio < 0 ? std::string("-") : fmt(100 * hit_ratio) + " %") + ")\n";
    out += "  cache events:";
    for (const auto& [k, v] : s.cache_events) out += " " + k + "=" + std::to_string(v);
    out +=
        "\n  steps: " +
        fmt(s.requests ? static_cast<double>(s.steps) / static_cast<double>(s.requests) : -1, 2) +
        " per response;";
    for (const auto& [k, v] : s.step_kinds) out += " " + k + "=" + std::to_string(v);
    out += "; redundant tokens " +
           (redundant_share < 0 ? std::string("-") : fmt(100 * redundant_share) + " %") + "\n";
    out += "  slowest:\n";
    for (std::size_t i = 0; i < s.rows.size() && i < opts.slowest; ++i) {
      const auto* r = s.rows[i];
      out += "    " + r->id + "  " + r->model + "  e2e " + fmt(r->e2e_ms) + " ms  TTFT " +
             fmt(r->ttft_ms) + " ms  " + r->outcome + "\n";
    }
  }
  if (opts.json) out += "]}\n";
  return out;
}

std::string describe(const record& r, const std::string& trace_path) {
  auto ms = [](double v) { return v < 0 ? std::string("-") : fmt(v) + " ms"; };
  auto count = [](std::int64_t n) { return n < 0 ? std::string("-") : std::to_string(n); };
  std::string out = "record " + r.id + "  " + r.start + "\n";
  out += "  route " + r.route + "  model " + (r.model.empty() ? "-" : r.model) + "  provider " +
         r.provider + "\n";
  out += "  " + r.method + " " + r.path + " -> " + std::to_string(r.status) + ", outcome " +
         r.outcome + (r.error_type.empty() ? "" : " (error " + r.error_type + ")") + "\n";
  out += "  timing: TTFT " + ms(r.ttft_ms) + ", answer TTFT " + ms(r.ttft_answer_ms) +
         ", end to end " + ms(r.e2e_ms) + ", upstream head " + ms(r.upstream_headers_ms) +
         "\n          ITL p50 / p95 / p99 " + fmt(r.itl_p50, 2) + " / " + fmt(r.itl_p95, 2) +
         " / " + fmt(r.itl_p99, 2) + " ms, stalls " + std::to_string(r.stalls) + ", " +
         (r.tokens_per_s < 0 ? std::string("-") : fmt(r.tokens_per_s)) + " tokens/s\n";
  out += "  tokens: input " + count(r.input_tokens) + " (cached " + count(r.cached_input_tokens) +
         "), output " + count(r.output_tokens) + " (reasoning " + count(r.reasoning_tokens) + ")\n";
  out += "  cache:";
  if (r.cache.empty()) out += " -";
  for (const auto& c : r.cache) out += " " + c.event;
  std::map<std::string, std::size_t> kinds;
  for (const auto& st : r.steps) ++kinds[st.kind + (st.redundant ? " (redundant)" : "")];
  out += "\n  steps: " + std::to_string(r.steps.size());
  for (const auto& [k, v] : kinds) out += " " + k + "=" + std::to_string(v);
  std::size_t bytes = 0;
  for (const auto& e : r.events) bytes += e.bytes.size();
  out += "\n  reads: " + std::to_string(r.events.size()) + " (" + std::to_string(bytes) +
         " bytes), the last at " +
         (r.events.empty() ? std::string("-")
                           : fmt(static_cast<double>(r.events.back().t_us) / 1000.0) + " ms") +
         "\n";
  out += "  replay it:\n    tokentap replay serve --trace " + trace_path + " --id " + r.id +
         " --match sequence\n    tokentap replay send --trace " + trace_path + " --id " + r.id +
         " --target http://HOST:PORT\n";
  return out;
}

percentiles3 percentiles_of(std::vector<double> values) {
  const auto q = quantiles_of(std::move(values));
  return {q.p50, q.p95, q.p99};
}

std::string side_by_side(const std::vector<comparison_row>& rows, const std::string& a_label,
                         const std::string& b_label) {
  auto cell = [](double v) { return fmt(v); };
  auto change = [](double a, double b) {
    if (!(a > 0 && b >= 0)) return std::string("-");
    char c[16];
    std::snprintf(c, sizeof c, "%+.1f%%", 100.0 * (b - a) / a);
    return std::string(c);
  };
  char line[200];
  std::snprintf(line, sizeof line, "%-16s %27s   %27s   %23s\n", "",
                (a_label + " p50 / p95 / p99").c_str(), (b_label + " p50 / p95 / p99").c_str(),
                "change p50 / p95 / p99");
  std::string out = line;
  for (const auto& r : rows) {
    std::snprintf(line, sizeof line, "%-16s %8s %8s %8s   %8s %8s %8s   %7s %7s %7s\n",
                  r.name.c_str(), cell(r.a.p50).c_str(), cell(r.a.p95).c_str(),
                  cell(r.a.p99).c_str(), cell(r.b.p50).c_str(), cell(r.b.p95).c_str(),
                  cell(r.b.p99).c_str(), change(r.a.p50, r.b.p50).c_str(),
                  change(r.a.p95, r.b.p95).c_str(), change(r.a.p99, r.b.p99).c_str());
    out += line;
  }
  return out;
}

double kl_divergence(const std::map<std::string, double>& p,
                     const std::map<std::string, double>& q) {
  std::map<std::string, std::pair<double, double>> keys;
  for (const auto& [k, v] : p) keys[k].first = v;
  for (const auto& [k, v] : q) keys[k].second = v;
  double sp = 0, sq = 0;
  for (auto& [k, v] : keys) {
    v.first += 1;  // add-one smoothing: no zero probabilities
    v.second += 1;
    sp += v.first;
    sq += v.second;
  }
  double kl = 0;
  for (const auto& [k, v] : keys) {
    const double pp = v.first / sp, qq = v.second / sq;
    kl += pp * std::log(pp / qq);
  }
  return kl;
}

namespace {

std::map<std::string, double> output_length_hist(const std::vector<record>& rs) {
  std::map<std::string, double> h;
  for (const auto& r : rs) {
    if (r.output_tokens < 0) continue;
    int b = 0;
    while ((std::int64_t{1} << b) <= r.output_tokens) ++b;  // log2 bucket
    char key[32];
    std::snprintf(key, sizeof key, "<%lld", static_cast<long long>(std::int64_t{1} << b));
    h[key] += 1;
  }
  return h;
}

std::map<std::string, double> step_kind_hist(const std::vector<record>& rs) {
  std::map<std::string, double> h;
  for (const auto& r : rs)
    for (const auto& s : r.steps) h[s.kind] += 1;
  return h;
}

}  // namespace

std::string compare(const std::vector<record>& a, const std::vector<record>& b, bool json) {
  summary sa, sb;
  for (const auto& r : a) sa.add(r);
  for (const auto& r : b) sb.add(r);
  const double kl_len = kl_divergence(output_length_hist(b), output_length_hist(a));
  const double kl_steps = kl_divergence(step_kind_hist(b), step_kind_hist(a));
  struct row {
    const char* name;
    quantiles qa, qb;
  };
  const row rows[] = {
      {"ttft_ms", quantiles_of(sa.ttft), quantiles_of(sb.ttft)},
      {"ttft_answer_ms", quantiles_of(sa.ttft_answer), quantiles_of(sb.ttft_answer)},
      {"itl_median_ms", quantiles_of(sa.itl_p50), quantiles_of(sb.itl_p50)},
      {"e2e_ms", quantiles_of(sa.e2e), quantiles_of(sb.e2e)}};
  std::string out;
  char buf[200];
  if (json) {
    out = "{\"a\":{\"requests\":" + std::to_string(sa.requests) +
          "},\"b\":{\"requests\":" + std::to_string(sb.requests) + "},\"metrics\":{";
    for (std::size_t i = 0; i < std::size(rows); ++i) {
      if (i) out += ",";
      out += "\"" + std::string(rows[i].name) + "\":{";
      json_q(out, "a", rows[i].qa);
      out += ",";
      json_q(out, "b", rows[i].qb);
      out += "}";
    }
    std::snprintf(buf, sizeof buf, "},\"kl_output_length\":%.4f,\"kl_step_kinds\":%.4f}\n", kl_len,
                  kl_steps);
    return out + buf;
  }
  std::vector<comparison_row> table;
  for (const auto& r : rows)
    table.push_back({r.name, {r.qa.p50, r.qa.p95, r.qa.p99}, {r.qb.p50, r.qb.p95, r.qb.p99}});
  out += side_by_side(table, "A", "B");
  std::snprintf(buf, sizeof buf,
                "requests: A=%zu B=%zu\nbehaviour drift (KL divergence, 0 = same): output length "
                "%.4f, step kinds %.4f\n",
                sa.requests, sb.requests, kl_len, kl_steps);
  return out + buf;
}

std::string export_rows(const std::vector<record>& records, const std::string& format) {
  std::string out;
  std::int64_t first = -1;
  for (const auto& r : records)
    if (r.start_us >= 0 && (first < 0 || r.start_us < first)) first = r.start_us;
  if (format == "csv")
    out = "id,start,offset_ms,model,input_tokens,output_tokens,ttft_ms,e2e_ms,itl_ms\n";
  for (std::size_t i = 0; i < records.size(); ++i) {
    const auto& r = records[i];
    const double offset_ms =
        r.start_us >= 0 && first >= 0 ? static_cast<double>(r.start_us - first) / 1000.0 : 0;
    if (format == "aiperf") {
      char buf[160];
      std::snprintf(buf, sizeof buf,
                    "{\"timestamp\":%lld,\"input_length\":%lld,\"output_length\":%lld}\n",
                    static_cast<long long>(offset_ms),
                    static_cast<long long>(std::max<std::int64_t>(0, r.input_tokens)),
                    static_cast<long long>(std::max<std::int64_t>(0, r.output_tokens)));
      out += buf;
      continue;
    }
    std::string itl;
    for (std::size_t k = 0; k < r.itl_values_ms.size(); ++k)
      itl += (k ? ";" : "") + fmt(r.itl_values_ms[k], 3);
    out += r.id + "," + r.start + "," + fmt(offset_ms, 3) + "," + r.model + "," +
           std::to_string(r.input_tokens) + "," + std::to_string(r.output_tokens) + "," +
           fmt(r.ttft_ms, 3) + "," + fmt(r.e2e_ms, 3) + "," + itl + "\n";
  }
  return out;
}

}  // namespace tokentap::replay
