// Record through the real proxy from the simulator, then replay: bytes and timing as recorded.
// And `analyze` on a fixture with known numbers.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <thread>

#include "replay/analyze.hpp"
#include "replay/replay_server.hpp"
#include "replay/trace_reader.hpp"
#include "test/support/http_client.hpp"
#include "test/support/process.hpp"
#include "test/support/stack.hpp"
#include "test/support/tls_cert.hpp"

namespace tokentap::test {
namespace {

std::vector<std::string> files_in(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir)) out.push_back(e.path().string());
  return out;
}

struct recording {
  explicit recording(std::function<void(config::config&)> tweak = {})
      : dir(temp_dir() + "/traces"), s([this, tweak](config::config& cfg) {
          cfg.trace.dir = dir;
          if (tweak) tweak(cfg);
        }) {}
  // Sends through the proxy; waits for the trace record.
  response send(const request_options& o) {
    auto r = fetch(s.proxy_ep(), o);
    ++n;
    for (int i = 0; i < 300; ++i) {
      if (std::filesystem::exists(dir) && replay::read_traces(files_in(dir)).records.size() >= n)
        break;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return r;
  }
  std::string dir;
  stack s;
  std::size_t n = 0;
};

request_options streamed() {
  request_options o;
  o.body = chat_body(true, "replay me");
  o.headers = {{"x-sim-ttft-ms", "60"},
               {"x-sim-itl-ms", "20"},
               {"x-sim-tokens", "25"},
               {"x-sim-reasoning-tokens", "5"},
               {"Authorization", "Bearer sk-replay"}};
  return o;
}

TEST(Replay, ServeReproducesBytesAndTiming) {
  recording rec;
  const auto original = rec.send(streamed());
  request_options plain;
  plain.body = chat_body(false, "plain one");
  plain.headers = {{"x-sim-tokens", "6"}, {"x-sim-ttft-ms", "30"}};
  const auto original_plain = rec.send(plain);
  ASSERT_TRUE(original.complete);

  auto traces = replay::read_traces(files_in(rec.dir));
  ASSERT_EQ(traces.records.size(), 2u);
  EXPECT_EQ(traces.skipped, 0u);
  const auto recorded_events = traces.records[0].events;
  replay::serve_options so;
  so.port = 0;
  replay::replay_server server(std::move(traces.records), so);
  server.start();

  const auto replayed = fetch(server.endpoint(), streamed());
  ASSERT_TRUE(replayed.complete);
  EXPECT_EQ(replayed.status, 200);
  EXPECT_EQ(replayed.body, original.body);  // byte for byte
  EXPECT_EQ(replayed.header("content-type"), "text/event-stream; charset=utf-8");
  // Each recorded read arrives at its recorded offset (the server schedules every read at its
  // own offset from the request, not after the one before).  Never early: a replay that ignored
  // the timing would send everything at once.  Late only by the machine's scheduling: most reads
  // within 3 ms or 5 % (plus loopback noise; sanitizer builds run several times slower, so their
  // slack is wider), none by more than 100 ms.  CI runs this beside other tests on two cores,
  // where a read now and then waits a few ms for a core (this failed there with every read
  // held to the slack).
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  constexpr double slack_ms = 10.0;
#else
  constexpr double slack_ms = 3.0;
#endif
  // A recorded read may hold several SSE events and the client may get it in more than one
  // read: each recorded read is complete when the client has received up to its last byte.
  std::size_t end = 0, arrival = 0, outside = 0;
  for (std::size_t i = 0; i < recorded_events.size(); ++i) {
    end += recorded_events[i].bytes.size();
    while (arrival < replayed.chunk_end.size() && replayed.chunk_end[arrival] < end) ++arrival;
    ASSERT_LT(arrival, replayed.chunk_ms.size()) << "read " << i;
    const double want = static_cast<double>(recorded_events[i].t_us) / 1000.0;
    const double got = replayed.chunk_ms[arrival];
    EXPECT_GE(got, want - 1.0) << "read " << i << " came early";
    EXPECT_LT(got, want + 100.0) << "read " << i;
    if (std::abs(got - want) > std::max(slack_ms, 0.05 * want)) ++outside;
  }
  EXPECT_LE(outside, recorded_events.size() / 10) << "reads off their recorded time";
  EXPECT_GE(recorded_events.size(), 25u);  // 1 role + 5 reasoning + 25 answer chunks + [DONE]
  const auto replayed_plain = fetch(server.endpoint(), plain);
  EXPECT_EQ(replayed_plain.body, original_plain.body);
  EXPECT_EQ(server.served(), 2u);
}

TEST(Replay, UnmatchedRequestIs404NamingItsHash) {
  recording rec;
  rec.send(streamed());
  replay::serve_options so;
  so.port = 0;
  replay::replay_server server(replay::read_traces(files_in(rec.dir)).records, so);
  server.start();
  auto other = streamed();
  other.body = chat_body(true, "never recorded");
  const auto r = fetch(server.endpoint(), other);
  EXPECT_EQ(r.status, 404);
  EXPECT_NE(r.body.find("no_recorded_response"), std::string::npos);
  EXPECT_NE(r.body.find("no recorded request matches hash "), std::string::npos) << r.body;
}

TEST(Replay, SpeedScalesTimingAndSequenceModeIgnoresBodies) {
  recording rec;
  const auto original = rec.send(streamed());
  replay::serve_options so;
  so.port = 0;
  so.speed = 2.0;
  so.match = replay::match_mode::sequence;
  replay::replay_server server(replay::read_traces(files_in(rec.dir)).records, so);
  server.start();
  auto other = streamed();
  other.body = chat_body(true, "different body, same slot");
  const auto r = fetch(server.endpoint(), other);
  EXPECT_EQ(r.body, original.body);
  EXPECT_NEAR(r.total_ms, original.total_ms / 2, std::max(6.0, 0.1 * original.total_ms));
}

TEST(TraceReader, MalformedAndTruncatedLinesAreSkippedWithWarnings) {
  recording rec;
  rec.send(streamed());
  auto files = files_in(rec.dir);
  const auto good = replay::read_traces(files).records.size();
  ASSERT_EQ(good, 1u);
  std::ofstream(files[0], std::ios::app)
      << "{\"v\":1,\"id\":\"x\",\"request\":{\"met\n"  // truncated
      << "not json\n\n{\"v\":2,\"request\":{\"method\":\"GET\"}}\n";
  const auto r = replay::read_traces({files[0], "/nonexistent/trace.jsonl"});
  EXPECT_EQ(r.records.size(), 1u);
  EXPECT_EQ(r.skipped, 4u);  // truncated, garbage, wrong version, missing file
  EXPECT_EQ(r.warnings.size(), 4u);
}

// A fixture with known numbers.
std::string fixture_line(const std::string& id, const std::string& model, double ttft, double e2e,
                         const std::string& outcome, int input, int cached,
                         const std::string& cache_event, int steps) {
  std::string s =
      R"({"v":1,"id":")" + id +
      R"(","start":"2026-11-29T10:00:00.000000Z","route":"r","provider":"openai-chat","model":")" +
      model +
      R"(","request":{"method":"POST","path":"/v1/chat/completions","headers":{},"body":null},"response":{"status":200,"headers":{}},"outcome":")" +
      outcome + R"(","error":null,"timing":{"ttft_ms":)" + std::to_string(ttft) +
      R"(,"ttft_answer_ms":)" + std::to_string(ttft + 10) + R"(,"e2e_ms":)" + std::to_string(e2e) +
      R"(,"itl_ms":{"p50":5,"p95":9,"p99":10,"max":12,"n":9},"overhead_ms":{"p50":0.01,"p95":0.02,"p99":0.03,"max":0.04,"n":9},"stalls":0},"usage":{"input_tokens":)" +
      std::to_string(input) + R"(,"output_tokens":10,"reasoning_tokens":4,"cached_input_tokens":)" +
      std::to_string(cached) + R"(,"cache_write_tokens":null},"text":null,"events":[],"steps":[)";
  for (int i = 0; i < steps; ++i)
    s += std::string(i ? "," : "") + R"({"offset":0,"channel":"reasoning","kind":")" +
         (i ? "conclusion" : "step") +
         R"(","t_us":1,"duration_us":1,"tokens":2,"redundant":false})";
  return s + R"(],"redundant_tokens":1,"cache":[{"event":")" + cache_event + R"("}]})";
}

