// What holds for every provider's decoder: key order carries no meaning, several choices keep
// their texts apart, malformed, oversized and truncated input is counted and skipped, an unknown
// stream is recognized by its shape, a chat chunk touches few lines of state, and the simulator's
// output decodes to exactly what it generated.
#include "parsers/stream_decoder.hpp"

#include <gtest/gtest.h>

#include <set>

#include "sim/generator.hpp"
#include "test/parsers/decode_everywhere.hpp"

namespace tokentap::parsers {
namespace {

using namespace std::string_literals;

// ---- key order: the defects a stream with sorted or re-serialized keys showed

// The reorderer the property tests rely on: members trade places at every depth, separators
// and whitespace stay put, objects with a repeated key and invalid JSON are left alone.
TEST(KeyOrder, TheReordererMovesMembersAndKeepsEveryByte) {
  const std::string doc = R"({"b":1, "a":{"d":[{"y":2,"x":3}],"c":"\u0041"} ,"e":null})";
  EXPECT_EQ(test::reorder_keys(doc, test::key_order::sorted),
            R"({"a":{"c":"\u0041","d":[{"x":3,"y":2}]}, "b":1 ,"e":null})");
  EXPECT_EQ(test::reorder_keys(doc, test::key_order::reversed),
            R"({"e":null, "a":{"c":"\u0041","d":[{"x":3,"y":2}]} ,"b":1})");
  EXPECT_EQ(test::reorder_keys(R"({"a":1,"\u0061":2})", test::key_order::reversed),
            R"({"a":1,"\u0061":2})");
  EXPECT_EQ(test::reorder_keys(R"({"b":1,"a":tru})", test::key_order::sorted),
            R"({"b":1,"a":tru})");
  EXPECT_EQ(
      test::reorder_stream_keys("event: x\r\ndata: {\"b\":1,\"a\":2}\r\n\r\n: {\"b\":1,\"a\":2}\n",
                                test::key_order::sorted),
      "event: x\r\ndata: {\"a\":2,\"b\":1}\r\n\r\n: {\"b\":1,\"a\":2}\n");
}

// A Responses stream whose "type" comes after "delta" and "response" (Go's sorted maps, re-
// serializing gateways) lost every token, the usage and the finish reason.
TEST(KeyOrder, ResponsesEventsWithTheTypeLast) {
  const std::string s =
      "event: response.output_text.delta\ndata: "
      R"({"content_index":0,"delta":"Hel","item_id":"msg_1","output_index":0,"sequence_number":4,"type":"response.output_text.delta"})"
      "\n\n"
      "event: response.output_text.delta\ndata: "
      R"({"delta":"lo","type":"response.output_text.delta"})"
      "\n\n"
      "event: response.completed\ndata: "
      R"({"response":{"id":"resp_1","status":"completed","usage":{"input_tokens":13,"input_tokens_details":{"cached_tokens":4},"output_tokens":2,"output_tokens_details":{"reasoning_tokens":0}}},"sequence_number":9,"type":"response.completed"})"
      "\n\n";
  EXPECT_EQ(decode(s, provider::openai_responses),
            "content=Hello|reasoning=|tool=|finish(completed)|in=13 out=2 reasoning=0 cached=4 "
            "write=-1 cache_fields=1|provider=openai-responses|id=resp_1 model=");
  // Without the path's help the stream is still recognized, with Python's ", " / ": " spacing.
  const std::string python =
      "data: {\"delta\": \"Hi\", \"type\": \"response.output_text.delta\"}\n\n";
  EXPECT_EQ(decode(python, provider::unknown),
            "content=Hi|reasoning=|tool=||in=-1 out=1 reasoning=0 cached=-1 write=-1 "
            "cache_fields=0|provider=openai-responses");
}

// A TGI stream whose last event has "generated_text" before "token" counted the answer twice.
TEST(KeyOrder, TgiLastEventWithTheGeneratedTextFirst) {
  const std::string s =
      R"(data:{"generated_text":null,"token":{"id":1,"text":"Hel","special":false},"details":null})"
      "\n\n"
      R"(data:{"details":{"finish_reason":"length","generated_tokens":2,"input_length":5},"generated_text":"Hello","index":2,"token":{"id":2,"logprob":-1,"special":false,"text":"lo"}})"
      "\n\n";
  EXPECT_EQ(decode(s, provider::tgi),
            "content=Hello|reasoning=|tool=|finish(length)|in=5 out=2 reasoning=0 cached=-1 "
            "write=-1 cache_fields=0|provider=tgi");
  // A non-streamed /generate body is its generated_text.
  EXPECT_EQ(decode(R"({"details":{"generated_tokens":1},"generated_text":"Hi"})", provider::tgi,
                   "application/json"),
            "content=Hi|reasoning=|tool=||in=-1 out=1 reasoning=0 cached=-1 write=-1 "
            "cache_fields=0|provider=tgi");
}

// An Anthropic non-streamed message with "content" before "type", a message_delta with the
// usage first, and an error event with "type" after its "error".
TEST(KeyOrder, AnthropicWholeMessageAndEventsWithTheTypeLast) {
  EXPECT_EQ(
      decode(
          R"({"content":[{"thinking":"Hmm.","type":"thinking"},{"text":"Hi!","type":"text"}],"stop_reason":"end_turn","type":"message","usage":{"cache_read_input_tokens":8,"input_tokens":2,"output_tokens":5}})",
          provider::anthropic, "application/json"),
      "content=Hi!|reasoning=Hmm.|tool=|finish(end_turn)|in=10 out=5 reasoning=1 cached=8 "
      "write=-1 cache_fields=1|provider=anthropic");
  EXPECT_EQ(
      decode(
          "event: message_delta\ndata: "
          R"({"usage":{"output_tokens":7},"delta":{"stop_sequence":null,"stop_reason":"max_tokens"},"type":"message_delta"})"
          "\n\nevent: error\ndata: "
          R"({"error":{"message":"Overloaded","type":"overloaded_error"},"type":"error"})"
          "\n\n",
          provider::anthropic),
      "content=|reasoning=|tool=|finish(max_tokens)error(overloaded_error,Overloaded)|in=-1 "
      "out=7 reasoning=0 cached=-1 write=-1 cache_fields=0|provider=anthropic");
}

// vLLM versions that send "reasoning" and "reasoning_content" with the same text: one token.
// DeepSeek's two cached fields: prompt_tokens_details wins whatever comes first.  An "error":
// null is no error; a code without a type names the error.
TEST(KeyOrder, OneMeaningForFieldsThatSayTheSame) {
  EXPECT_EQ(
      decode(
          "data: {\"choices\":[{\"delta\":{\"reasoning\":\"r\",\"reasoning_content\":\"r\"}}]}\n\n"
          "data: {\"error\":null,\"choices\":[],\"usage\":{\"prompt_cache_hit_tokens\":3,"
          "\"prompt_tokens\":9,\"prompt_tokens_details\":{\"cached_tokens\":4}}}\n\n"
          "data: {\"error\":{\"code\":\"overloaded\",\"message\":\"busy\"}}\n\n",
          provider::openai_chat),
      "content=|reasoning=r|tool=|error(overloaded,busy)|in=9 out=1 reasoning=1 cached=4 "
      "write=-1 cache_fields=1|provider=openai-chat");
}

// ---- several choices (n > 1)

// Two choices interleaved: each one's text and tokens stay apart (the transcript's "choice 1"),
// `index` may come after the delta, and each choice has its own <think> span.
TEST(Choices, InterleavedChoicesKeepTheirTexts) {
  const std::string s =
      R"(data: {"choices":[{"index":0,"delta":{"content":"<think>a"}}]})"
      "\n\n"
      R"(data: {"choices":[{"delta":{"content":"x"},"index":1}]})"
      "\n\n"
      R"(data: {"choices":[{"index":0,"delta":{"content":"</think>A"}}]})"
      "\n\n"
      R"(data: {"choices":[{"index":1,"delta":{"content":"y"},"finish_reason":"length"},{"index":0,"delta":{"content":"B"},"finish_reason":"stop"}]})"
      "\n\n"
      R"(data: {"choices":[],"usage":{"prompt_tokens":4,"completion_tokens":5}})"
      "\n\ndata: [DONE]\n\n";
  EXPECT_EQ(decode(s, provider::openai_chat),
            "content=xAyB|reasoning=a|tool=|finish@1(length)finish(stop)|in=4 out=5 reasoning=1 "
            "cached=-1 write=-1 cache_fields=0|provider=openai-chat|choice 1=content:x|content:y|");
}

// The shape fast path keeps the choice a chunk's text belongs to.
TEST(Choices, ChunksReadByTheirShapeKeepTheirChoice) {
  std::string s;
  for (int i = 0; i < 6; ++i)
    s += R"(data: {"id":"c","choices":[{"index":)" + std::to_string(i / 3) +
         R"(,"delta":{"content":"t)" + std::to_string(i) + R"("}}]})" + "\n\n";
  EXPECT_EQ(
      decode(s, provider::openai_chat),
      "content=t0t1t2t3t4t5|reasoning=|tool=||in=-1 out=6 reasoning=0 cached=-1 write=-1 "
      "cache_fields=0|provider=openai-chat|choice 1=content:t3|content:t4|content:t5||id=c model=");
}

// ---- robustness

TEST(DecoderRobustness, MalformedJsonUnknownEventsAndInvalidUtf8AreCountedAndSkipped) {
  const std::string s =
      "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n"
      "data: {\"choices\":[{\"delta\":{\"content\":\n\n"
      "data: not json at all\n\n"
      "data: {\"choices\":[{\"delta\":{\"content\":\"\xff\xfe\"}}]}\n\n"
      "event: mystery\ndata: {\"whatever\":true}\n\n"
      "data: {\"choices\":[{\"delta\":{\"content\":\"b\"}}]}\n\n";
  EXPECT_EQ(
      decode(s, provider::openai_chat),
      "content=ab|reasoning=|tool=|parse_error(json)parse_error(json)parse_error(json)|in=-1 out=2 "
      "reasoning=0 cached=-1 write=-1 cache_fields=0|provider=openai-chat");
}

// Keys are compared as written when they have no escapes; a key spelled with escapes is the
// same key.  Invalid UTF-8 in a field the decoder never reads still rejects the payload.
TEST(DecoderRobustness, EscapedKeysAreTheSameKeysAndInvalidUtf8AnywhereIsAnError) {
  const std::string s =
      "data: {\"cho\\u0069ces\":[{\"delta\":{\"con\\u0074ent\":\"a\"}}]}\n\n"
      "data: {\"id\":\"x\\\"y\",\"choices\":[{\"delta\":{\"content\":\"b\"}}]}\n\n"
      "data: {\"id\":\"\xc3\x28\",\"choices\":[{\"delta\":{\"content\":\"x\"}}]}\n\n"
      "data: {\"choices\":[{\"delta\":{\"content\\\\\":\"y\",\"content\":\"c\"}}]}\n\n";
  EXPECT_EQ(decode(s, provider::openai_chat),
            "content=abc|reasoning=|tool=|parse_error(json)|in=-1 out=3 "
            "reasoning=0 cached=-1 write=-1 cache_fields=0|provider=openai-chat|id=x\"y model=");
}

TEST(DecoderRobustness, TenMegabyteEventIsSkippedAndDecodingResumes) {
  std::string s = "data: {\"choices\":[{\"delta\":{\"content\":\"before\"}}]}\n\n";
  s +=
      "data: {\"choices\":[{\"delta\":{\"content\":\"" + std::string(10u << 20, 'x') + "\"}}]}\n\n";
  s += "data: {\"choices\":[{\"delta\":{\"content\":\" after\"}}]}\n\n";
  stream_decoder d(provider::openai_chat, "text/event-stream", 1 << 20);
  test::decoder_transcript t;
  for (std::size_t i = 0; i < s.size(); i += 16384)
    d.feed(std::string_view(s).substr(i, 16384), 0, t);
  d.finish(0, t);
  EXPECT_EQ(t.text[0], "before after");
  EXPECT_EQ(t.log, "parse_error(oversize)");
}

TEST(DecoderRobustness, TruncatedStreamIsReported) {
  EXPECT_EQ(
      decode("data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\ndata: {\"choi",
             provider::openai_chat),
      "content=a|reasoning=|tool=|parse_error(framing)|in=-1 out=1 reasoning=0 cached=-1 write=-1 "
      "cache_fields=0|provider=openai-chat");
}

TEST(DecoderRobustness, ProviderIsRecognizedFromTheStreamWhenThePathSaysNothing) {
  EXPECT_NE(decode(openai_text_stream, provider::unknown).find("provider=openai-chat"),
            std::string::npos);
  EXPECT_NE(decode("event: message_start\ndata: "
                   "{\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":3}}}\n\n",
                   provider::unknown)
                .find("provider=anthropic"),
            std::string::npos);
  // Every format, by its first payload (an error object first names none: the next one does).
  const auto sniffed = [](std::string_view body, std::string_view content_type) {
    const auto out = decode(body, provider::unknown, content_type);
    const auto at = out.rfind("provider=") + 9;
    return out.substr(at, out.find('|', at) - at);
  };
  EXPECT_EQ(sniffed("event: response.created\ndata: {\"type\":\"response.created\","
                    "\"response\":{\"id\":\"r\"}}\n\n",
                    "text/event-stream"),
            "openai-responses");
  EXPECT_EQ(sniffed("{\"error\":\"busy\"}\n{\"model\":\"m\",\"message\":{\"content\":\"a\"},"
                    "\"done\":false}\n",
                    "application/x-ndjson"),
            "ollama");
  EXPECT_EQ(
      sniffed("data: {\"token\":{\"text\":\"a\",\"special\":false}}\n\n", "text/event-stream"),
      "tgi");
  EXPECT_EQ(sniffed("data: {\"content\":\"a\",\"stop\":false}\n\n", "text/event-stream"),
            "llamacpp");
  EXPECT_EQ(sniffed("data: {\"error\":{\"message\":\"x\"}}\n\n", "text/event-stream"), "unknown");
  // Paths: the first format with a matching ending (Ollama's /api/generate before TGI's
  // /generate).
  EXPECT_EQ(provider_from_path("/v1/chat/completions"), provider::openai_chat);
  EXPECT_EQ(provider_from_path("/v1/completions"), provider::openai_chat);
  EXPECT_EQ(provider_from_path("/openai/v1/responses"), provider::openai_responses);
  EXPECT_EQ(provider_from_path("/v1/messages"), provider::anthropic);
  EXPECT_EQ(provider_from_path("/api/chat"), provider::ollama);
  EXPECT_EQ(provider_from_path("/api/generate"), provider::ollama);
  EXPECT_EQ(provider_from_path("/generate_stream"), provider::tgi);
  EXPECT_EQ(provider_from_path("/generate"), provider::tgi);
  EXPECT_EQ(provider_from_path("/completion"), provider::llamacpp);
  EXPECT_EQ(provider_from_path("/v1/embeddings"), provider::unknown);
  // Every value has its own name (the metric label).
  std::set<std::string_view> names;
  const int count = static_cast<int>(provider::unknown);
  for (int i = 0; i < count; ++i)
    EXPECT_TRUE(names.insert(to_string(static_cast<provider>(i))).second) << i;
  EXPECT_EQ(names.size(), static_cast<std::size_t>(count));
  EXPECT_EQ(names.count("unknown"), 0u);
}

