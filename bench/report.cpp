#include "bench/report.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <map>

#include <simdjson.h>

#include "bench/stats.hpp"
#include "bench/svg.hpp"

namespace tokentap::bench {

namespace {

// ---------------------------------------------------------------- the runs' figures

struct dist {
  std::uint64_t n = 0;
  double mean = -1, p50 = -1, p90 = -1, p95 = -1, p99 = -1;
};

struct category_accuracy {
  std::uint64_t n = 0, correct = 0;
  double accuracy = 0, lo = 0, hi = 0;
};

// A level of summary.json.
struct level_figures {
  std::string load_kind;  // concurrency | rate | schedule_speed
  double load = 0;
  std::uint64_t requests = 0, ok = 0, errors = 0;
  std::map<std::string, dist, std::less<>> metrics;
  std::map<std::string, dist, std::less<>> phases;  // the requests' attribution
  struct turn {
    std::uint32_t turn = 0;
    std::uint64_t requests = 0;
    double ttft_p50 = -1, cached_share = -1;
  };
  std::vector<turn> turns;  // conversations
  double requests_per_s = 0, output_tokens_per_s = 0;
  std::optional<double> goodput_fraction, goodput_per_s;
  double lag_p99 = 0;
  bool kept_up = true;
  std::map<std::string, category_accuracy> accuracy;
  std::map<std::string, std::uint64_t> cache_outcomes, cache_events;
  std::vector<double> itl_percentiles;  // 0, 1, …, 100

