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
#include <iterator>
#include <map>

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

// A trace record of a run: its request's messages, the answer's text, when it started (s of the
// day) and its end to end.
struct recorded_turn {
  std::vector<std::pair<std::string, std::string>> messages;  // role, content
  std::string text;
  double start_s = 0, e2e_ms = 0;
};
std::map<std::string, recorded_turn> records_of(const std::string& run_dir) {
  std::map<std::string, recorded_turn> out;
  for (const auto& f : std::filesystem::directory_iterator(run_dir + "/traces")) {
    std::ifstream in(f.path());
    for (std::string line; std::getline(in, line);) {
      simdjson::dom::parser p, q;
      const auto r = p.parse(line);
      recorded_turn t;
      const simdjson::padded_string body(std::string_view(r["request"]["body"].get_string()));
      simdjson::dom::array messages;
      EXPECT_FALSE(q.parse(body)["messages"].get(messages)) << body;
      for (const auto m : messages)
        t.messages.emplace_back(std::string(m["role"].get_string().value()),
                                std::string(m["content"].get_string().value()));
      t.text = std::string(r["text"]["content"].get_string().value());
      const std::string start(r["start"].get_string().value());  // …T01:09:23.511943Z
      const auto clock = start.substr(start.find('T') + 1);
      t.start_s = std::stod(clock.substr(0, 2)) * 3600 + std::stod(clock.substr(3, 2)) * 60 +
                  std::stod(clock.substr(6));
      t.e2e_ms = r["timing"]["e2e_ms"].get_double().value();
      out.emplace(std::string(r["id"].get_string().value()), std::move(t));
    }
  }
  return out;
}

// The rows of a run's requests.jsonl by id.
std::map<std::string, std::string> rows_of(const std::string& run_dir) {
  std::map<std::string, std::string> out;
  std::ifstream in(run_dir + "/requests.jsonl");
  for (std::string line; std::getline(in, line);)
    out.emplace(line.substr(7, line.find('"', 7) - 7), line);
  return out;
}