// A stream that ends holding a possible `<think>` prefix ("a <"): the prefix is text, timed when
// its delta arrived — not at the stream's end (which made the last token, decode time and TPOT
// of llama.cpp answers ending in "<" too late).
TEST(StreamDecoder, AHeldTagPrefixAtTheEndKeepsItsDeltasTime) {
  struct timed : test::decoder_transcript {
    std::vector<std::pair<std::string, std::int64_t>> tokens_at;
    void on_token(channel ch, std::string_view t, std::int64_t at,
                  std::uint32_t choice) noexcept override {
      decoder_transcript::on_token(ch, t, at, choice);
      tokens_at.emplace_back(std::to_string(choice) + ":" + std::string(t), at);
    }
  } h;
  stream_decoder d(provider::openai_chat, "text/event-stream");
  d.feed("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"x\"}}]}\n\n", 1, h);
  d.feed("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a <\"}}]}\n\n", 5, h);
  d.feed("data: {\"choices\":[{\"index\":1,\"delta\":{\"content\":\"b<thi\"}}]}\n\n", 6, h);
  d.feed("data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n", 7, h);
  d.finish(9, h);
  // (Texts of all choices, in the order they came.)
  EXPECT_EQ(h.text[static_cast<int>(channel::content)], "xa b<<thi");
  const std::vector<std::pair<std::string, std::int64_t>> expected = {
      {"0:x", 1}, {"0:a ", 5}, {"1:b", 6}, {"0:<", 5}, {"1:<thi", 6}};
  EXPECT_EQ(h.tokens_at, expected);
}