  const dist& metric(std::string_view name) const {
    static const dist none;
    const auto it = metrics.find(name);
    return it == metrics.end() ? none : it->second;
  }
  std::string label() const {
    char b[64];
    std::snprintf(b, sizeof b, "%s %g",
                  load_kind == "concurrency" ? "c"
                  : load_kind == "rate"      ? "rate"
                                             : "speed",
                  load);
    return b;
  }
};

struct run_figures {
  const report_run* src = nullptr;
  std::string target, workload, started, model, host;
  std::vector<level_figures> levels;
};

// A number where the document has one (a missing key or a null: `fallback`).
double number_or(simdjson::dom::element e, double fallback) {
  double v = 0;
  if (!e.get(v)) return v;
  std::int64_t i = 0;
  if (!e.get(i)) return static_cast<double>(i);
  std::uint64_t u = 0;
  if (!e.get(u)) return static_cast<double>(u);
  return fallback;
}
double number_or(simdjson::simdjson_result<simdjson::dom::element> r, double fallback) {
  simdjson::dom::element e;
  return r.get(e) ? fallback : number_or(e, fallback);
}

std::string string_or_empty(simdjson::simdjson_result<simdjson::dom::element> e) {
  std::string_view s;
  return e.get(s) ? std::string() : std::string(s);
}

std::optional<run_figures> read_run(const report_run& r, std::string& error) {
  run_figures out;
  out.src = &r;
  simdjson::dom::parser parser;
  simdjson::dom::object run;
  if (parser.parse(r.run_json).get(run)) {
    error = r.name + "/run.json: not a run (a JSON object)";
    return std::nullopt;
  }
  out.target = string_or_empty(run["target"]);
  out.workload = string_or_empty(run["workload"]);
  out.started = string_or_empty(run["started"]);
  out.model = string_or_empty(run["model"]);
  out.host = string_or_empty(run.at_pointer("/machine/host"));

  simdjson::dom::parser summary_parser;
  simdjson::dom::array levels;
  if (summary_parser.parse(r.summary_json)["levels"].get(levels)) {
    error = r.name + "/summary.json: no \"levels\" array (not written by bench run)";
    return std::nullopt;
  }
  for (const auto element : levels) {
    level_figures f;
    simdjson::dom::object l, load;
    if (element.get(l) || l["load"].get(load) || load.size() != 1) {
      error = r.name + "/summary.json: a level without its \"load\"";
      return std::nullopt;
    }
    for (auto [k, v] : load) {
      f.load_kind = std::string(k);
      f.load = number_or(v, 0);
    }
    f.requests = static_cast<std::uint64_t>(number_or(l["requests"], 0));
    f.ok = static_cast<std::uint64_t>(number_or(l["ok"], 0));
    f.errors = static_cast<std::uint64_t>(number_or(l["errors"], 0));
    for (auto [part, into] :
         {std::pair{"metrics", &f.metrics}, std::pair{"attribution", &f.phases}}) {
      simdjson::dom::object metrics;
      if (l[part].get(metrics)) continue;
      for (auto [name, m] : metrics) {
        if (!m.is_object()) continue;
        dist d;
        d.n = static_cast<std::uint64_t>(number_or(m["n"], 0));
        d.mean = number_or(m["mean"], -1);
        d.p50 = number_or(m["p50"], -1);
        d.p90 = number_or(m["p90"], -1);
        d.p95 = number_or(m["p95"], -1);
        d.p99 = number_or(m["p99"], -1);
        into->emplace(std::string(name), d);
      }
    }
    simdjson::dom::array turns;
    if (!l["turns"].get(turns))
      for (auto t : turns)
        f.turns.push_back({static_cast<std::uint32_t>(number_or(t["turn"], 0)),
                           static_cast<std::uint64_t>(number_or(t["requests"], 0)),
                           number_or(t.at_pointer("/ttft_ms/p50"), -1),
                           number_or(t["cached_share"], -1)});
    simdjson::dom::array itl;
    if (!l["itl_percentiles_ms"].get(itl))
      for (auto v : itl) f.itl_percentiles.push_back(number_or(v, 0));
    f.requests_per_s = number_or(l.at_pointer("/throughput/requests_per_s"), 0);
    f.output_tokens_per_s = number_or(l.at_pointer("/throughput/output_tokens_per_s"), 0);
    if (const double g = number_or(l.at_pointer("/goodput/fraction"), -1); g >= 0) {
      f.goodput_fraction = g;
      f.goodput_per_s = number_or(l.at_pointer("/goodput/requests_per_s"), 0);
    }
    f.lag_p99 = number_or(l.at_pointer("/schedule_lag_ms/p99"), 0);
    if (bool kept = true; !l["client_kept_up"].get(kept)) f.kept_up = kept;
    simdjson::dom::object accuracy;
    if (!l["accuracy"].get(accuracy)) {
      for (auto [category, a] : accuracy) {
        if (!a.is_object()) continue;
        category_accuracy c;
        c.n = static_cast<std::uint64_t>(number_or(a["n"], 0));
        c.correct = static_cast<std::uint64_t>(number_or(a["correct"], 0));
        c.accuracy = number_or(a["accuracy"], 0);
        c.lo = number_or(a.at_pointer("/ci95/0"), 0);
        c.hi = number_or(a.at_pointer("/ci95/1"), 0);
        f.accuracy.emplace(std::string(category), c);
      }
    }
    for (auto [part, into] : {std::pair{"/cache/outcomes", &f.cache_outcomes},
                              std::pair{"/cache/events", &f.cache_events}}) {
      simdjson::dom::object counts;
      if (l.at_pointer(part).get(counts)) continue;
      for (auto [name, n] : counts)
        (*into)[std::string(name)] = static_cast<std::uint64_t>(number_or(n, 0));
    }
    out.levels.push_back(std::move(f));
  }
  return out;
}

// ---------------------------------------------------------------- the page's look

// A run's colour, and a level's shade of it (a sweep's first level lightest).
constexpr const char* run_colours[] = {"#2563eb", "#ea580c"};
double level_opacity(std::size_t level, std::size_t levels) {
  return levels <= 1 ? 1.0
                     : 0.35 + 0.65 * static_cast<double>(level) / static_cast<double>(levels - 1);
}

using svg::bar;
using svg::bar_chart;
using svg::chart;
using svg::esc;
using svg::fmt;
using svg::legend;
using svg::line_chart;
using svg::polyline;
using svg::series;

// ---------------------------------------------------------------- the page's sections

// The samples of one metric of a run's level: its ok requests, warm-up left out.
std::vector<double> samples(const report_run& r, std::size_t level, double request_result::*m) {
  std::vector<double> out;
  for (const auto& q : r.requests)
    if (q.level == level && !q.warmup && q.ok && q.*m >= 0) out.push_back(q.*m);
  std::sort(out.begin(), out.end());
  return out;
}

std::string run_name(const run_figures& r, std::size_t i, std::size_t runs) {
  return runs > 1 ? std::string(1, static_cast<char>('A' + i)) + " " + r.src->name : r.src->name;
}

// A CDF chart, one staircase per run and level; `cdf` gives a level's points (x, share).
template <class Points>
std::string cdf_section(std::span<const run_figures> runs, const char* id, const char* title,
                        Points cdf) {
  std::vector<series> all;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const auto& r = runs[i];
    for (std::size_t l = 0; l < r.levels.size(); ++l) {
      series s{run_name(r, i, runs.size()) + " · " + r.levels[l].label(), run_colours[i % 2],
               level_opacity(l, r.levels.size()), cdf(r, l)};
      if (!s.points.empty()) all.push_back(std::move(s));
    }
  }
  double x_lo = 1e300, x_hi = -1e300;
  for (const auto& s : all)
    for (const auto& p : s.points) x_lo = std::min(x_lo, p.first), x_hi = std::max(x_hi, p.first);
  std::string out = "<figure><figcaption>" + std::string(title) + "</figcaption>";
  if (all.empty()) return out + "<p class=\"none\">no samples</p></figure>";
  const double pad = x_hi > x_lo ? (x_hi - x_lo) * 0.03 : std::max(1.0, x_lo * 0.05);
  const chart c(id, std::max(0.0, x_lo - pad), x_hi + pad, 0, 1);
  out += c.open("ms", "share");
  for (const auto& s : all) out += polyline(c, s, false);
  return out + "</svg>" + legend(all) + "</figure>";
}

// The empirical CDF of a per-request metric as a staircase: each request lifts it by 1/n.
auto per_request(double request_result::*m) {
  return [m](const run_figures& r, std::size_t level) {
    const auto xs = samples(*r.src, level, m);
    std::vector<std::pair<double, double>> points;
    if (xs.empty()) return points;
    const double n = static_cast<double>(xs.size());
    points.emplace_back(xs.front(), 0);
    for (std::size_t k = 0; k < xs.size(); ++k) {
      if (k > 0) points.emplace_back(xs[k], static_cast<double>(k) / n);
      points.emplace_back(xs[k], static_cast<double>(k + 1) / n);
    }
    return points;
  };
}

// The gaps' CDF from their percentiles (summary.json keeps them, not the gaps).
std::vector<std::pair<double, double>> itl_points(const run_figures& r, std::size_t level) {
  std::vector<std::pair<double, double>> points;
  const auto& q = r.levels[level].itl_percentiles;
  for (std::size_t k = 0; k < q.size(); ++k)
    points.emplace_back(q[k], static_cast<double>(k) / static_cast<double>(q.size() - 1));
  return points;
}

std::string levels_table(const run_figures& r, const std::string& name) {
  std::string out = "<h3>" + esc(name) + "</h3><table class=\"levels\" data-run=\"" + esc(name) +
                    "\"><tr><th>load</th><th>requests</th><th>ok</th><th>errors</th>"
                    "<th>TTFT P50 / P99</th><th>TTFO P50</th><th>ITL P50 / P99</th>"
                    "<th>TPOT P50</th><th>end to end P50 / P99</th><th>req/s</th>"
                    "<th>output tok/s</th><th>goodput</th><th>lag P99</th></tr>";
  for (const auto& l : r.levels) {
    const auto& ttft = l.metric("ttft_ms");
    const auto& ttfo = l.metric("ttfo_ms");
    const auto& itl = l.metric("itl_ms");
    const auto& tpot = l.metric("tpot_ms");
    const auto& e2e = l.metric("e2e_ms");
    out += "<tr><td>" + esc(l.label()) + "</td><td>" + std::to_string(l.requests) + "</td><td>" +
           std::to_string(l.ok) + "</td><td" + (l.errors > 0 ? " class=\"bad\"" : "") + ">" +
           std::to_string(l.errors) + "</td><td class=\"ttft\">" + fmt(ttft.p50) + " / " +
           fmt(ttft.p99) + "</td><td>" + fmt(ttfo.p50) + "</td><td>" + fmt(itl.p50, 2) + " / " +
           fmt(itl.p99, 2) + "</td><td>" + fmt(tpot.p50, 2) + "</td><td class=\"e2e\">" +
           fmt(e2e.p50) + " / " + fmt(e2e.p99) + "</td><td>" + fmt(l.requests_per_s, 2) +
           "</td><td>" + fmt(l.output_tokens_per_s, 1) + "</td><td>" +
           (l.goodput_fraction ? fmt(*l.goodput_fraction * 100, 1) + " %" : std::string("–")) +
           "</td><td" + (l.kept_up ? "" : " class=\"bad\" title=\"the client fell behind\"") + ">" +
           fmt(l.lag_p99, 3) + " ms</td></tr>";
  }
  return out + "</table>";
}

std::string against_load_section(std::span<const run_figures> runs) {
  bool sweep = false;
  for (const auto& r : runs) sweep = sweep || r.levels.size() > 1;
  if (!sweep) return {};
  std::string x_title = "load";
  if (!runs.empty() && !runs[0].levels.empty())
    x_title = runs[0].levels[0].load_kind == "concurrency" ? "concurrent requests"
              : runs[0].levels[0].load_kind == "rate"      ? "requests per second offered"
                                                           : "schedule speed-up";
  std::vector<series> latency, throughput;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const auto name = run_name(runs[i], i, runs.size());
    series p50{name + " · TTFT P50", run_colours[i % 2], 1, {}};
    series p99{name + " · TTFT P99", run_colours[i % 2], 0.45, {}};
    series e2e{name + " · end to end P50", run_colours[i % 2], 0.7, {}};
    series tokens{name + " · output tok/s", run_colours[i % 2], 1, {}};
    series good{name + " · goodput req/s × 100", run_colours[i % 2], 0.45, {}};
    for (const auto& l : runs[i].levels) {
      if (l.metric("ttft_ms").n > 0) {
        p50.points.emplace_back(l.load, l.metric("ttft_ms").p50);
        p99.points.emplace_back(l.load, l.metric("ttft_ms").p99);
      }
      if (l.metric("e2e_ms").n > 0) e2e.points.emplace_back(l.load, l.metric("e2e_ms").p50);
      tokens.points.emplace_back(l.load, l.output_tokens_per_s);
      if (l.goodput_per_s) good.points.emplace_back(l.load, *l.goodput_per_s * 100);
    }
    for (auto* s : {&p50, &p99, &e2e})
      if (!s->points.empty()) latency.push_back(std::move(*s));
    throughput.push_back(std::move(tokens));
    if (!good.points.empty()) throughput.push_back(std::move(good));
  }
  return "<h2>Against load</h2><div class=\"row\"><figure><figcaption>Latency (ms)</figcaption>" +
         line_chart("latency-vs-load", x_title, "ms", latency, true) +
         "</figure><figure><figcaption>Throughput</figcaption>" +
         line_chart("throughput-vs-load", x_title, "per second", throughput, true) +
         "</figure></div>";
}

