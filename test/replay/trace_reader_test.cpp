// The trace reader reads a record the same whatever the order of its keys (sorted, reversed,
// shuffled): Python or jq pipelines that rewrite trace files reorder them.
#include "replay/trace_reader.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "test/support/json_keys.hpp"
#include "test/support/trace_record_text.hpp"

namespace tokentap::replay {
namespace {

// A record with every field the reader takes, as the trace writer writes it.
const std::string full_record =
    R"({"v":1,"id":"00000000deadbeef","start":"2026-11-29T18:19:05.123456Z","route":"chat",)"
    R"("provider":"openai-chat","model":"m","request":{"method":"POST","path":"/v1/chat/completions",)"
    R"("headers":{"authorization":"[redacted]","content-type":"application/json","x-a":"1"},"body":"{\"model\":\"m\"}"},)"
    R"("response":{"status":200,"headers":{"content-type":"text/event-stream","x-b":"2"}},"outcome":"ok",)"
    R"("error":{"type":"overloaded","message":"m"},"finish_reason":"stop","choices":2,)"
    R"("by_choice":[{"index":0,"token_events":2,"finish_reason":"stop"},{"index":1,"token_events":1,"finish_reason":"length"}],)"
    R"("timing":{"ttft_ms":12.5,"ttft_answer_ms":20,"e2e_ms":100,"upstream_headers_ms":3,"decode_ms":80,"tpot_ms":40,)"
    R"("tokens_per_s":25,"itl_ms":{"p50":5,"p95":9,"p99":10,"max":12,"n":3},"overhead_ms":{"p50":0.01,"p95":0.02,"p99":0.03,"max":0.04,"n":3},)"
    R"("stalls":1,"itl_values_ms":[5,9,10]},"usage":{"input_tokens":10,"output_tokens":3,"reasoning_tokens":1,"cached_input_tokens":4,"cache_write_tokens":null},)"
    R"("text":{"content":"ab","reasoning":"r"},"events":[{"t_us":1,"raw":"data: x\n\n"},{"raw_b64":"/w==","t_us":2}],)"
    R"("truncated":false,"parse_errors":{"framing":0,"json":0,"oversize":0},)"
    R"("steps":[{"offset":0,"channel":"reasoning","kind":"step","t_us":1,"duration_us":1,"tokens":2,"redundant":false}],)"
    R"("redundant_tokens":1,"cache":[{"event":"hit","cached_tokens":4}]})";

TEST(TraceReader, ReadsEveryField) {
  const auto r = parse_record(full_record);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->start_us, 1795976345123456);
  EXPECT_EQ(r->choices, 2);
  ASSERT_EQ(r->events.size(), 2u);
  EXPECT_EQ(r->events[1].bytes, "\xff");
  EXPECT_EQ(r->request_headers.size(), 3u);
  EXPECT_EQ(r->itl_values_ms.size(), 3u);
  EXPECT_EQ(r->cache.size(), 1u);
}

TEST(TraceReader, KeyOrderDoesNotMatter) {
  const auto want = test::describe(*parse_record(full_record));
  for (const auto order :
       {test::key_order::sorted, test::key_order::reversed, test::key_order::shuffled}) {
    for (std::uint64_t seed = 1; seed <= 5; ++seed) {
      const auto line = test::reorder_keys(full_record, order, seed);
      ASSERT_NE(line, full_record);
      const auto r = parse_record(line);
      ASSERT_TRUE(r.has_value()) << line;
      EXPECT_EQ(test::describe(*r), want) << line;
    }
  }
}

// Both encodings of one read: the exact bytes (base64) win, whichever comes first.
TEST(TraceReader, RawAndBase64InOneEventIsTheBase64) {
  for (const char* e :
       {R"({"t_us":1,"raw":"x","raw_b64":"/w=="})", R"({"raw_b64":"/w==","raw":"x","t_us":1})"}) {
    const auto r = parse_record(
        std::string(
            R"({"v":1,"start":"2026-11-29T18:19:05.000000Z","request":{"method":"GET"},"events":[)") +
        e + "]}");
    ASSERT_TRUE(r.has_value());
    ASSERT_EQ(r->events.size(), 1u);
    EXPECT_EQ(r->events[0].bytes, "\xff");
  }
}

// A directory stands for its .jsonl files, in name order; one without any is a warning.
TEST(TraceReader, ADirectoryIsItsTraceFilesInNameOrder) {
  namespace fs = std::filesystem;
  const auto dir = fs::temp_directory_path() / ("trace_reader_test-" + std::to_string(::getpid()));
  fs::create_directories(dir / "empty");
  const auto with_id = [](const std::string& id) {
    std::string line = full_record;
    return line.replace(line.find("00000000deadbeef"), 16, id);
  };
  std::ofstream(dir / "tokentap-2.jsonl") << with_id("second") << "\n";
  std::ofstream(dir / "tokentap-1.jsonl") << with_id("first") << "\n";
  std::ofstream(dir / "notes.txt") << "not a trace\n";
  const auto r = read_traces({dir.string(), (dir / "empty").string()});
  ASSERT_EQ(r.records.size(), 2u);
  EXPECT_EQ(r.records[0].id, "first");
  EXPECT_EQ(r.records[1].id, "second");
  EXPECT_EQ(r.skipped, 1u);
  ASSERT_EQ(r.warnings.size(), 1u);
  EXPECT_NE(r.warnings[0].find("no .jsonl trace files"), std::string::npos) << r.warnings[0];
  fs::remove_all(dir);
}

}  // namespace
}  // namespace tokentap::replay