TEST(Analyze, KnownNumbers) {
  const auto dir = temp_dir();
  {
    std::ofstream f(dir + "/t.jsonl");
    f << fixture_line("a", "m1", 100, 1000, "ok", 100, 100, "hit", 2) << "\n"
      << fixture_line("b", "m1", 200, 3000, "ok", 100, 0, "miss", 1) << "\n"
      << fixture_line("c", "m2", 300, 2000, "timeout", 200, 0, "unexpected_miss", 0) << "\n"
      << "garbage line\n";
  }
  const auto traces = replay::read_traces({dir + "/t.jsonl"});
  ASSERT_EQ(traces.records.size(), 3u);
  EXPECT_EQ(traces.skipped, 1u);
  replay::analyze_options o;
  o.json = true;
  const auto all = replay::analyze(traces.records, o);
  EXPECT_NE(all.find(R"("group":"all","requests":3,"outcomes":{"ok":2,"timeout":1})"),
            std::string::npos)
      << all;
  EXPECT_NE(all.find(R"("ttft_ms":{"p50":200.000,"p95":300.000,"p99":300.000,"n":3})"),
            std::string::npos)
      << all;
  EXPECT_NE(
      all.find(
          R"("tokens":{"input":400,"output":30,"reasoning":12,"cached_input":100},"cache_hit_ratio":0.250)"),
      std::string::npos)
      << all;
  EXPECT_NE(all.find(R"("cache_events":{"hit":1,"miss":1,"unexpected_miss":1})"), std::string::npos)
      << all;
  EXPECT_NE(all.find(R"("steps_per_response":1.000,"steps_by_kind":{"conclusion":1,"step":2})"),
            std::string::npos)
      << all;
  EXPECT_NE(all.find(R"("redundant_token_share":0.250)"), std::string::npos) << all;
  EXPECT_NE(all.find(R"("slowest":[{"id":"b")"), std::string::npos) << all;
  o.by = replay::group_by::model;
  const auto by_model = replay::analyze(traces.records, o);
  EXPECT_NE(by_model.find(R"("group":"m1","requests":2)"), std::string::npos);
  EXPECT_NE(by_model.find(R"("group":"m2","requests":1)"), std::string::npos);
  // The binary: text output and a warning for the bad line, exit 0.
  const auto r = run({"analyze", dir + "/t.jsonl", "--by", "model"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("== m1: 2 requests"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("1 malformed lines skipped"), std::string::npos);
  EXPECT_NE(r.err.find("not a valid trace record"), std::string::npos);
}

TEST(Replay, BinaryServesATraceFile) {
  recording rec;
  const auto original = rec.send(streamed());
  process p({"replay", "serve", "--trace", files_in(rec.dir)[0], "--listen", "127.0.0.1:0"});
  const auto line = p.wait_for_line("ready ", std::chrono::seconds(10));
  ASSERT_FALSE(line.empty()) << p.err();
  const auto colon = line.find(':', line.find("replay="));
  const tcp::endpoint ep(boost::asio::ip::make_address("127.0.0.1"),
                         static_cast<unsigned short>(std::stoi(line.substr(colon + 1))));
  EXPECT_EQ(fetch(ep, streamed()).body, original.body);
  p.signal(SIGTERM);
  EXPECT_EQ(p.wait(std::chrono::seconds(10)), 0);
}

}  // namespace
}  // namespace tokentap::test

