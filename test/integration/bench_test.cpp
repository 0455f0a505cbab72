// `tokentap bench` as a user runs it, on the real binary against a real simulator on 127.0.0.1:
// a run writes its directory (run.json, requests.jsonl, summary.json, traces/ that analyze
// reads), two runs of one target
// compare as no regression (exit 0), a slower target as one (exit 1, the same in JSON), the
// report of two runs renders in headless Chromium from the file alone, and a broken workload or
// missing flags are refused with exit 2 and a one-line reason.
#include <gtest/gtest.h>
#include <simdjson.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "sim/sim_server.hpp"
#include "test/support/browser.hpp"
#include "test/support/process.hpp"
#include "test/support/stack.hpp"
#include "test/support/tls_cert.hpp"

namespace tokentap::test {
namespace {

using namespace std::chrono_literals;

struct Bench : ::testing::Test {
  Bench() : sim(loopback_sim(20, 2, 6)), dir(temp_dir()) {
    sim.start();
    std::ofstream(dir + "/w.jsonl")
        << R"({"id":"a","prompt":"hello"})"
           "\n"
        << R"({"id":"b","messages":[{"role":"user","content":"hi there"}],"max_tokens":4})"
           "\n"
        << R"({"id":"c","category":"trivia","prompt":"q","answer":"[a-z]","grader":"regex"})"
        << "\n";
  }
  // `bench run` into dir/NAME with more flags; its exit status (out and err kept).
  int run(const std::string& name, std::vector<std::string> more = {}) {
    std::vector<std::string> args{
        "bench",         "run",
        "--target",      "http://127.0.0.1:" + std::to_string(sim.endpoint().port()),
        "--workload",    dir + "/w.jsonl",
        "--out",         dir + "/" + name,
        "--model",       "sim-small",
        "--concurrency", "2,3",
        "--requests",    "9"};
    args.insert(args.end(), more.begin(), more.end());
    process p(args);
    const int rc = p.wait(60s);
    out = p.out();
    err = p.err();
    return rc;
  }
  int compare(const std::string& a, const std::string& b, std::vector<std::string> more = {}) {
    std::vector<std::string> args{"bench", "compare", dir + "/" + a, dir + "/" + b};
    args.insert(args.end(), more.begin(), more.end());
    process p(args);
    const int rc = p.wait(60s);
    out = p.out();
    err = p.err();
    return rc;
  }
  sim::server sim;
  std::string dir, out, err;
};

TEST_F(Bench, ARunWritesItsDirectoryAndTwoRunsOfOneTargetDoNotDiffer) {
  ASSERT_EQ(run("a"), 0) << err;
  EXPECT_NE(out.find("concurrency 2: 9 requests, 9 ok"), std::string::npos) << out;
  EXPECT_NE(out.find("concurrency 3: 9 requests, 9 ok"), std::string::npos) << out;
  EXPECT_EQ(out.find("fell behind"), std::string::npos) << out;  // a closed loop has no schedule
  for (const char* file : {"run.json", "requests.jsonl", "summary.json"})
    EXPECT_TRUE(std::filesystem::exists(dir + "/a/" + file)) << file;
  simdjson::dom::parser p;
  const auto summary = p.load(dir + "/a/summary.json");
  ASSERT_FALSE(summary.error());
  const auto levels = summary["levels"].get_array();
  ASSERT_EQ(levels.size(), 2u);
  const auto l0 = levels.at(0);
  EXPECT_EQ(l0["load"]["concurrency"].get_uint64().value(), 2u);
  EXPECT_EQ(l0["ok"].get_uint64().value(), 9u);
  EXPECT_GE(l0["metrics"]["ttft_ms"]["p50"].get_double().value(), 20);
  EXPECT_DOUBLE_EQ(l0["accuracy"]["trivia"]["accuracy"].get_double().value(), 1);
  EXPECT_GT(l0["throughput"]["output_tokens_per_s"].get_double().value(), 0);
  simdjson::dom::parser q;
  const auto run_json = q.load(dir + "/a/run.json");
  ASSERT_FALSE(run_json.error());
  EXPECT_EQ(std::string_view(run_json["model"].get_string().value()), "sim-small");
  // A trace record per request, which analyze reads; requests.jsonl names each one's.
  std::ifstream requests(dir + "/a/requests.jsonl");
  std::size_t named = 0;
  for (std::string line; std::getline(requests, line);)
    named += line.find("\"trace_id\":\"") != std::string::npos ? 1 : 0;
  EXPECT_EQ(named, 18u);
  // Each record starts when its request did, on the wall clock (the run's day).
  const std::string day(std::string_view(run_json["started"].get_string().value()).substr(0, 10));
  std::ifstream records(
      dir + "/a/traces/" +
      std::filesystem::directory_iterator(dir + "/a/traces")->path().filename().string());
  std::string first_record;
  std::getline(records, first_record);
  EXPECT_NE(first_record.find("\"start\":\"" + day + "T"), std::string::npos)
      << first_record.substr(0, 120);
  process analyze({"analyze", dir + "/a/traces", "--format", "json"});
  EXPECT_EQ(analyze.wait(30s), 0) << analyze.err();
  simdjson::dom::parser r;
  const auto report = r.parse(analyze.out());
  ASSERT_FALSE(report.error()) << analyze.out();
  EXPECT_EQ(report["groups"].at(0)["requests"].get_uint64().value(), 18u) << analyze.out();
  // A second run of the same target: no regression.
  ASSERT_EQ(run("b", {"--max-reasoning-steps", "1"}), 0) << err;
  simdjson::dom::parser b;
  const auto b_summary = b.load(dir + "/b/summary.json");
  ASSERT_FALSE(b_summary.error());
  EXPECT_EQ(b_summary["levels"].at(0)["steps"]["max"].get_uint64().value(), 1u);
  EXPECT_EQ(compare("a", "b"), 0) << out << err;
  EXPECT_NE(out.find("requests paired by id"), std::string::npos) << out;
  EXPECT_NE(out.find("verdict: no regression"), std::string::npos) << out;
}

TEST_F(Bench, ASlowerTargetIsARegression) {
  ASSERT_EQ(run("fast"), 0) << err;
  ASSERT_EQ(run("slow", {"--header", "x-sim-ttft-ms: 200"}), 0) << err;
  EXPECT_EQ(compare("fast", "slow"), 1) << out << err;
  EXPECT_NE(out.find("verdict: B is worse"), std::string::npos) << out;
  EXPECT_EQ(compare("fast", "slow", {"--format", "json"}), 1);
  simdjson::dom::parser p;
  const auto doc = p.parse(out);
  ASSERT_FALSE(doc.error()) << out;
  const auto first = doc["metrics"].at(0);
  EXPECT_EQ(std::string_view(first["name"].get_string().value()), "ttft_ms.p50");
  EXPECT_EQ(std::string_view(first["verdict"].get_string().value()), "worse");
  EXPECT_GT(first["delta_pct"].get_double().value(), 100);
  // The other way round it is better: no regression.
  EXPECT_EQ(compare("slow", "fast"), 0) << out;
}

TEST_F(Bench, TheReportOfTwoRunsRendersOfflineInChromium) {
  ASSERT_EQ(run("fast"), 0) << err;
  ASSERT_EQ(run("slow", {"--header", "x-sim-ttft-ms: 200"}), 0) << err;
  const auto page = dir + "/report.html";
  process report({"bench", "report", dir + "/fast", dir + "/slow", "--out", page});
  ASSERT_EQ(report.wait(30s), 0) << report.err();
  EXPECT_EQ(report.out(), "wrote " + page + "\n");
  // The page as Chromium builds it from the file alone (the flags allow no network).
  const auto dom = dump_dom("file://" + page);
  ASSERT_FALSE(dom.empty()) << "chromium failed";
  EXPECT_NE(dom.find("<title>tokentap bench report: fast against slow</title>"), std::string::npos);
  // A line per run and level in each CDF; the sweep's charts against load.
  for (const char* chart : {"cdf-ttft", "cdf-itl", "cdf-e2e", "latency-vs-load"}) {
    const auto at = dom.find("<svg id=\"" + std::string(chart) + "\"");
    ASSERT_NE(at, std::string::npos) << chart;
    const auto svg = dom.substr(at, dom.find("</svg>", at) - at);
    std::size_t lines = 0;
    for (auto k = svg.find("<polyline"); k != std::string::npos; k = svg.find("<polyline", k + 1))
      ++lines;
    EXPECT_EQ(lines, std::string(chart) == "latency-vs-load" ? 6u : 4u) << chart;
    const bool per_level = std::string(chart) != "latency-vs-load";
    EXPECT_NE(
        svg.find(per_level ? "data-series=\"B slow · c 3\"" : "data-series=\"B slow · TTFT P50\""),
        std::string::npos)
        << chart;
  }
  // The slow run's TTFT P50 in its table: the simulator's 200 ms.
  const auto table = dom.find("data-run=\"B slow\"");
  ASSERT_NE(table, std::string::npos);
  const std::string ttft_cell = "<td class=\"ttft\">";
  const auto cell = dom.find(ttft_cell, table);
  ASSERT_NE(cell, std::string::npos);
  EXPECT_NEAR(std::atof(dom.c_str() + cell + ttft_cell.size()), 200, 20) << dom.substr(cell, 60);
  // And a picture of it.
  const auto artifacts = std::string(TOKENTAP_BINARY_DIR) + "/test-artifacts";
  std::filesystem::create_directories(artifacts);
  const std::string shot = "chromium " + chromium_flags() + "--screenshot=" + artifacts +
                           "/bench-report.png file://" + page + " >/dev/null 2>&1";
  ASSERT_EQ(std::system(shot.c_str()), 0);
  EXPECT_GT(std::filesystem::file_size(artifacts + "/bench-report.png"), 10000u);
  std::printf("bench report screenshot: %s/bench-report.png\n", artifacts.c_str());
}

TEST_F(Bench, RecordedTracesReplayOnTheirScheduleAtTheSpeedAsked) {
  ASSERT_EQ(run("a"), 0) << err;  // 18 requests, each with its trace record
  std::vector<std::string> recorded;
  {
    std::ifstream requests(dir + "/a/requests.jsonl");
    for (std::string line; std::getline(requests, line);) {
      const auto k = line.find("\"trace_id\":\"");
      if (k != std::string::npos) recorded.push_back(line.substr(k + 12, 16));
    }
  }
  ASSERT_EQ(recorded.size(), 18u);
  process replay({"bench", "run", "--target",
                  "http://127.0.0.1:" + std::to_string(sim.endpoint().port()), "--workload",
                  dir + "/a/traces", "--out", dir + "/replayed", "--speed", "4,8"});
  ASSERT_EQ(replay.wait(60s), 0) << replay.err();
  EXPECT_NE(replay.out().find("schedule 4: 18 requests, 18 ok"), std::string::npos) << replay.out();
  EXPECT_NE(replay.out().find("schedule 8: 18 requests, 18 ok"), std::string::npos) << replay.out();
  // Each recorded request once per level, under its record's id.
  std::vector<std::string> sent;
  std::ifstream requests(dir + "/replayed/requests.jsonl");
  for (std::string line; std::getline(requests, line);)
    if (line.find("\"level\":0") != std::string::npos)
      sent.push_back(line.substr(7, line.find('"', 7) - 7));
  std::sort(recorded.begin(), recorded.end());
  std::sort(sent.begin(), sent.end());
  EXPECT_EQ(sent, recorded);
  simdjson::dom::parser p;
  const auto summary = p.load(dir + "/replayed/summary.json");
  ASSERT_FALSE(summary.error());
  EXPECT_EQ(summary["levels"].at(1)["load"]["schedule_speed"].get_double().value(), 8);
  // Each send's lag against its recorded time is measured (whether a loaded test machine keeps
  // up to the millisecond is not this test's question).
  EXPECT_LT(summary["levels"].at(0)["schedule_lag_ms"]["p50"].get_double().value(), 100);
  simdjson::dom::parser q;
  const auto run_json = q.load(dir + "/replayed/run.json");
  ASSERT_FALSE(run_json.error());
  EXPECT_EQ(std::string_view(run_json["load"]["kind"].get_string().value()), "schedule");
  // --speed belongs to recorded workloads.
  process wrong({"bench", "run", "--target", "http://127.0.0.1:1", "--workload", dir + "/w.jsonl",
                 "--out", dir + "/x", "--requests", "1", "--speed", "2"});
  EXPECT_EQ(wrong.wait(30s), 2);
  EXPECT_EQ(wrong.err(),
            "tokentap bench: --speed replays a recorded workload (a trace directory)\n");
}

TEST_F(Bench, ASyntheticWorkloadReachesTheServerAtItsLengths) {
  std::ofstream(dir + "/s.yaml") << "# 300-token prompts, a shared system prompt\n"
                                    "synthetic:\n"
                                    "  requests: 4\n"
                                    "  input_tokens: 100\n"
                                    "  output_tokens: 5\n"
                                    "  system_prompt: {tokens: 200}\n";
  process p({"bench", "run", "--target",
             "http://127.0.0.1:" + std::to_string(sim.endpoint().port()), "--workload",
             dir + "/s.yaml", "--out", dir + "/syn", "--model", "sim-small", "--concurrency", "2",
             "--requests", "6"});
  ASSERT_EQ(p.wait(60s), 0) << p.err();
  EXPECT_NE(p.out().find("concurrency 2: 6 requests, 6 ok"), std::string::npos) << p.out();
  // The server's own counts: 300 tokens of text (four characters each, as the simulator
  // counts) and a few a message; each answer within its max_tokens.
  std::ifstream requests(dir + "/syn/requests.jsonl");
  std::size_t n = 0;
  for (std::string line; std::getline(requests, line); ++n) {
    simdjson::dom::parser j;
    const auto r = j.parse(line);
    ASSERT_FALSE(r.error()) << line;
    const auto in = r["input_tokens"].get_int64().value();
    EXPECT_GE(in, 300) << line;
    EXPECT_LE(in, 320) << line;
    EXPECT_LE(r["output_tokens"].get_int64().value(), 5) << line;
  }
  EXPECT_EQ(n, 6u);
}

TEST_F(Bench, WhatCannotRunIsRefusedWithExitTwo) {
  // A broken workload, JSONL or YAML: exit 2 and its file and line.
  const auto refusal = [&](const std::string& file, const std::string& text) {
    std::ofstream(dir + "/" + file) << text;
    process bad({"bench", "run", "--target", "http://127.0.0.1:1", "--workload", dir + "/" + file,
                 "--out", dir + "/x", "--requests", "1"});
    EXPECT_EQ(bad.wait(30s), 2) << file;
    return bad.err();
  };
  EXPECT_EQ(refusal("bad.jsonl", "{\"prompt\":\"ok\"}\n{\"promt\":\"typo\"}\n"),
            "tokentap bench: " + dir +
                "/bad.jsonl:2: unknown key 'promt' (id, category, messages, prompt, answer, "
                "grader, max_tokens)\n");
  EXPECT_EQ(refusal("bad.yaml", "synthetic:\n  requests: 2\n  turns: 3\n"),
            "tokentap bench: " + dir +
                "/bad.yaml:3: unknown key 'turns' in synthetic (requests, seed, input_tokens, "
                "output_tokens, system_prompt, cache_breakers)\n");
  process no_stop({"bench", "run", "--target", "http://127.0.0.1:1", "--workload", dir + "/w.jsonl",
                   "--out", dir + "/x"});
  EXPECT_EQ(no_stop.wait(30s), 2);
  EXPECT_EQ(no_stop.err(), "tokentap bench: a level needs --requests N or --duration-s S\n");
  process both({"bench", "run", "--target", "http://127.0.0.1:1", "--workload", dir + "/w.jsonl",
                "--out", dir + "/x", "--requests", "1", "--rate", "1", "--concurrency", "1"});
  EXPECT_EQ(both.wait(30s), 2);
  EXPECT_NE(both.err().find("exclude each other"), std::string::npos) << both.err();
  EXPECT_EQ(compare("nowhere", "neither"), 2);
  EXPECT_NE(err.find("cannot read"), std::string::npos) << err;
}

}  // namespace
}  // namespace tokentap::test