// ---- the simulator's output decodes to exactly what it generated

// What the next chat chunk touches (stream_decoder::add_hot_lines, prefetched by the relay with
// hundreds of streams open): three lines of the decoder's state — its own per-event fields and
// the SSE parser's, and the last chunk's shape — besides the shape's bytes.
TEST(StreamDecoderPerf, AChatChunkTouchesThreeLinesOfStateBesideTheShapesBytes) {
  const std::string chunk =
      R"(data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1761564674,"model":"m","choices":[{"index":0,"delta":{"content":"Hi"},"logprobs":null,"finish_reason":null}]})"
      "\n\n";
  stream_decoder d(provider::openai_chat, "text/event-stream");
  test::decoder_transcript t;
  for (int i = 0; i < 3; ++i) d.feed(chunk, i, t);
  EXPECT_EQ(t.text[0], "HiHiHi");
  hot_lines l;
  d.add_hot_lines(l);
  std::size_t lines = 0;
  l.for_each_line([&](const void*) { ++lines; });
  EXPECT_EQ(l.size(), 3u);
  const std::size_t shape_bytes = chunk.size() - 2;  // at most the chunk, its text aside
  EXPECT_LE(lines, 3 + (shape_bytes + 63) / 64 + 1) << lines;
  EXPECT_GE(lines, 3 + 2u);  // the shape's bytes are listed
}