namespace tokentap::test {
namespace {

// An incident replays with its failures: a stream the upstream reset is cut where the recording
// was cut, with the same bytes and then a reset, never a clean end; a 503 is recorded as an
// upstream error; `replay send` tells the failures it reproduced from new ones.
TEST(Replay, FailuresReplayAsTheyWereRecorded) {
  recording rec;
  auto reset = streamed();
  reset.body = chat_body(true, "reset me");
  reset.headers.push_back({"x-sim-reset-after", "5"});
  const auto original_reset = rec.send(reset);
  ASSERT_FALSE(original_reset.complete);  // the live client saw the stream break
  auto unavailable = streamed();
  unavailable.body = chat_body(true, "unavailable");
  unavailable.headers.push_back({"x-sim-status", "503"});
  const auto original_503 = rec.send(unavailable);
  ASSERT_EQ(original_503.status, 503u);
  auto fine = streamed();
  fine.body = chat_body(true, "fine");
  rec.send(fine);

  auto traces = replay::read_traces(files_in(rec.dir));
  ASSERT_EQ(traces.records.size(), 3u);
  std::map<std::string, std::string> outcome;  // by request body
  for (const auto& r : traces.records) outcome[r.body.value_or("")] = r.outcome;
  EXPECT_EQ(outcome[reset.body], "upstream_reset");
  EXPECT_EQ(outcome[unavailable.body], "upstream_error");  // never "ok"
  EXPECT_EQ(outcome[fine.body], "ok");

  replay::serve_options so;
  so.port = 0;
  replay::replay_server server(traces.records, so);
  server.start();
  const auto replayed_reset = fetch(server.endpoint(), reset);
  EXPECT_FALSE(replayed_reset.complete) << "a recorded reset replayed as a clean end";
  EXPECT_EQ(replayed_reset.body, original_reset.body);  // the same bytes, up to the cut
  const auto replayed_503 = fetch(server.endpoint(), unavailable);
  EXPECT_EQ(replayed_503.status, 503u);
  EXPECT_TRUE(replayed_503.complete);
  EXPECT_TRUE(fetch(server.endpoint(), fine).complete);

  // replay send against the replayed upstream: the reset and the 503 fail as recorded, nothing
  // fails anew, exit status 0; against a target that refuses, the good one fails anew.
  const auto file = files_in(rec.dir)[0];
  const auto target = "http://127.0.0.1:" + std::to_string(server.endpoint().port());
  auto r = run({"replay", "send", "--trace", file, "--target", target, "--concurrency", "1"},
               std::chrono::seconds(30));
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("3 requests, 2 failed (2 as recorded, 0 anew)"), std::string::npos) << r.out;
  for (const auto& rec_ : traces.records) {
    if (rec_.outcome == "ok") continue;
    const auto at = r.out.find("failed as recorded  " + rec_.id + "  recorded: " + rec_.outcome);
    EXPECT_NE(at, std::string::npos) << rec_.id << "\n" << r.out;
  }
  EXPECT_NE(r.out.find("recorded: upstream_reset  replayed: upstream_reset"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("recorded: upstream_error, status 503  replayed: status 503"),
            std::string::npos)
      << r.out;
  // One record by its id (as the dashboard's slowest requests name it).
  std::string reset_id;
  for (const auto& rec_ : traces.records)
    if (rec_.outcome == "upstream_reset") reset_id = rec_.id;
  r = run({"replay", "send", "--trace", file, "--id", reset_id, "--target", target},
          std::chrono::seconds(30));
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("1 requests, 1 failed (1 as recorded, 0 anew)"), std::string::npos) << r.out;
  r = run({"analyze", file, "--id", "0123456789abcdef"});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("no trace record with id 0123456789abcdef found in " + file),
            std::string::npos)
      << r.err;
  r = run({"analyze", file, "--id", reset_id, "--format", "json"});
  EXPECT_EQ(r.status, 0);
  EXPECT_EQ(replay::parse_record(r.out.substr(0, r.out.find('\n')))->id, reset_id) << r.out;
  r = run({"replay", "send", "--trace", file, "--target",
           "http://127.0.0.1:" + std::to_string(closed_port()), "--concurrency", "1"},
          std::chrono::seconds(30));
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.out.find("3 requests, 3 failed (2 as recorded, 1 anew)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("failed anew        "), std::string::npos) << r.out;
}

// A stream the proxy timed out replays as a stall until the recorded end, then a cut; one the
// client left replays cut where the client left: the recorded bytes, never a terminal chunk.
TEST(Replay, AStallAndALeftClientReplayAsTheyEnded) {
  recording rec([](config::config& cfg) { cfg.timeouts.idle = std::chrono::milliseconds(300); });
  auto stalled = streamed();
  stalled.body = chat_body(true, "stall me");
  stalled.headers.push_back({"x-sim-stall-after", "3"});
  stalled.headers.push_back({"x-sim-stall-ms", "5000"});
  const auto original_stall = rec.send(stalled);
  ASSERT_FALSE(original_stall.complete);
  request_options left;
  left.body = chat_body(true, "leave me");
  left.headers = {{"x-sim-ttft-ms", "20"}, {"x-sim-itl-ms", "20"}, {"x-sim-tokens", "200"}};
  {
    // The client waits 250 ms into a 4 s stream, then goes.
    connection c(rec.s.proxy_ep());
    c.send_raw(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\ncontent-type: "
        "application/json\r\nx-sim-ttft-ms: 20\r\nx-sim-itl-ms: 20\r\nx-sim-tokens: "
        "200\r\ncontent-length: " +
        std::to_string(left.body.size()) + "\r\n\r\n" + left.body);
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
    c.close();
  }
  for (int i = 0; i < 300 && replay::read_traces(files_in(rec.dir)).records.size() < 2; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));

