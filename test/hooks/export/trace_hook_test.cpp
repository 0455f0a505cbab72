// The trace hook in a chain: what a record holds and leaves out (bodies, sampling, the record's
// budget, the response text per channel), whatever the hooks' order.
#include "hooks/export/trace_hook.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "hooks/hook_chain.hpp"
#include "hooks/observe/timing_hook.hpp"
#include "hooks/registry.hpp"
#include "test/hooks/chain_helpers.hpp"
#include "test/support/tls_cert.hpp"

namespace tokentap::hooks {
namespace {

using namespace chain_test;

std::vector<std::string> trace_lines(const config::config& cfg, int exchanges) {
  {
    hook_chain_factory f(cfg, builtin_hooks().build(cfg));
    for (int i = 0; i < exchanges; ++i) {
      auto tap = f.create();
      request_view r = request(0);
      r.body = R"({"messages":[{"role":"user","content":"private prompt"}]})";
      tap->on_request(r);
      tap->on_response_head({200, "text/event-stream", "", 1, {}});
      const std::string b = chunk("content", "private answer");
      tap->on_body({b.data(), b.size()}, {2, 2, 3});
      tap->on_stream_end(stream_outcome::ok, 4);
    }
  }  // the writer flushes on destruction
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(cfg.trace.dir)) {
    std::ifstream in(e.path());
    for (std::string l; std::getline(in, l);) out.push_back(l);
  }
  return out;
}

TEST(TraceHook, BodiesCanBeSwitchedOff) {
  config::config cfg;
  cfg.trace.dir = test::temp_dir();
  cfg.trace.bodies = false;
  const auto lines = trace_lines(cfg, 1);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0].find("private prompt"), std::string::npos);
  EXPECT_NE(lines[0].find("\"body\":null"), std::string::npos);
  EXPECT_NE(lines[0].find("\"text\":null"), std::string::npos);
  // The raw reads are still recorded: replay needs them (switch tracing off to drop them too).
  EXPECT_NE(lines[0].find("\"events\":[{\"t_us\":"), std::string::npos);
}

// Hooks before and after the trace hook see the whole stream_info, and the record is the same
// either way.
TEST(TraceHook, HooksBeforeAndAfterTheTraceSeeTheWholeInfoAndTheRecordIsTheSame) {
  std::string record[2];
  for (const bool trace_last : {true, false}) {
    config::config cfg;
    cfg.trace.dir = test::temp_dir();
    auto cap = std::make_shared<capture_factory>();
    {
      std::vector<std::shared_ptr<hook_factory>> hooks = {std::make_shared<timing_hook_factory>()};
      auto trace = std::make_shared<trace_hook_factory>(cfg.trace);
      hooks.push_back(trace_last ? std::shared_ptr<hook_factory>(cap) : trace);
      hooks.push_back(trace_last ? std::shared_ptr<hook_factory>(trace) : cap);
      hook_chain_factory f(cfg, hooks);
      stream_two_tokens(f);
    }  // the writer flushes on destruction
    // What the timing hook added, as the capture saw it: one gap between the two tokens.
    EXPECT_EQ(cap->summary.timing.itl.count, 1u);
    EXPECT_EQ(cap->summary.timing.itl_values_ms.size(), 1u);
    EXPECT_EQ(cap->summary.status, 200u);
    std::vector<std::string> lines;
    for (const auto& e : std::filesystem::directory_iterator(cfg.trace.dir)) {
      std::ifstream in(e.path());
      for (std::string l; std::getline(in, l);) lines.push_back(l);
    }
    ASSERT_EQ(lines.size(), 1u);
    const auto from = lines[0].find("\"route\"");  // past the id and the wall-clock start
    ASSERT_NE(from, std::string::npos);
    record[trace_last ? 0 : 1] = lines[0].substr(from);
    EXPECT_NE(record[trace_last ? 0 : 1].find("\"itl_values_ms\":[0.000]"), std::string::npos)
        << lines[0];
  }
  EXPECT_EQ(record[0], record[1]);
}

