// `bench run`'s figures held to a reference computed here, independently, from the raw reads of
// every response — the trace record's events, each read's bytes (`raw`, or `raw_b64` when a
// read cut a UTF-8 character) and arrival time: SSE events
// reassembled, an event timed by the read that completed it, a token event one whose first
// choice's delta carries text (content or reasoning), the output tokens the server's usage.  On
// the simulator and on llama.cpp's real server, per request and per level, TTFT, TPOT, end to
// end and output-token throughput agree within 1 %.
#include <gtest/gtest.h>
#include <simdjson.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>

#include "base/json.hpp"
#include "sim/sim_server.hpp"
#include "test/support/llama_server.hpp"
#include "test/support/process.hpp"
#include "test/support/stack.hpp"
#include "test/support/tls_cert.hpp"

namespace tokentap::test {
namespace {

using namespace std::chrono_literals;

// One response as the reference reads it from its record's raw events (ms from its start).
struct reference {
  bool error = false;  // an event said the stream failed (`{"error": …}`)
  double ttft_ms = -1, last_token_ms = -1, end_ms = -1;
  std::int64_t output_tokens = -1;
  double start_s = 0;  // wall clock (s of the day)
};

reference from_raw_events(simdjson::dom::element record) {
  reference ref;
  std::string buffered;
  simdjson::dom::parser json;
  simdjson::dom::array events;
  EXPECT_FALSE(record["events"].get(events));
  for (const auto ev : events) {
    const double t = ev["t_us"].get_double().value() / 1000;
    std::string_view raw;
    if (!ev["raw"].get(raw))
      buffered += raw;
    else
      buffered += base::json::base64_decode(std::string_view(ev["raw_b64"].get_string().value()));
    ref.end_ms = t;
    for (auto end = buffered.find("\n\n"); end != std::string::npos; end = buffered.find("\n\n")) {
      const auto event = buffered.substr(0, end);
      buffered.erase(0, end + 2);
      for (std::size_t at = 0; at < event.size();) {
        const auto nl = std::min(event.find('\n', at), event.size());
        std::string_view line(event.data() + at, nl - at);
        at = nl + 1;
        if (!line.starts_with("data:")) continue;
        line.remove_prefix(line.starts_with("data: ") ? 6 : 5);
        if (line == "[DONE]") continue;
        simdjson::dom::element chunk;
        if (json.parse(std::string(line)).get(chunk)) continue;
        if (!chunk["error"].error()) ref.error = true;
        simdjson::dom::array choices;
        if (chunk["choices"].get(choices) || choices.size() == 0) continue;
        const auto delta = choices.at(0)["delta"];
        bool text = false;
        for (const char* field : {"content", "reasoning_content", "reasoning"}) {
          std::string_view s;
          text = text || (!delta[field].get(s) && !s.empty());
        }
        if (!text) continue;
        if (ref.ttft_ms < 0) ref.ttft_ms = t;
        ref.last_token_ms = t;
      }
    }
  }
  std::int64_t out = 0;
  if (!record["usage"]["output_tokens"].get(out)) ref.output_tokens = out;
  const std::string start(record["start"].get_string().value());  // …T01:09:23.511943Z
  const auto clock = start.substr(start.find('T') + 1);
  ref.start_s = std::stod(clock.substr(0, 2)) * 3600 + std::stod(clock.substr(3, 2)) * 60 +
                std::stod(clock.substr(6));
  return ref;
}

// Within 1 % (and the µs the files round to).
void expect_agrees(double ours, double ref, const std::string& what) {
  EXPECT_NEAR(ours, ref, std::max(0.01 * std::abs(ref), 0.002)) << what;
}

// Runs `bench run` against `url` with `workload` and holds its figures to the reference.
void check_against_reference(const std::string& url, const std::string& workload,
                             const std::string& dir) {
  process p({"bench", "run", "--target", url, "--workload", workload, "--out", dir + "/run",
             "--concurrency", "2", "--requests", "12"});
  ASSERT_EQ(p.wait(120s), 0) << p.err();
  std::map<std::string, reference> refs;
  for (const auto& f : std::filesystem::directory_iterator(dir + "/run/traces")) {
    std::ifstream in(f.path());
    for (std::string line; std::getline(in, line);) {
      simdjson::dom::parser parser;
      simdjson::dom::element record;
      ASSERT_FALSE(parser.parse(line).get(record));
      refs.emplace(std::string(record["id"].get_string().value()), from_raw_events(record));
    }
  }
  ASSERT_EQ(refs.size(), 12u);
  double ttft_sum = 0, tpot_sum = 0, e2e_sum = 0, first_start = 1e9, last_end = 0;
  std::int64_t tokens = 0;
  std::size_t ok = 0;
  std::ifstream requests(dir + "/run/requests.jsonl");
  std::size_t n = 0;
  for (std::string line; std::getline(requests, line); ++n) {
    simdjson::dom::parser parser;
    const auto row = parser.parse(line);
    ASSERT_FALSE(row.error()) << line;
    const auto& ref = refs[std::string(row["trace_id"].get_string().value())];
    first_start = std::min(first_start, ref.start_s);
    last_end = std::max(last_end, ref.start_s + ref.end_ms / 1000);
    // A stream that failed (llama.cpp's tiny model now and then makes output its own parser
    // refuses) is not ok, and in no figure.
    EXPECT_EQ(row["ok"].get_bool().value(), !ref.error) << line;
    if (ref.error) continue;
    ++ok;
    ASSERT_GT(ref.output_tokens, 1) << line;
    ASSERT_GE(ref.ttft_ms, 0) << line;
    const double tpot =
        (ref.last_token_ms - ref.ttft_ms) / static_cast<double>(ref.output_tokens - 1);
    expect_agrees(row["ttft_ms"].get_double().value(), ref.ttft_ms, "TTFT " + line);
    expect_agrees(row["tpot_ms"].get_double().value(), tpot, "TPOT " + line);
    expect_agrees(row["e2e_ms"].get_double().value(), ref.end_ms, "end to end " + line);
    EXPECT_EQ(row["output_tokens"].get_int64().value(), ref.output_tokens) << line;
    ttft_sum += ref.ttft_ms;
    tpot_sum += tpot;
    e2e_sum += ref.end_ms;
    tokens += ref.output_tokens;
  }
  ASSERT_EQ(n, 12u);
  ASSERT_GT(ok, 6u);
  simdjson::dom::parser parser;
  const auto summary = parser.load(dir + "/run/summary.json");
  ASSERT_FALSE(summary.error());
  const auto level = summary["levels"].at(0);
  expect_agrees(level["metrics"]["ttft_ms"]["mean"].get_double().value(),
                ttft_sum / static_cast<double>(ok), "mean TTFT");
  expect_agrees(level["metrics"]["tpot_ms"]["mean"].get_double().value(),
                tpot_sum / static_cast<double>(ok), "mean TPOT");
  expect_agrees(level["metrics"]["e2e_ms"]["mean"].get_double().value(),
                e2e_sum / static_cast<double>(ok), "mean end to end");
  // Output tokens over the level's span: the first request sent to the last response's end.
  expect_agrees(level["throughput"]["output_tokens_per_s"].get_double().value(),
                static_cast<double>(tokens) / (last_end - first_start), "output tokens per s");
}

std::string prompts(const std::string& dir) {
  std::ofstream out(dir + "/w.jsonl");
  for (int i = 0; i < 6; ++i)
    out << R"({"id":"p)" << i << R"(","prompt":"Tell me about the number )" << i
        << R"( in a few words.","max_tokens":24})"
        << "\n";
  return dir + "/w.jsonl";
}

TEST(BenchPeer, OnTheSimulatorOurFiguresAreTheRawEventsOwn) {
  sim::server sim(loopback_sim(30, 3, 24));
  sim.start();
  const auto dir = temp_dir();
  check_against_reference("http://127.0.0.1:" + std::to_string(sim.endpoint().port()), prompts(dir),
                          dir);
}

TEST(BenchPeer, OnLlamaCppOurFiguresAreTheRawEventsOwn) {
  if (!llama_server::available()) GTEST_SKIP() << "no engine at " << llama_server::folder();
  llama_server engine;
  if (engine.built_for_another_cpu())
    GTEST_SKIP() << "llama-server at " << llama_server::folder() << " was built for another CPU";
  ASSERT_TRUE(engine.ok()) << engine.log();
  const auto dir = temp_dir();
  check_against_reference(engine.url(), prompts(dir), dir);
}

}  // namespace
}  // namespace tokentap::test
