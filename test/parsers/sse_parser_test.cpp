// The SSE framer against the WHATWG rules, the web-platform-tests eventsource/format-* cases and
// verbatim provider streams (../shared/reference/sse-formats.md), each fed whole, split at every
// byte offset, byte by byte and in random chunks.
#include "parsers/sse_parser.hpp"

#include <gtest/gtest.h>

#include "test/support/chunking.hpp"

namespace tokentap::parsers {
namespace {

using namespace std::string_literals;

struct recorder : sse_handler {
  std::string out;
  void on_event(const sse_event& e) noexcept override {
    out += "[type=" + std::string(e.type) + " id=" + std::string(e.id) +
           " data=" + std::string(e.data) + "]\n";
  }
  void on_oversize(std::size_t, std::int64_t) noexcept override { out += "[oversize]\n"; }
};

// Feeds chunks to a fresh parser; transcript = events, then retry and whether EOF cut an event.
std::string run(const std::vector<std::string_view>& chunks, std::size_t max = 1 << 20) {
  sse_parser p(max);
  recorder r;
  for (auto c : chunks) p.feed(c, 0, r);
  r.out += "retry=" + std::to_string(p.retry_ms());
  r.out += p.finish() ? " cut" : " clean";
  return r.out;
}

std::string grind_sse(std::string_view input, std::size_t max = 1 << 20) {
  return test::grind(input, [max](const auto& c) { return run(c, max); });
}

std::string ev(std::string data, std::string type = "", std::string id = "") {
  return "[type=" + type + " id=" + id + " data=" + data + "]\n";
}

// ---- web-platform-tests eventsource/format-*.any.js (default message.py appends "\n\n\n")

TEST(SseWpt, FormatBom) {
  EXPECT_EQ(grind_sse("\xEF\xBB\xBF"
                      "data:1\n\n\xEF\xBB\xBF"
                      "data:2\n\ndata:3\n\n\n"),
            ev("1") + ev("3") + "retry=-1 clean");
}

TEST(SseWpt, FormatBom2) {
  EXPECT_EQ(grind_sse("\xEF\xBB\xBF\xEF\xBB\xBF"
                      "data:1\n\ndata:2\n\ndata:3\n\n\n"),
            ev("2") + ev("3") + "retry=-1 clean");
}

TEST(SseWpt, FormatBomSplitAcrossReads) {
  EXPECT_EQ(run({"\xEF",
                 "\xBB\xBF"
                 "data:1\n\ndata:2\n\n"}),
            ev("1") + ev("2") + "retry=-1 clean");
  EXPECT_EQ(run({"\xEF\xBB", "\xBF", "data:1\n\n"}), ev("1") + "retry=-1 clean");
}

TEST(SseWpt, FormatBomUtf16IsAnUnknownField) {
  EXPECT_EQ(grind_sse("\xFF\xFE"
                      "data:1\n\ndata:2\n\n\n"),
            ev("2") + "retry=-1 clean");
}

TEST(SseWpt, FormatComments) {
  const std::string x(2048, 'x');
  const std::string in =
      "data:1\r:\0\n:\r\ndata:2\n:"s + x + "\rdata:3\n:data:fail\r:" + x + "\ndata:4\n\n";
  EXPECT_EQ(grind_sse(in), ev("1\n2\n3\n4") + "retry=-1 clean");
}

TEST(SseWpt, FormatDataBeforeFinalEmptyLine) {
  EXPECT_EQ(grind_sse("retry:1000\ndata:test1\n\nid:test\ndata:test2\n"),
            ev("test1") + "retry=1000 cut");
}

TEST(SseWpt, FormatFieldData) {
  EXPECT_EQ(grind_sse("data:\n\ndata\ndata\n\ndata:test\n\n\n"),
            ev("") + ev("\n") + ev("test") + "retry=-1 clean");
}

TEST(SseWpt, FormatFieldEvent) {
  EXPECT_EQ(grind_sse("event:test\ndata:x\n\ndata:x\n\n\n"),
            ev("x", "test") + ev("x") + "retry=-1 clean");
  EXPECT_EQ(grind_sse("event: \ndata:data\n\n\n"), ev("data") + "retry=-1 clean");
}

TEST(SseWpt, FormatFieldId) {
  EXPECT_EQ(grind_sse("id: \xE2\x80\xA6\ndata:1\n\ndata:2\n\n"),
            ev("1", "", "\xE2\x80\xA6") + ev("2", "", "\xE2\x80\xA6") + "retry=-1 clean");
  // id persists; `id:` resets; bare `id` resets.
  EXPECT_EQ(grind_sse("id: 1\ndata: 1\n\ndata:2\n\nid:\ndata:3\n\nid: 4\ndata:4\n\nid\ndata:5\n\n"),
            ev("1", "", "1") + ev("2", "", "1") + ev("3") + ev("4", "", "4") + ev("5") +
                "retry=-1 clean");
}

TEST(SseWpt, FormatFieldIdNullIsIgnored) {
  for (const std::string& v : {"\0\0"s, "x\0"s, "\0x"s, "x\0x"s, " \0"s}) {
    EXPECT_EQ(grind_sse("id:" + v + "\ndata:a\n\n"), ev("a") + "retry=-1 clean");
  }
}

TEST(SseWpt, FormatFieldParsing) {
  const std::string in =
      "data:\0\ndata:  2\rData:1\ndata\0:2\ndata:1\r\n\0data:4\nda-ta:3\rdata_5\ndata:3\rdata:\r\n data:32\ndata:4\n\n"s;
  EXPECT_EQ(grind_sse(in), ev("\0\n 2\n1\n3\n\n4"s) + "retry=-1 clean");
}

TEST(SseWpt, FormatFieldRetry) {
  EXPECT_EQ(grind_sse("retry:03000\ndata:x\n\n"), ev("x") + "retry=3000 clean");
  EXPECT_EQ(grind_sse("retry:3000\nretry:1000x\ndata:x\n\n"), ev("x") + "retry=3000 clean");
  EXPECT_EQ(grind_sse("retry\ndata:test\n\n"), ev("test") + "retry=-1 clean");
  EXPECT_EQ(grind_sse("retry: 500\nretry:\ndata:x\n\n"), ev("x") + "retry=500 clean");
}

TEST(SseWpt, FormatFieldUnknown) {
  EXPECT_EQ(
      grind_sse(
          "data:test\n data\ndata\nfoobar:xxx\njustsometext\n:thisisacommentyay\ndata:test\n\n"),
      ev("test\n\ntest") + "retry=-1 clean");
}

TEST(SseWpt, FormatLeadingSpace) {
  EXPECT_EQ(grind_sse("data:\ttest\rdata: \ndata:test\n\n"),
            ev("\ttest\n\ntest") + "retry=-1 clean");
}

TEST(SseWpt, FormatNewlines) {
  EXPECT_EQ(grind_sse("data:test\r\ndata\ndata:test\r\n\r\n"),
            ev("test\n\ntest") + "retry=-1 clean");
  EXPECT_EQ(run({"data:test\r\ndata\ndata:test\r\n\r", "\n"}),
            ev("test\n\ntest") + "retry=-1 clean");
}

TEST(SseWpt, FormatNullCharacter) {
  EXPECT_EQ(grind_sse("data:\0\n\n"s), ev("\0"s) + "retry=-1 clean");
}

TEST(SseWpt, FormatUtf8) {
  EXPECT_EQ(grind_sse("data:ok\xE2\x80\xA6\n\n"), ev("ok\xE2\x80\xA6") + "retry=-1 clean");
}

TEST(SseWpt, EventDataBlocksWithOnlyUnknownFieldsAreNotDispatched) {
  EXPECT_EQ(
      grind_sse("data:msg\ndata: "
                "msg\n\n:\nfalsefield:msg\n\nfalsefield:msg\nData:data\n\ndata\n\ndata:end\n\n"),
      ev("msg\nmsg") + ev("") + ev("end") + "retry=-1 clean");
}

// ---- the spec's own examples

TEST(SseSpec, ExampleStream) {
  EXPECT_EQ(
      grind_sse(": test stream\n\ndata: first event\nid: 1\n\ndata:second event\nid\n\ndata:  "
                "third event\n\n"),
      ev("first event", "", "1") + ev("second event") + ev(" third event") + "retry=-1 clean");
}

TEST(SseSpec, TrailingBlockWithoutBlankLineIsDiscarded) {
  EXPECT_EQ(grind_sse("data\n\ndata\ndata\n\ndata:"), ev("") + ev("\n") + "retry=-1 cut");
  EXPECT_EQ(grind_sse("data: [DONE]\n"), "retry=-1 cut");
  EXPECT_EQ(grind_sse("data: [DONE]\r"), "retry=-1 cut");
}

// ---- pitfalls other projects shipped

TEST(SsePitfalls, UnicodeLineSeparatorsAreData) {
  EXPECT_EQ(grind_sse("data: {\"t\":\"a\xE2\x80\xA8"
                      "b\xE2\x80\xA9"
                      "c\xC2\x85"
                      "d\x0B\x0C"
                      "e\"}\n\n"),
            ev("{\"t\":\"a\xE2\x80\xA8"
               "b\xE2\x80\xA9"
               "c\xC2\x85"
               "d\x0B\x0C"
               "e\"}") +
                "retry=-1 clean");
}

TEST(SsePitfalls, MixedLineEndingsAndBlankRuns) {
  EXPECT_EQ(grind_sse("data: first\n\r\ndata: second\r\r\n\n\n\ndata: third\r\n\r\n"),
            ev("first") + ev("second") + ev("third") + "retry=-1 clean");
}

// Line ends are found 16 and 32 bytes at a time: each kind of line end at every position of
// those blocks (and of the last block, read overlapping the one before), beside bytes that
// differ from CR and LF in one bit or only in the high bit.
TEST(SsePitfalls, LineEndsAtEveryPositionOfAScanBlock) {
  const std::string near = "\x0B\x0C\x0E\x8A\x8D\x09\xFF";
  for (const std::string eol : {"\n", "\r", "\r\n"}) {
    for (std::size_t n = 0; n <= 70; ++n) {
      std::string first, second;
      for (std::size_t i = 0; i < n; ++i) first.push_back(near[i % near.size()]);
      for (std::size_t i = 0; i < (n * 7) % 41; ++i)
        second.push_back(static_cast<char>('a' + i % 26));
      const std::string input = "data:" + first + eol + "data:" + second + eol + eol;
      ASSERT_EQ(grind_sse(input), ev(first + "\n" + second) + "retry=-1 clean")
          << "line of " << n << " bytes, eol " << static_cast<int>(eol[0]);
    }
  }
}

TEST(SsePitfalls, KeepAliveCommentsAndMetaOnlyBlocks) {
  EXPECT_EQ(
      grind_sse(": OPENROUTER PROCESSING\n\nretry: 3000\n\nid: 7\n\n: ping\n\ndata: {\"x\":1}\n\n"),
      ev("{\"x\":1}", "", "7") + "retry=3000 clean");
}

TEST(SsePitfalls, DataWithoutSpaceAndColonsInValue) {
  EXPECT_EQ(grind_sse("data:{\"token\":{\"text\":\"a:b\"}}\n\n"),
            ev("{\"token\":{\"text\":\"a:b\"}}") + "retry=-1 clean");
}

// ---- verbatim provider streams

TEST(SseProviders, OpenAIChatStream) {
  const std::string in =
      R"(data: {"id":"chatcmpl-CVFjOTBIgA3kuQLnIXXxtg7Ge7hbs","object":"chat.completion.chunk","created":1761564674,"model":"gpt-3.5-turbo-0125","service_tier":"default","system_fingerprint":null,"choices":[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}],"usage":null,"obfuscation":"kSx18"})"
      "\n\n"
      R"(data: {"id":"chatcmpl-CVFjOTBIgA3kuQLnIXXxtg7Ge7hbs","object":"chat.completion.chunk","created":1761564674,"model":"gpt-3.5-turbo-0125","service_tier":"default","system_fingerprint":null,"choices":[{"index":0,"delta":{"content":"Hi"},"logprobs":null,"finish_reason":null}],"usage":null,"obfuscation":"Gpkah"})"
      "\n\ndata: [DONE]\n\n";
  const auto out = grind_sse(in);
  EXPECT_NE(out.find(R"("delta":{"content":"Hi"})"), std::string::npos);
  EXPECT_NE(out.find("data=[DONE]]"), std::string::npos);
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 3);
}

TEST(SseProviders, AnthropicMessagesStream) {
  const std::string in =
      "event: message_start\ndata: {\"type\": \"message_start\", \"message\": {\"id\": \"msg_1\", "
      "\"usage\": {\"input_tokens\": 25, \"output_tokens\": 1}}}\n\n"
      "event: ping\ndata: {\"type\": \"ping\"}\n\n"
      "event: content_block_delta\ndata: {\"type\": \"content_block_delta\", \"index\": 0, "
      "\"delta\": {\"type\": \"text_delta\", \"text\": \"Hello\"}}\n\n"
      "event: error\ndata: {\"type\": \"error\", \"error\": {\"type\": \"overloaded_error\", "
      "\"message\": \"Overloaded\"}}\n\n";
  const auto out = grind_sse(in);
  EXPECT_NE(out.find("[type=message_start id= data={\"type\": \"message_start\""),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("[type=ping id= data={\"type\": \"ping\"}]"), std::string::npos);
  EXPECT_NE(out.find("[type=error id= data="), std::string::npos);
}

// ---- bounds

TEST(SseLimits, OversizedEventIsSkippedAndTheStreamKeepsFlowing) {
  const std::string big(300, 'x');
  const auto out = grind_sse("data: a\n\ndata: " + big + "\ndata: more\n\ndata: b\n\n", 128);
  EXPECT_EQ(out, ev("a") + "[oversize]\n" + ev("b") + "retry=-1 clean");
  // An oversized line split over many reads, and an oversized multi-line event.
  std::string many;
  for (int i = 0; i < 40; ++i) many += "data: 0123456789\n";
  EXPECT_EQ(grind_sse("data: a\n\n" + many + "\ndata: b\n\n", 128),
            ev("a") + "[oversize]\n" + ev("b") + "retry=-1 clean");
}

// Found by fuzz_sse (test/fuzz/regressions/sse-long-line-cap-split): a line longer than the cap
// that is not a data line (here a JSON document sent where an event stream was announced) was
// skipped as oversized only when it arrived in pieces.  The cap applies to every line alike.
TEST(SseLimits, LongNonDataLineIsCappedTheSameWhateverTheSplit) {
  const std::string doc = "{\"id\":\"chatcmpl-1\",\"choices\":[" + std::string(200, ' ') + "]}\n";
  EXPECT_EQ(grind_sse(doc, 64), "[oversize]\nretry=-1 cut");
  EXPECT_EQ(grind_sse(": " + std::string(100, 'c') + "\n\ndata: ok\n\n", 64),
            "[oversize]\n" + ev("ok") + "retry=-1 clean");
}

TEST(SseLimits, TimestampIsThatOfTheReadCompletingTheEvent) {
  struct stamps : sse_handler {
    std::vector<std::int64_t> t;
    void on_event(const sse_event& e) noexcept override { t.push_back(e.t_ns); }
  } h;
  sse_parser p;
  p.feed("data: one\n\ndata: tw", 100, h);
  p.feed("o\n", 200, h);
  p.feed("\n", 300, h);
  EXPECT_EQ(h.t, (std::vector<std::int64_t>{100, 300}));
  EXPECT_EQ(p.events(), 2u);
}

TEST(SseLimits, ParserIsReusableAfterFinish) {
  sse_parser p;
  recorder r;
  p.feed("\xEF\xBB\xBFid: 1\ndata: a", 0, r);
  EXPECT_TRUE(p.finish());
  p.feed(
      "\xEF\xBB\xBF"
      "data: b\n\n",
      0, r);
  EXPECT_EQ(r.out, ev("b"));  // new stream: BOM stripped again, id reset
}

// ---- NDJSON

struct lines : ndjson_handler {
  std::string out;
  void on_line(std::string_view l, std::int64_t) noexcept override {
    out += "<" + std::string(l) + ">";
  }
  void on_oversize(std::size_t, std::int64_t) noexcept override { out += "<oversize>"; }
};

std::string run_ndjson(const std::vector<std::string_view>& chunks, std::size_t max = 1 << 20) {
  ndjson_framer f(max);
  lines l;
  for (auto c : chunks) f.feed(c, 0, l);
  f.finish(0, l);
  return l.out;
}

TEST(Ndjson, OllamaStream) {
  const std::string in =
      "{\"model\":\"llama3\",\"message\":{\"role\":\"assistant\",\"content\":\"Hi\"},\"done\":"
      "false}\n"
      "\r\n\n"
      "{\"model\":\"llama3\",\"message\":{\"role\":\"assistant\",\"content\":\"\\u2028!\"},"
      "\"done\":false}\r\n"
      "{\"done\":true,\"eval_count\":2}";
  EXPECT_EQ(test::grind(in, [](const auto& c) { return run_ndjson(c); }),
            "<{\"model\":\"llama3\",\"message\":{\"role\":\"assistant\",\"content\":\"Hi\"},"
            "\"done\":false}>"
            "<{\"model\":\"llama3\",\"message\":{\"role\":\"assistant\",\"content\":\"\\u2028!\"},"
            "\"done\":false}>"
            "<{\"done\":true,\"eval_count\":2}>");
}

TEST(Ndjson, OversizedLineIsSkipped) {
  const std::string in = "{\"a\":1}\n" + std::string(100, 'x') + "\n{\"b\":2}\n";
  EXPECT_EQ(test::grind(in, [](const auto& c) { return run_ndjson(c, 32); }),
            "<{\"a\":1}><oversize><{\"b\":2}>");
}

}  // namespace
}  // namespace tokentap::parsers