TEST(BenchConversations, EachTurnResendsTheHistoryWithTheServersAnswersAndTheBreakersBreakIt) {
  auto so = loopback_sim(20, 2, 6);
  so.cache.capacity_blocks = 100000;
  sim::server sim(so);
  sim.start();
  const auto dir = temp_dir();
  const auto bench = [&](const std::string& name, const std::string& breakers) {
    std::ofstream(dir + "/" + name + ".yaml")
        << "synthetic:\n  conversations: 2\n  turns: 3\n  think_time_ms: 40\n"
           "  input_tokens: 40\n  output_tokens: 6\n  system_prompt: {tokens: 300}\n"
        << breakers;
    process p({"bench", "run", "--target",
               "http://127.0.0.1:" + std::to_string(sim.endpoint().port()), "--workload",
               dir + "/" + name + ".yaml", "--out", dir + "/" + name, "--model", "sim-small",
               "--concurrency", "2", "--requests", "6"});
    EXPECT_EQ(p.wait(60s), 0) << p.err();
    EXPECT_NE(p.out().find("concurrency 2: 6 requests, 6 ok"), std::string::npos) << p.out();
  };
  // Whole histories: turn k+1 sends turn k's messages, the server's answer to it, its own.
  bench("whole", "");
  auto rows = rows_of(dir + "/whole");
  auto records = records_of(dir + "/whole");
  ASSERT_EQ(rows.size(), 6u);
  for (const std::string c : {"c0", "c1"}) {
    std::vector<recorded_turn> turns;
    for (int k = 1; k <= 3; ++k) {
      const auto& row = rows[c + "/" + std::to_string(k)];
      EXPECT_NE(row.find("\"turn\":" + std::to_string(k)), std::string::npos) << row;
      const auto id = row.substr(row.find("\"trace_id\":\"") + 12, 16);
      ASSERT_TRUE(records.contains(id)) << row;
      turns.push_back(records[id]);
      if (k > 1) {
        EXPECT_NE(row.find("\"cache\":\"hit\""), std::string::npos) << row;
      }
    }
    for (std::size_t k = 1; k < turns.size(); ++k) {
      auto expected = turns[k - 1].messages;
      ASSERT_FALSE(turns[k - 1].text.empty());
      expected.emplace_back("assistant", turns[k - 1].text);
      ASSERT_EQ(turns[k].messages.size(), expected.size() + 1);
      EXPECT_TRUE(std::equal(expected.begin(), expected.end(), turns[k].messages.begin()));
      EXPECT_EQ(turns[k].messages.back().first, "user");
      // Sent once the answer had ended and the think time had passed.
      const double gap_ms = (turns[k].start_s - turns[k - 1].start_s) * 1000 - turns[k - 1].e2e_ms;
      EXPECT_GE(gap_ms, 39) << c << " turn " << k + 1;
    }
  }
  simdjson::dom::parser p;
  const auto summary = p.load(dir + "/whole/summary.json");
  ASSERT_FALSE(summary.error());
  const auto turns = summary["levels"].at(0)["turns"];
  ASSERT_EQ(turns.get_array().size(), 3u);
  // The system prompt was the server's before the first turn (c0 or c1 sent it first); later
  // turns have their whole history but the last user message cached.
  EXPECT_GT(turns.at(2)["cached_share"].get_double().value(), 0.8);

  // Each conversation runs whole (its turns reserved when it starts): a second run of the
  // workload sends the same turns, and compare pairs them by id.
  bench("again", "");
  process compare({"bench", "compare", dir + "/whole", dir + "/again"});
  EXPECT_EQ(compare.wait(60s), 0) << compare.out() << compare.err();
  EXPECT_NE(compare.out().find("requests paired by id"), std::string::npos) << compare.out();

  // A context window of 420 tokens: the third turn (~440) drops the first; the cache hook sees
  // the truncated conversation.
  bench("window", "  cache_breakers: {context_window: 420}\n");
  rows = rows_of(dir + "/window");
  records = records_of(dir + "/window");
  for (const std::string c : {"c0", "c1"}) {
    const auto& second = rows[c + "/2"];
    const auto& third = rows[c + "/3"];
    EXPECT_EQ(second.find("truncation"), std::string::npos) << second;
    EXPECT_NE(third.find("\"truncation\""), std::string::npos) << third;
    const auto& before = records[second.substr(second.find("\"trace_id\":\"") + 12, 16)];
    const auto& after = records[third.substr(third.find("\"trace_id\":\"") + 12, 16)];
    ASSERT_EQ(after.messages.size(), 4u);              // system, user 2, answer 2, user 3
    EXPECT_EQ(after.messages[0], before.messages[0]);  // the system prompt stays
    EXPECT_EQ(after.messages[1], before.messages[3]);  // the first turn is gone
  }
  // The third turn rewrites the first answer, which the second turn had resent: the
  // conversation diverges there, and the engine has only what comes before it.
  bench("edited", "  cache_breakers: {edited_history: 1}\n");
  rows = rows_of(dir + "/edited");
  records = records_of(dir + "/edited");
  for (const std::string c : {"c0", "c1"}) {
    EXPECT_EQ(rows[c + "/2"].find("prefix_divergence"), std::string::npos) << rows[c + "/2"];
    const auto& row = rows[c + "/3"];
    EXPECT_NE(row.find("\"prefix_divergence\""), std::string::npos) << row;
    EXPECT_NE(row.find("\"cache\":\"partial\""), std::string::npos) << row;
    const auto& sent = records[row.substr(row.find("\"trace_id\":\"") + 12, 16)];
    ASSERT_EQ(sent.messages.size(), 6u);
    EXPECT_EQ(sent.messages[2].first, "assistant");
    EXPECT_TRUE(sent.messages[2].second.starts_with("(edited) ")) << sent.messages[2].second;
  }
}