// A read that is one chat chunk with one text, shaped like the last one, is described exactly:
// where its JSON is, and that it is the shape's bytes around the text's raw bytes.  Anything
// else (two events, an event begun in an earlier read, no text, [DONE], other providers) is not.
TEST(StreamDecoderReadShape, OneChunkPerReadIsTheShapeAroundItsText) {
  auto chunk = [](std::string_view text) {
    return R"({"choices":[{"index":0,"delta":{"content":")" + std::string(text) + R"("}}]})";
  };
  stream_decoder d(provider::openai_chat, "text/event-stream");
  test::decoder_transcript t;
  read_shape s;
  auto feed = [&](const std::string& read) {
    d.feed(read, 0, t);
    return d.last_read_shape(read, s);
  };
  const std::string first = "data: " + chunk("Hi") + "\n\n";
  ASSERT_TRUE(feed(first));  // recorded as the shape: fits it
  const std::string doc = chunk("Hi");
  EXPECT_EQ(s.doc_at, 6u);
  EXPECT_EQ(s.doc_size, doc.size());
  const auto open = doc.find("Hi");
  EXPECT_EQ(s.prefix, open);
  EXPECT_EQ(s.shape, doc.substr(0, open) + doc.substr(open + 2));
  const auto v1 = s.version;

  const std::string crlf = ": ping\r\ndata:" + chunk(R"(a \"b\")") + "\r\n\r\n";
  ASSERT_TRUE(feed(crlf));  // read by the shape: same version
  EXPECT_EQ(s.version, v1);
  EXPECT_EQ(s.doc_at, std::string(": ping\r\ndata:").size());
  const std::string_view raw(crlf.data() + s.doc_at + s.prefix, s.doc_size - s.shape.size());
  EXPECT_EQ(raw, R"(a \"b\")");

  const std::string reasoning =
      "data: " + std::string(R"({"choices":[{"index":0,"delta":{"reasoning_content":"r"}}]})") +
      "\n\n";
  ASSERT_TRUE(feed(reasoning));  // another shape
  EXPECT_NE(s.version, v1);
  EXPECT_EQ(s.shape, R"({"choices":[{"index":0,"delta":{"reasoning_content":""}}]})");

  EXPECT_FALSE(feed("data: " + chunk("a") + "\n\ndata: " + chunk("b") + "\n\n"));  // two events
  const std::string split = "data: " + chunk("split") + "\n\n";
  EXPECT_FALSE(feed(split.substr(0, 20)));  // no event yet
  EXPECT_FALSE(feed(split.substr(20)));     // an event begun in the read before
  EXPECT_FALSE(feed("data: {\"choices\":[],\"usage\":{\"prompt_tokens\":1}}\n\n"));  // no text
  EXPECT_FALSE(feed("data: [DONE]\n\n"));
  EXPECT_FALSE(feed(": keep-alive\n\n"));
  EXPECT_EQ(t.text[0], "Hia \"b\"absplit");

  stream_decoder other(provider::anthropic, "text/event-stream");
  const std::string delta =
      "event: content_block_delta\ndata: "
      R"({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}})"
      "\n\n";
  for (int i = 0; i < 2; ++i) {
    other.feed(delta, 0, t);
    EXPECT_FALSE(other.last_read_shape(delta, s));
  }
}