std::string accuracy_section(std::span<const run_figures> runs) {
  std::vector<bar> bars;
  std::string table =
      "<table class=\"accuracy\"><tr><th>run</th><th>load</th><th>category</th><th>n</th>"
      "<th>correct</th><th>accuracy</th><th>95 % interval</th></tr>";
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const auto name = run_name(runs[i], i, runs.size());
    for (const auto& l : runs[i].levels)
      for (const auto& [category, a] : l.accuracy) {
        const auto label = name + " · " + l.label() + " · " + category;
        bars.push_back({label, run_colours[i % 2], a.accuracy * 100, a.lo * 100, a.hi * 100,
                        fmt(a.accuracy * 100, 1) + " % (" + fmt(a.lo * 100, 1) + "–" +
                            fmt(a.hi * 100, 1) + ")"});
        table += "<tr><td>" + esc(name) + "</td><td>" + esc(l.label()) + "</td><td>" +
                 esc(category) + "</td><td>" + std::to_string(a.n) + "</td><td>" +
                 std::to_string(a.correct) + "</td><td class=\"acc\">" + fmt(a.accuracy * 100, 1) +
                 " %</td><td>" + fmt(a.lo * 100, 1) + " – " + fmt(a.hi * 100, 1) + " %</td></tr>";
      }
  }
  if (bars.empty()) return {};
  return "<h2>Accuracy by category</h2><p>Graded tasks: the answer extracted after the reasoning, "
         "with its binomial 95 % interval (Wilson).</p>" +
         bar_chart("accuracy", bars, 100, " %") + table + "</table>";
}