  auto traces = replay::read_traces(files_in(rec.dir));
  ASSERT_EQ(traces.records.size(), 2u);
  std::map<std::string, replay::record> by_body;
  for (const auto& r : traces.records) by_body[r.body.value_or("")] = r;
  const auto& timed_out = by_body[stalled.body];
  const auto& client_left = by_body[left.body];
  EXPECT_EQ(timed_out.outcome, "timeout");
  EXPECT_EQ(client_left.outcome, "client_disconnect");
  EXPECT_EQ(replay::end_of(timed_out), replay::recorded_end::stall);
  EXPECT_EQ(replay::end_of(client_left), replay::recorded_end::cut);
  auto bytes_of = [](const replay::record& r) {
    std::string b;
    for (const auto& e : r.events) b += e.bytes;
    return b;
  };

  replay::serve_options so;
  so.port = 0;
  replay::replay_server server(traces.records, so);
  server.start();
  auto patient = [](request_options o) {
    o.timeout = std::chrono::milliseconds(10000);
    return o;
  };
  const auto asked = std::chrono::steady_clock::now();
  const auto replayed_stall = fetch(server.endpoint(), patient(stalled));
  const double took_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - asked).count();
  EXPECT_FALSE(replayed_stall.complete);
  EXPECT_EQ(replayed_stall.body, bytes_of(timed_out));
  // Silent after the last recorded read, until the recorded end of the exchange.
  ASSERT_FALSE(timed_out.events.empty());
  EXPECT_GT(timed_out.e2e_ms, timed_out.events.back().t_us / 1000.0 + 250);
  EXPECT_GE(took_ms, timed_out.e2e_ms - 5);
  const auto replayed_left = fetch(server.endpoint(), patient(left));
  EXPECT_FALSE(replayed_left.complete);
  EXPECT_EQ(replayed_left.body, bytes_of(client_left));
  EXPECT_FALSE(replayed_left.body.empty());
}

