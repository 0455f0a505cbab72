// The report page of one run or two: each level's figures as summary.json has them, one CDF
// line per run and level with every request (TTFT, end to end) or the gaps' percentiles (ITL),
// the against-load charts only for a sweep, accuracy with its interval, the cache's hit ratio
// and events — self-contained (no script, nothing fetched) and escaped.
#include "bench/report.hpp"

#include <gtest/gtest.h>

#include <cstdio>
#include <regex>
#include <string>
#include <vector>

namespace tokentap::bench {
namespace {

request_result answered(std::string id, std::size_t lvl, double ttft, double e2e) {
  request_result r;
  r.id = std::move(id);
  r.level = lvl;
  r.status = 200;
  r.ok = true;
  r.ttft_ms = r.ttfo_ms = ttft;
  r.e2e_ms = e2e;
  r.output_tokens = 11;
  r.tpot_ms = r.mean_itl_ms = (e2e - ttft) / 10;
  r.itl_ms.assign(10, r.tpot_ms);
  r.itl_per_token = true;
  return r;
}

// A run as `bench run` writes it: its requests, the summary of its levels, its run.json.
struct fake_run {
  std::vector<request_result> requests;
  std::vector<double> loads;
  bool goodput_ttft = true;  // --goodput ttft_ms:150 (else no goodput: null in the summary)
  report_run files(const std::string& name) const {
    std::vector<level> levels;
    for (std::size_t l = 0; l < loads.size(); ++l) {
      level v;
      v.value = loads[l];
      v.duration_s = 10;
      levels.push_back(v);
    }
    // Each level's requests, in order (a run writes them so).
    std::vector<std::vector<request_result>> by_level(loads.size());
    for (const auto& r : requests) by_level[r.level].push_back(r);
    for (std::size_t l = 0; l < loads.size(); ++l) levels[l].requests = by_level[l];
    slo goodput;
    if (goodput_ttft) goodput.ttft_ms = 150;
    report_run out;
    out.name = name;
    out.run_json =
        R"({"tokentap":"0.1.0","started":"2026-12-07T20:00:00Z","target":"http://127.0.0.1:9",)"
        R"("workload":"tasks.jsonl","model":"m","machine":{"host":"h","cores":2}})";
    out.summary_json = summary_json(levels, goodput);
    out.requests = requests;
    // The per-gap lists are not in requests.jsonl: the report must not need them.
    for (auto& r : out.requests) r.itl_ms.clear(), r.chunk_gap_ms.clear();
    return out;
  }
};

// The polylines of the chart with `id`: (data-series, data-n).
std::vector<std::pair<std::string, int>> lines_of(const std::string& html, const std::string& id) {
  const auto at = html.find("<svg id=\"" + id + "\"");
  if (at == std::string::npos) return {};
  const auto end = html.find("</svg>", at);
  const std::string svg = html.substr(at, end - at);
  std::vector<std::pair<std::string, int>> out;
  const std::regex line(R"re(data-series="([^"]*)" data-n="(\d+)")re");
  for (std::sregex_iterator it(svg.begin(), svg.end(), line), e; it != e; ++it)
    out.emplace_back((*it)[1].str(), std::stoi((*it)[2].str()));
  return out;
}

fake_run sweep(double ttft_base) {
  fake_run f;
  f.loads = {1, 4};
  for (int i = 0; i < 5; ++i)
    f.requests.push_back(answered("r" + std::to_string(i), 0, ttft_base + i, 500));
  for (int i = 0; i < 7; ++i)
    f.requests.push_back(answered("s" + std::to_string(i), 1, 2 * ttft_base + i, 900));
  return f;
}

TEST(Report, TwoSweepsSideBySide) {
  const auto a = sweep(100), b = sweep(120);
  const std::vector<report_run> runs = {a.files("base"), b.files("new")};
  std::string err;
  const auto html = report_html(runs, err);
  ASSERT_TRUE(html) << err;

  // Every level's row, with its TTFT P50 / P99 as summary.json has them (numpy's percentiles).
  for (const char* run : {"A base", "B new"}) {
    const auto t = html->find("data-run=\"" + std::string(run) + "\"");
    ASSERT_NE(t, std::string::npos) << run;
    EXPECT_NE(html->find("<td>c 1</td>", t), std::string::npos);
    EXPECT_NE(html->find("<td>c 4</td>", t), std::string::npos);
  }
  EXPECT_NE(html->find("<td class=\"ttft\">102.0 / 104.0</td>"), std::string::npos);  // A, c 1
  EXPECT_NE(html->find("<td class=\"ttft\">243.0 / 245.9</td>"), std::string::npos);  // B, c 4

  // TTFT and end to end: a staircase per run and level over its requests (2 points a request).
  const auto ttft = lines_of(*html, "cdf-ttft");
  ASSERT_EQ(ttft.size(), 4u);
  EXPECT_EQ(ttft[0], (std::pair<std::string, int>{"A base · c 1", 10}));
  EXPECT_EQ(ttft[1], (std::pair<std::string, int>{"A base · c 4", 14}));
  EXPECT_EQ(ttft[3], (std::pair<std::string, int>{"B new · c 4", 14}));
  EXPECT_EQ(lines_of(*html, "cdf-e2e").size(), 4u);
  // ITL: from the gaps' 101 percentiles in summary.json (requests.jsonl has no gaps).
  const auto itl = lines_of(*html, "cdf-itl");
  ASSERT_EQ(itl.size(), 4u);
  for (const auto& [name, n] : itl) EXPECT_EQ(n, 101) << name;

  // A sweep: latency and throughput against load, a point per level.
  const auto latency = lines_of(*html, "latency-vs-load");
  ASSERT_FALSE(latency.empty());
  for (const auto& [name, n] : latency) EXPECT_EQ(n, 2) << name;
  EXPECT_FALSE(lines_of(*html, "throughput-vs-load").empty());
  // Goodput (TTFT within 150 ms): all of A's first level, none of its second.
  EXPECT_NE(html->find("<td>100.0 %</td>"), std::string::npos);
  EXPECT_NE(html->find("<td>0.0 %</td>"), std::string::npos);

  // Self-contained: nothing to run, nothing fetched.
  EXPECT_EQ(html->find("<script"), std::string::npos);
  EXPECT_EQ(html->find("src="), std::string::npos);
  EXPECT_EQ(html->find("href="), std::string::npos);
}

TEST(Report, ALevelAloneHasNoAgainstLoadCharts) {
  fake_run f;
  f.loads = {2};
  f.goodput_ttft = false;
  for (int i = 0; i < 3; ++i) f.requests.push_back(answered(std::to_string(i), 0, 50, 200));
  const std::vector<report_run> runs = {f.files("one")};
  std::string err;
  const auto html = report_html(runs, err);
  ASSERT_TRUE(html) << err;
  EXPECT_EQ(html->find("latency-vs-load"), std::string::npos);
  EXPECT_EQ(lines_of(*html, "cdf-ttft").size(), 1u);
  EXPECT_EQ(lines_of(*html, "cdf-ttft")[0].first, "one · c 2");             // one run: no letter
  EXPECT_NE(html->find("<td>–</td><td>0.000 ms</td>"), std::string::npos);  // no goodput asked
  // Nothing graded, no cache judged: those sections are left out.
  EXPECT_EQ(html->find("Accuracy by category"), std::string::npos);
  EXPECT_EQ(html->find("Prompt cache"), std::string::npos);
}

TEST(Report, AccuracyWithItsIntervalAndTheCachesOutcomes) {
  fake_run f;
  f.loads = {1};
  for (int i = 0; i < 10; ++i) {
    auto r = answered(std::to_string(i), 0, 50, 200);
    r.category = "math";
    r.correct = i < 7;
    r.cache_outcome = i < 6 ? "hit" : "miss";
    if (i >= 6) r.cache_events = {"system_prompt_changed"};
    f.requests.push_back(r);
  }
  const std::vector<report_run> runs = {f.files("graded")};
  std::string err;
  const auto html = report_html(runs, err);
  ASSERT_TRUE(html) << err;
  // 7 of 10: 70 % with Wilson's 95 % interval 39.7–89.2 %, drawn as a bar and its whiskers.
  const auto acc = html->find("<svg id=\"accuracy\"");
  ASSERT_NE(acc, std::string::npos);
  EXPECT_NE(html->find("data-value=\"70\"", acc), std::string::npos);
  EXPECT_NE(html->find("class=\"whisker\"", acc), std::string::npos);
  EXPECT_NE(html->find("70.0 % (39.7–89.2)", acc), std::string::npos);
  EXPECT_NE(html->find("<td class=\"acc\">70.0 %</td>"), std::string::npos);
  // 6 hits of 10 judged; the misses' cause counted.
  const auto hits = html->find("<svg id=\"cache-hits\"");
  ASSERT_NE(hits, std::string::npos);
  EXPECT_NE(html->find("data-value=\"60\"", hits), std::string::npos);
  EXPECT_NE(html->find("60.0 % (hit 6, miss 4)", hits), std::string::npos);
  const auto events = html->find("<svg id=\"cache-events\"");
  ASSERT_NE(events, std::string::npos);
  EXPECT_NE(html->find("system_prompt_changed", events), std::string::npos);
  EXPECT_NE(html->find("data-value=\"4\"", events), std::string::npos);
}

TEST(Report, WhereTheTimeWentAndConversationsByTurn) {
  fake_run f;
  f.loads = {2};
  for (int i = 0; i < 4; ++i) {
    auto r = answered("c" + std::to_string(i / 2) + "/" + std::to_string(i % 2 + 1), 0, 40, 100);
    r.turn = static_cast<std::uint32_t>(i % 2 + 1);
    r.input_tokens = 100;
    r.cached_tokens = r.turn == 1 ? 0 : 80;
    r.attribution.connect_ms = 0.2;
    r.attribution.upstream_head_ms = 1;
    r.attribution.first_token_ms = 39;
    r.attribution.decode_ms = 60;
    f.requests.push_back(r);
  }
  std::string err;
  auto html = report_html(std::vector<report_run>{f.files("conv")}, err);
  ASSERT_TRUE(html) << err;
  const auto table = html->find("<table id=\"attribution\">");
  ASSERT_NE(table, std::string::npos);
  const auto row = html->substr(table, html->find("</table>", table) - table);
  // connect, request → head, head → first token, decode; no engine reported its own.
  EXPECT_NE(row.find("<td>0.20</td><td>1.00</td><td>39.00</td><td>60.00</td>"
                     "<td class=\"none\">–</td>"),
            std::string::npos)
      << row;
  const auto turns = html->find("<table id=\"turns\">");
  ASSERT_NE(turns, std::string::npos);
  EXPECT_NE(html->find("<td>1</td><td>2</td><td>40.00</td><td>0.0 %</td>", turns),
            std::string::npos);
  EXPECT_NE(html->find("<td>2</td><td>2</td><td>40.00</td><td>80.0 %</td>", turns),
            std::string::npos);
  // Single requests without attribution: neither section.
  fake_run plain = sweep(20);
  html = report_html(std::vector<report_run>{plain.files("plain")}, err);
  ASSERT_TRUE(html) << err;
  EXPECT_EQ(html->find("id=\"turns\""), std::string::npos);
  EXPECT_EQ(html->find("id=\"attribution\""), std::string::npos);
}

TEST(Report, NamesAreEscapedAndABrokenSummaryIsRefused) {
  fake_run f;
  f.loads = {1};
  f.requests.push_back(answered("x", 0, 10, 20));
  auto run = f.files("<b>&\"runs\"");
  std::string err;
  auto html = report_html(std::vector<report_run>{run}, err);
  ASSERT_TRUE(html) << err;
  EXPECT_EQ(html->find("<b>&"), std::string::npos);
  EXPECT_NE(html->find("&lt;b&gt;&amp;&quot;runs&quot;"), std::string::npos);

  run.summary_json = R"({"levels": 3})";
  EXPECT_FALSE(report_html(std::vector<report_run>{run}, err));
  EXPECT_NE(err.find("<b>&\"runs\"/summary.json: "), std::string::npos) << err;
  run.summary_json = "not json";
  EXPECT_FALSE(report_html(std::vector<report_run>{run}, err));
  run.summary_json = R"({"levels": [{"load": {"concurrency": 1}}, 7]})";
  EXPECT_FALSE(report_html(std::vector<report_run>{run}, err));
  EXPECT_NE(err.find("a level without its \"load\""), std::string::npos) << err;
  run = f.files("r");
  run.run_json = "[]";
  EXPECT_FALSE(report_html(std::vector<report_run>{run}, err));
  EXPECT_EQ(err, "r/run.json: not a run (a JSON object)");
}

}  // namespace
}  // namespace tokentap::bench