std::string cache_section(std::span<const run_figures> runs) {
  std::vector<bar> ratios, causes;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const auto name = run_name(runs[i], i, runs.size());
    for (const auto& l : runs[i].levels) {
      std::uint64_t judged = 0, hits = 0;
      for (const auto& [outcome, n] : l.cache_outcomes) {
        judged += n;
        if (outcome == "hit") hits += n;  // (a partial hit is not one)
      }
      if (judged > 0) {
        const double ratio = 100.0 * static_cast<double>(hits) / static_cast<double>(judged);
        std::string note = fmt(ratio, 1) + " % (";
        bool first = true;
        for (const auto& [outcome, n] : l.cache_outcomes) {
          note += (first ? "" : ", ") + outcome + " " + std::to_string(n);
          first = false;
        }
        ratios.push_back({name + " · " + l.label(), run_colours[i % 2], ratio, -1, -1, note + ")"});
      }
      for (const auto& [event, n] : l.cache_events)
        causes.push_back({name + " · " + l.label() + " · " + event, run_colours[i % 2],
                          static_cast<double>(n), -1, -1, std::to_string(n)});
    }
  }
  if (ratios.empty() && causes.empty()) return {};
  std::string out = "<h2>Prompt cache</h2>";
  if (!ratios.empty())
    out +=
        "<figure><figcaption>Hit ratio (responses whose prompt the engine had cached)"
        "</figcaption>" +
        bar_chart("cache-hits", ratios, 100, " %") + "</figure>";
  if (!causes.empty()) {
    double most = 0;
    for (const auto& c : causes) most = std::max(most, c.value);
    out += "<figure><figcaption>Cache events (why a prompt missed)</figcaption>" +
           bar_chart("cache-events", causes, most, "") + "</figure>";
  }
  return out;
}