TEST(SimulatorRoundTrip, EveryFormatDecodesToTheGeneratedText) {
  for (auto kind : {sim::api::openai_chat, sim::api::anthropic_messages, sim::api::ollama_chat,
                    sim::api::ollama_generate}) {
    for (bool stream : {true, false}) {
      sim::params p;
      p.output_tokens = 30;
      p.reasoning_tokens = 9;
      sim::request_shape shape;
      shape.kind = kind;
      shape.stream = stream;
      shape.include_usage = true;
      shape.prompt_chars = 400;
      shape.messages = 2;
      auto plan = sim::make_plan(p, shape);
      const bool ollama = sim::is_ollama(kind);
      if (ollama) sim::add_engine_report(plan, kind, sim::engine_shape::ollama, {2, 30, 87});
      std::string body = plan.body;
      for (const auto& e : plan.events) body += e.bytes;
      const auto prov = kind == sim::api::openai_chat ? provider::openai_chat
                        : ollama                      ? provider::ollama
                                                      : provider::anthropic;
      stream_decoder d(prov, !stream  ? "application/json"
                             : ollama ? "application/x-ndjson"
                                      : "text/event-stream");
      test::decoder_transcript t;
      d.feed(body, 0, t);
      d.finish(0, t);
      SCOPED_TRACE(std::string(to_string(prov)) + (stream ? " stream" : " plain"));
      EXPECT_EQ(t.text[0], plan.content_text);
      EXPECT_EQ(t.text[1], plan.reasoning_text);
      const auto u = d.usage();
      EXPECT_EQ(u.input_tokens, plan.prompt_tokens);
      EXPECT_EQ(u.output_tokens, plan.completion_tokens);
      // Anthropic reports no thinking-token count: a plain message's one thinking block counts 1;
      // Ollama's eval_count holds both, and its thinking is counted by the lines that carry it.
      if (kind == sim::api::anthropic_messages && !stream) {
        EXPECT_EQ(u.reasoning_tokens, 1);
      } else if (!ollama) {
        EXPECT_EQ(u.reasoning_tokens, plan.reasoning_tokens);
      }
      EXPECT_EQ(u.cached_input_tokens, ollama ? -1 : 0);  // Ollama reports no cached count
      if (stream) {
        EXPECT_EQ(d.token_events(channel::content), 30u);
        EXPECT_EQ(d.token_events(channel::reasoning), 9u);
      }
      if (ollama) {
        const auto& e = d.engine();
        EXPECT_DOUBLE_EQ(e.load_ms, 2);
        EXPECT_DOUBLE_EQ(e.prefill_ms, 30);
        EXPECT_DOUBLE_EQ(e.decode_ms, 87);
      }
    }
  }
}

}  // namespace
}  // namespace tokentap::parsers