TEST(TraceHook, SampleRateRecordsAFraction) {
  config::config cfg;
  cfg.trace.dir = test::temp_dir();
  cfg.trace.sample_rate = 0.25;
  const auto n = trace_lines(cfg, 800).size();
  EXPECT_GT(n, 120u);  // 200 expected; far outside a binomial's spread otherwise
  EXPECT_LT(n, 280u);
  cfg.trace.dir = test::temp_dir();
  cfg.trace.sample_rate = 0;
  EXPECT_EQ(trace_lines(cfg, 50).size(), 0u);
}

TEST(TraceHook, RecordsAreCappedAndMarkedTruncated) {
  config::config cfg;
  cfg.trace.dir = test::temp_dir();
  cfg.trace.max_record_bytes = 100;
  const auto lines = trace_lines(cfg, 1);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("\"truncated\":true"), std::string::npos) << lines[0];
}

// The response text: pieces from several reads joined per channel, both channels interleaved,
// escapes, UTF-8; past the record's budget the text is cut (what fitted is kept) and the record
// marked truncated.
const std::vector<std::string>& text_reads() {
  static const std::vector<std::string> reads = {
      chunk("reasoning_content", "First, ") + chunk("content", "He"),
      chunk("reasoning_content", "think\\n") + chunk("content", "llo \\\"w\u00e9"),
      chunk("content", "rld\\\"") + chunk("reasoning_content", "done, at length."),
  };
  return reads;
}

std::string traced_text(std::size_t max_record_bytes) {
  config::config cfg;
  cfg.trace.dir = test::temp_dir();
  cfg.trace.max_record_bytes = max_record_bytes;
  {
    hook_chain_factory f(cfg, builtin_hooks().build(cfg));
    auto tap = f.create();
    tap->on_request(request(0));
    tap->on_response_head({200, "text/event-stream", "", 1, {}});
    mono_ns t = 10'000;
    for (const auto& b : text_reads()) {
      tap->on_body({b.data(), b.size()}, {t, t, t + 1});
      t += 10'000;
    }
    tap->on_stream_end(stream_outcome::ok, t);
  }
  std::string line;
  for (const auto& e : std::filesystem::directory_iterator(cfg.trace.dir)) {
    std::ifstream in(e.path());
    std::getline(in, line);
  }
  return line;
}

TEST(TraceHook, ResponseTextIsJoinedPerChannelAndCutAtTheBudget) {
  const auto whole = traced_text(1 << 20);
  EXPECT_NE(whole.find("\"text\":{\"content\":\"Hello \\\"w\u00e9rld\\\"\","
                       "\"reasoning\":\"First, think\\ndone, at length.\"}"),
            std::string::npos)
      << whole;
  EXPECT_NE(whole.find("\"truncated\":false"), std::string::npos);
  // Room for the first read (it needs its size + 64, is charged its size + 32) and 160 bytes:
  // the later reads do not fit, the texts up to the last one do — each is charged what it takes
  // in the event log (a 16-byte header and its bytes rounded up to 16: 32 for each of these).
  const auto cut = traced_text(text_reads()[0].size() + 32 + 5 * 32);
  EXPECT_NE(cut.find("\"truncated\":true"), std::string::npos) << cut;
  EXPECT_NE(cut.find("\"text\":{\"content\":\"Hello \\\"w\u00e9rld\\\"\","
                     "\"reasoning\":\"First, think\\n\"}"),
            std::string::npos)
      << cut;
  EXPECT_NE(cut.find("\"events\":[{\"t_us\":10,\"raw\":"), std::string::npos) << cut;
  EXPECT_EQ(cut.find("},{\"t_us\""), std::string::npos) << "one read only: " << cut;
}

// ---- trace writer

}  // namespace
}  // namespace tokentap::hooks