// Where the time went: each level's attribution phases (P50, ms), the engine's account beside.
std::string attribution_section(std::span<const run_figures> runs) {
  static constexpr std::array<std::pair<const char*, const char*>, 8> columns{{
      {"connect_ms", "connect"},
      {"upstream_head_ms", "request → head"},
      {"first_token_ms", "head → first token"},
      {"decode_ms", "decode"},
      {"engine_queue_ms", "engine queue"},
      {"engine_prefill_ms", "engine prefill"},
      {"engine_decode_ms", "engine decode"},
      {"unexplained_ms", "unexplained"},
  }};
  std::string rows;
  for (std::size_t i = 0; i < runs.size(); ++i)
    for (const auto& l : runs[i].levels) {
      if (l.phases.empty()) continue;
      rows +=
          "<tr><td>" + esc(run_name(runs[i], i, runs.size())) + " · " + esc(l.label()) + "</td>";
      for (const auto& [key, title] : columns) {
        const auto it = l.phases.find(key);
        rows += it == l.phases.end() || it->second.n == 0
                    ? std::string("<td class=\"none\">–</td>")
                    : "<td>" + fmt(it->second.p50, 2) + "</td>";
      }
      rows += "</tr>";
    }
  if (rows.empty()) return {};
  std::string out =
      "<h2>Where the time went</h2><p>Each request's end to end cut into phases by the tap "
      "(P50, ms): the connection's setup (outside end to end), request written → response head, "
      "head → first token, first token → end; with the engine's own account when the server "
      "reports one, and what it leaves unexplained of TTFT (network, the server's front end).</p>"
      "<table id=\"attribution\"><tr><th>run · level</th>";
  for (const auto& [key, title] : columns) out += "<th>" + std::string(title) + "</th>";
  return out + "</tr>" + rows + "</table>";
}