TEST(BenchAttribution, EachRequestSaysWhereItsTimeWentWithTheEnginesAccount) {
  // vLLM's shape: the engine reports its queue, prefill and decode with the last chunk.
  auto so = loopback_sim(15, 2, 8);
  so.engine = sim::engine_shape::vllm;
  so.defaults.prefill_us_per_token = 40;
  sim::server sim(so);
  sim.start();
  const auto dir = temp_dir();
  std::ofstream(dir + "/s.yaml") << "synthetic:\n  requests: 4\n  input_tokens: 500\n"
                                    "  output_tokens: 8\n";
  process p({"bench", "run", "--target",
             "http://127.0.0.1:" + std::to_string(sim.endpoint().port()), "--workload",
             dir + "/s.yaml", "--out", dir + "/a", "--model", "sim-small", "--requests", "4"});
  ASSERT_EQ(p.wait(60s), 0) << p.err();
  auto records = records_of(dir + "/a");
  std::ifstream requests(dir + "/a/requests.jsonl");
  std::size_t n = 0;
  for (std::string line; std::getline(requests, line); ++n) {
    simdjson::dom::parser j;
    const auto r = j.parse(line);
    ASSERT_FALSE(r.error()) << line;
    const auto a = r["attribution"];
    const double head = a["upstream_head_ms"].get_double().value(),
                 first = a["first_token_ms"].get_double().value(),
                 decode = a["decode_ms"].get_double().value();
    // The phases cut TTFT, and the response's whole time to its framing's end as its trace
    // record has it (each rounded to the µs); bench's end to end stops at the last event, at
    // or before that end.
    EXPECT_NEAR(head + first, r["ttft_ms"].get_double().value(), 0.003) << line;
    const std::string trace_id(r["trace_id"].get_string().value());
    ASSERT_TRUE(records.contains(trace_id)) << line;
    EXPECT_NEAR(head + first + decode, records[trace_id].e2e_ms, 0.004) << line;
    EXPECT_LE(r["e2e_ms"].get_double().value(), records[trace_id].e2e_ms + 0.002) << line;
    EXPECT_GE(a["connect_ms"].get_double().value(), 0) << line;
    // The engine's own account: 500 prompt tokens at 40 µs each, 20 ms, inside TTFT; what is
    // left unexplained is the network and the server's front end, under TTFT.
    EXPECT_EQ(std::string_view(a["engine"]["source"].get_string().value()), "vllm") << line;
    EXPECT_GT(a["engine"]["prefill_ms"].get_double().value(), 15) << line;
    const double unexplained = a["unexplained_ms"].get_double().value();
    EXPECT_GE(unexplained, 0) << line;
    EXPECT_LT(unexplained, r["ttft_ms"].get_double().value()) << line;
  }
  EXPECT_EQ(n, 4u);
  simdjson::dom::parser q;
  const auto summary = q.load(dir + "/a/summary.json");
  ASSERT_FALSE(summary.error());
  const auto phases = summary["levels"].at(0)["attribution"];
  for (const char* name : {"connect_ms", "upstream_head_ms", "first_token_ms", "decode_ms",
                           "engine_prefill_ms", "engine_decode_ms", "unexplained_ms"})
    EXPECT_EQ(phases[name]["n"].get_uint64().value(), 4u) << name;
}