TEST(ReplaySend, ReissuesRecordedRequestsAndComparesPercentiles) {
  recording rec;
  for (int i = 0; i < 4; ++i) {
    auto o = streamed();
    o.body = chat_body(true, "question " + std::to_string(i));
    rec.send(o);
  }
  const auto file = files_in(rec.dir)[0];
  const auto report = temp_dir() + "/report.json";
  // Against the same simulator (directly): the same requests, so similar numbers.
  const auto target = "http://127.0.0.1:" + std::to_string(rec.s.sim_ep().port());
  auto r = run({"replay", "send", "--trace", file, "--target", target, "--concurrency", "2",
                "--report", report, "--header", "Authorization: Bearer sk-new"},
               std::chrono::seconds(30));
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("recorded p50 / p95 / p99"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("4 requests, 0 failed (0 as recorded, 0 anew)"), std::string::npos) << r.out;
  std::ifstream in(report);
  const std::string json((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(json.find(R"("requests":4,"failed":0)"), std::string::npos) << json;
  // TTFT replayed at the simulator's 60 ms (measured like the proxy measures it).
  const auto k = json.find(R"("ttft_ms":{"recorded":{"p50":)");
  ASSERT_NE(k, std::string::npos);
  const auto rep = json.find(R"("replayed":{"p50":)", k);
  const double replayed_ttft = std::atof(json.c_str() + rep + 18);
  EXPECT_NEAR(replayed_ttft, 60, 15) << json.substr(k, 200);
  // A target that refuses: non-zero exit, failures listed.
  r = run({"replay", "send", "--trace", file, "--target",
           "http://127.0.0.1:" + std::to_string(closed_port()), "--rate", "100"},
          std::chrono::seconds(30));
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.out.find("4 requests, 4 failed (0 as recorded, 4 anew)"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace tokentap::test

namespace tokentap::test {
namespace {

TEST(Analyze, CompareAndExport) {
  const auto dir = temp_dir();
  {
    std::ofstream a(dir + "/a.jsonl"), b(dir + "/b.jsonl");
    a << fixture_line("a1", "m", 100, 1000, "ok", 100, 0, "miss", 2) << "\n"
      << fixture_line("a2", "m", 100, 1000, "ok", 100, 0, "miss", 2) << "\n";
    b << fixture_line("b1", "m", 150, 1500, "ok", 100, 0, "miss", 2) << "\n"
      << fixture_line("b2", "m", 150, 1500, "ok", 100, 0, "miss", 2) << "\n";
  }
  auto r = run({"analyze", "--compare", dir + "/a.jsonl", dir + "/b.jsonl"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("+50.0%"), std::string::npos) << r.out;  // TTFT and e2e grew by half
  EXPECT_NE(r.out.find("output length 0.0000, step kinds 0.0000"), std::string::npos) << r.out;
  // Shifted distributions score above zero, identical ones zero.
  EXPECT_NEAR(replay::kl_divergence({{"x", 10}, {"y", 10}}, {{"x", 10}, {"y", 10}}), 0, 1e-12);
  EXPECT_GT(replay::kl_divergence({{"x", 19}, {"y", 1}}, {{"x", 10}, {"y", 10}}), 0.3);
  r = run({"analyze", dir + "/a.jsonl", "--export", "csv"});
  EXPECT_EQ(r.status, 0);
  EXPECT_EQ(
      r.out.rfind("id,start,offset_ms,model,input_tokens,output_tokens,ttft_ms,e2e_ms,itl_ms\n", 0),
      0u);
  EXPECT_NE(r.out.find("a1,2026-11-29T10:00:00.000000Z,0.000,m,100,10,100.000,1000.000,"),
            std::string::npos)
      << r.out;
  r = run({"analyze", dir + "/b.jsonl", "--export", "aiperf"});
  EXPECT_NE(r.out.find(R"({"timestamp":0,"input_length":100,"output_length":10})"),
            std::string::npos)
      << r.out;
}

TEST(Analyze, ExportCarriesTheRecordedItlList) {
  recording rec;
  rec.send(streamed());
  const auto r = run({"analyze", files_in(rec.dir)[0], "--export", "csv"});
  ASSERT_EQ(r.status, 0);
  const auto row = r.out.substr(r.out.find('\n') + 1);
  // 30 token events: 29 gaps of ~20 ms, separated by ';'.
  EXPECT_EQ(std::count(row.begin(), row.end(), ';'), 28) << row;
}

}  // namespace
}  // namespace tokentap::test