// Conversations: each turn's TTFT and the share of its input the server had cached.
std::string turns_section(std::span<const run_figures> runs) {
  std::string rows;
  for (std::size_t i = 0; i < runs.size(); ++i)
    for (const auto& l : runs[i].levels)
      for (const auto& t : l.turns)
        rows += "<tr><td>" + esc(run_name(runs[i], i, runs.size())) + " · " + esc(l.label()) +
                "</td><td>" + std::to_string(t.turn) + "</td><td>" + std::to_string(t.requests) +
                "</td><td>" + (t.ttft_p50 >= 0 ? fmt(t.ttft_p50, 2) : "–") + "</td><td>" +
                (t.cached_share >= 0 ? fmt(100 * t.cached_share, 1) + " %" : "–") + "</td></tr>";
  if (rows.empty()) return {};
  return "<h2>Conversations by turn</h2><p>Each turn resends the history: the share of its input "
         "the server reported cached, and its TTFT.</p><table id=\"turns\"><tr><th>run · "
         "level</th><th>turn</th><th>requests</th><th>TTFT P50 (ms)</th><th>cached</th></tr>" +
         rows + "</table>";
}

constexpr const char* style = R"(<style>
body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#111;max-width:1240px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #ddd}
h3{font-size:14px;margin:12px 0 4px}table{border-collapse:collapse;margin:4px 0 12px}
td,th{border:1px solid #ddd;padding:3px 7px;text-align:right;white-space:nowrap}
th{background:#f4f4f5;font-weight:600}td:first-child,th:first-child{text-align:left}
.bad{color:#b91c1c;font-weight:600}.none{color:#777}
.row{display:flex;flex-wrap:wrap;gap:16px}figure{margin:0}figcaption{font-weight:600;margin:6px 0}
svg.chart{background:#fff}svg text{font-size:11px;fill:#333}svg .title{font-size:12px}
.grid{stroke:#eee}.axis{stroke:#888}.whisker{stroke:#111;stroke-width:1.5}
.legend{display:flex;flex-wrap:wrap;gap:4px 14px;font-size:12px;max-width:560px}
.legend i{display:inline-block;width:14px;height:3px;margin:0 5px 3px 0;vertical-align:middle}
.runs td{text-align:left}
</style>)";

}  // namespace

std::optional<std::string> report_html(std::span<const report_run> runs, std::string& error) {
  std::vector<run_figures> figures;
  for (const auto& r : runs) {
    auto f = read_run(r, error);
    if (!f) return std::nullopt;
    figures.push_back(std::move(*f));
  }
  std::string title = "tokentap bench report: ";
  for (std::size_t i = 0; i < figures.size(); ++i)
    title += (i > 0 ? " against " : "") + figures[i].src->name;
  std::string out = "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>" +
                    esc(title) + "</title>" + style + "</head><body><h1>" + esc(title) + "</h1>";
  out +=
      "<table class=\"runs\"><tr><th>run</th><th>target</th><th>workload</th><th>model</th>"
      "<th>started</th><th>host</th></tr>";
  for (std::size_t i = 0; i < figures.size(); ++i) {
    const auto& f = figures[i];
    out += "<tr><td><i style=\"color:" + std::string(run_colours[i % 2]) + "\">■</i> " +
           esc(run_name(f, i, figures.size())) + "</td><td>" + esc(f.target) + "</td><td>" +
           esc(f.workload) + "</td><td>" + esc(f.model) + "</td><td>" + esc(f.started) +
           "</td><td>" + esc(f.host) + "</td></tr>";
  }
  out += "</table><h2>Levels</h2>";
  for (std::size_t i = 0; i < figures.size(); ++i)
    out += levels_table(figures[i], run_name(figures[i], i, figures.size()));
  out +=
      "<p>TTFT: request sent to its first token; TTFO: to the first answer token after the "
      "reasoning; ITL: gaps between tokens; TPOT: (last token − first token) / (output tokens − "
      "1); "
      "milliseconds, measured by the tap (docs/bench.md).</p>";
  out += "<h2>Distributions</h2><div class=\"row\">";
  out += cdf_section(figures, "cdf-ttft", "TTFT (ms): share of requests at or under",
                     per_request(&request_result::ttft_ms));
  out += cdf_section(figures, "cdf-itl", "ITL (ms): share of gaps between tokens at or under",
                     itl_points);
  out += cdf_section(figures, "cdf-e2e", "End to end (ms): share of requests at or under",
                     per_request(&request_result::e2e_ms));
  out += "</div>";
  out += against_load_section(figures);
  out += accuracy_section(figures);
  out += cache_section(figures);
  out += turns_section(figures);
  out += attribution_section(figures);
  return out + "</body></html>\n";
}

}  // namespace tokentap::bench