// The README's experiment as `deploy/quickstart.sh demo --experiment` runs it: two proxy
// configurations, the same conversations through each, compared by id, and a report that holds
// both runs.
TEST(BenchExperiment, TheReadmesExperimentRunsEndToEnd) {
  const auto out = temp_dir() + "/experiment";
  process p(program{"/bin/bash"}, {std::string(TOKENTAP_SOURCE_DIR) + "/deploy/experiment/run.sh",
                                   tokentap_binary(), out});
  ASSERT_EQ(p.wait(300s), 0) << p.out() << p.err();
  EXPECT_NE(p.out().find("requests paired by id (the same workload)"), std::string::npos)
      << p.out();
  for (const char* run : {"round-robin", "prefix"}) {
    std::ifstream requests(out + "/" + run + "/requests.jsonl");
    std::size_t n = 0, ok = 0;
    for (std::string line; std::getline(requests, line); ++n)
      ok += line.find("\"ok\":true") != std::string::npos ? 1 : 0;
    EXPECT_EQ(n, 120u) << run;
    EXPECT_EQ(ok, 120u) << run;
  }
  std::ifstream report(out + "/report.html");
  const std::string html((std::istreambuf_iterator<char>(report)), {});
  EXPECT_NE(html.find("round-robin against prefix"), std::string::npos);
  EXPECT_NE(html.find("<table id=\"turns\">"), std::string::npos);
  EXPECT_NE(html.find("<table id=\"attribution\">"), std::string::npos);
}

// A server that puts three tokens in each chunk (vLLM with a stream interval, speculative
// decoding): asked for usage in every chunk (--continuous-usage), ITL is per token — each chunk
// gap split three ways — and kept apart from the per-event gaps; without it, ITL is the
// per-event gap and the summary says so.
TEST(BenchItl, PerTokenWhenTheServerCountsItsOutputPerChunk) {
  auto so = loopback_sim(20, 6, 24);
  so.defaults.tokens_per_event = 3;
  sim::server sim(so);
  sim.start();
  const auto dir = temp_dir();
  std::ofstream(dir + "/w.jsonl") << R"({"id":"a","prompt":"hello","max_tokens":24})"
                                  << "\n";
  for (const bool continuous : {false, true}) {
    std::vector<std::string> args{
        "bench",      "run",
        "--target",   "http://127.0.0.1:" + std::to_string(sim.endpoint().port()),
        "--workload", dir + "/w.jsonl",
        "--out",      dir + (continuous ? "/per-token" : "/per-event"),
        "--requests", "3"};
    if (continuous) args.push_back("--continuous-usage");
    process p(args);
    ASSERT_EQ(p.wait(60s), 0) << p.err();
    simdjson::dom::parser j;
    const auto level =
        j.load(dir + (continuous ? "/per-token" : "/per-event") + "/summary.json")["levels"].at(0);
    ASSERT_FALSE(level.error());
    const double chunk = level["metrics"]["chunk_gap_ms"]["mean"].get_double().value();
    const double itl = level["metrics"]["itl_ms"]["mean"].get_double().value();
    EXPECT_NEAR(chunk, 18, 1.5);  // three tokens 6 ms apart: a chunk every 18 ms
    EXPECT_EQ(level["itl_per_token"].get_bool().value(), continuous);
    if (continuous) {
      EXPECT_NEAR(itl, 6, 0.5);
      // 8 chunks of 3: 7 gaps before the later ones, 3 tokens each, per request.
      EXPECT_EQ(level["metrics"]["itl_ms"]["n"].get_uint64().value(), 3u * 7 * 3);
    } else {
      EXPECT_NEAR(itl, chunk, 0.01);
    }
  }
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
                "grader, max_tokens; or a ShareGPT conversation: id, conversations)\n");
  EXPECT_EQ(refusal("bad.yaml", "synthetic:\n  requests: 2\n  trns: 3\n"),
            "tokentap bench: " + dir +
                "/bad.yaml:3: unknown key 'trns' in synthetic (requests, conversations, turns, "
                "think_time_ms, seed, input_tokens, output_tokens, system_prompt, "
                "cache_breakers)\n");
  EXPECT_EQ(refusal("bad2.yaml", "synthetic:\n  requests: 2\n  turns: 3\n"),
            "tokentap bench: " + dir +
                "/bad2.yaml:3: turns needs conversations (requests are single-turn)\n");
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
