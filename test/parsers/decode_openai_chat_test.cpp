// The OpenAI Chat Completions decoder (and llama.cpp's native stream) on verbatim streams from
// ../shared/reference/sse-formats.md §3a, and the engine's own account of its time where an engine
// reports one (vLLM's metrics object, llama.cpp's timings, TGI's headers), each fed every way
// decode_everywhere.hpp feeds a body.
#include "parsers/stream_decoder.hpp"

#include <gtest/gtest.h>

#include "test/parsers/decode_everywhere.hpp"

namespace tokentap::parsers {
namespace {

using namespace std::string_literals;

// ---- OpenAI Chat Completions (reference §3a, verbatim)

TEST(OpenAIDecoder, TextStreamWithUsageChunk) {
  EXPECT_EQ(
      decode(openai_text_stream, provider::openai_chat),
      "content=Hi there|reasoning=|tool=|finish(stop)|in=10 out=5 reasoning=0 cached=0 write=-1 "
      "cache_fields=1|provider=openai-chat|id=chatcmpl-CVFjOTBIgA3kuQLnIXXxtg7Ge7hbs "
      "model=gpt-3.5-turbo-0125");
}

TEST(OpenAIDecoder, ToolCallArgumentsAreTheToolChannel) {
  const std::string s =
      R"(data: {"id":"chatcmpl-A","object":"chat.completion.chunk","created":1727895263,"model":"gpt-4o-mini-2024-07-18","system_fingerprint":"fp_f85bea6784","choices":[{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_F9ZaqPWo69u0urxAhVt8meDW","type":"function","function":{"name":"GetPersonAge","arguments":""}}],"refusal":null},"logprobs":null,"finish_reason":null}],"usage":null})"
      "\n\n"
      R"(data: {"id":"chatcmpl-A","object":"chat.completion.chunk","created":1727895263,"model":"gpt-4o-mini-2024-07-18","system_fingerprint":"fp_f85bea6784","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\""}}]},"logprobs":null,"finish_reason":null}],"usage":null})"
      "\n\n"
      R"(data: {"id":"chatcmpl-A","object":"chat.completion.chunk","created":1727895263,"model":"gpt-4o-mini-2024-07-18","system_fingerprint":"fp_f85bea6784","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"personName\":\"Alice\"}"}}]},"logprobs":null,"finish_reason":null}],"usage":null})"
      "\n\n"
      R"(data: {"id":"chatcmpl-A","object":"chat.completion.chunk","created":1727895263,"model":"gpt-4o-mini-2024-07-18","system_fingerprint":"fp_f85bea6784","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"tool_calls"}],"usage":null})"
      "\n\n"
      R"(data: {"id":"chatcmpl-A","object":"chat.completion.chunk","created":1727895263,"model":"gpt-4o-mini-2024-07-18","system_fingerprint":"fp_f85bea6784","choices":[],"usage":{"prompt_tokens":61,"completion_tokens":16,"total_tokens":77,"prompt_tokens_details":{"cached_tokens":0},"completion_tokens_details":{"reasoning_tokens":0}}})"
      "\n\n"
      "data: [DONE]\n\n";
  EXPECT_EQ(decode(s, provider::openai_chat),
            "content=|reasoning=|tool={\"personName\":\"Alice\"}|finish(tool_calls)|in=61 out=16 "
            "reasoning=0 "
            "cached=0 write=-1 cache_fields=1|provider=openai-chat|id=chatcmpl-A "
            "model=gpt-4o-mini-2024-07-18");
}

TEST(OpenAIDecoder, DeepSeekReasoningAndCacheFieldsOnTheFinishChunk) {
  const std::string s =
      R"(data: {"id":"ccf32be6-ad2f-4658-963a-fc3c22346e6b","object":"chat.completion.chunk","created":1761725211,"model":"deepseek-reasoner","system_fingerprint":"fp_ffc7281d48_prod0820_fp8_kvcache","choices":[{"index":0,"delta":{"content":null,"reasoning_content":"在"},"logprobs":null,"finish_reason":null}]})"
      "\n\n"
      R"(data: {"id":"bc36e2d4","object":"chat.completion.chunk","created":1742647075,"model":"deepseek-chat","choices":[{"index":0,"delta":{"content":"好"},"logprobs":null,"finish_reason":null}]})"
      "\n\n"
      R"(data: {"id":"bc36e2d4-53bc-42e5-b62d-e14e5afaa23a","object":"chat.completion.chunk","created":1742647075,"model":"deepseek-chat","system_fingerprint":"fp_3a5770e1b4_prod0225","choices":[{"index":0,"delta":{"content":""},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":8,"completion_tokens":54,"total_tokens":62,"prompt_tokens_details":{"cached_tokens":0},"prompt_cache_hit_tokens":0,"prompt_cache_miss_tokens":8}})"
      "\n\n";
  EXPECT_EQ(decode(s, provider::openai_chat),
            "content=好|reasoning=在|tool=|finish(stop)|in=8 out=54 reasoning=1 cached=0 write=-1 "
            "cache_fields=1|provider=openai-chat|id=ccf32be6-ad2f-4658-963a-fc3c22346e6b "
            "model=deepseek-reasoner");
}

TEST(OpenAIDecoder, VllmReasoningFieldNullChoicesAndErrorsInA200Stream) {
  const std::string s =
      "data: {\"choices\":[{\"index\":0,\"delta\":{\"reasoning\":\"think\"}}]}\n\n"
      "data: {\"choices\":null,\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":1}}\n\n"
      "data: {\"error\":{\"message\":\"context length "
      "exceeded\",\"type\":\"invalid_request_error\",\"code\":400}}\n\n"
      "data: [DONE]\n\n";
  EXPECT_EQ(decode(s, provider::openai_chat),
            "content=|reasoning=think|tool=|error(invalid_request_error,context length "
            "exceeded)|in=3 out=1 "
            "reasoning=1 cached=-1 write=-1 cache_fields=0|provider=openai-chat");
}

TEST(OpenAIDecoder, ThinkTagsInContentAreReasoningEvenWhenSplit) {
  const std::string s =
      "data: {\"choices\":[{\"delta\":{\"content\":\"<thi\"}}]}\n\n"
      "data: {\"choices\":[{\"delta\":{\"content\":\"nk>First, 2<3\"}}]}\n\n"
      "data: {\"choices\":[{\"delta\":{\"content\":\". So yes.</th\"}}]}\n\n"
      "data: {\"choices\":[{\"delta\":{\"content\":\"ink>Answer: <b>yes</b>\"}}]}\n\n";
  EXPECT_EQ(decode(s, provider::openai_chat),
            "content=Answer: <b>yes</b>|reasoning=First, 2<3. So yes.|tool=||in=-1 out=3 "
            "reasoning=2 cached=-1 "
            "write=-1 cache_fields=0|provider=openai-chat");
}

// A partial tag held back at the end of the content is text after all.
TEST(OpenAIDecoder, APartialThinkTagAtTheEndIsText) {
  const std::string s =
      "data: {\"choices\":[{\"delta\":{\"content\":\"<think>x</thi\"}}]}\n\n"
      "data: {\"choices\":[{\"delta\":{\"content\":\"nk>a<th\"}}]}\n\n";
  EXPECT_EQ(decode(s, provider::openai_chat),
            "content=a<th|reasoning=x|tool=||in=-1 out=3 reasoning=1 cached=-1 write=-1 "
            "cache_fields=0|provider=openai-chat");
}

// vLLM's continuous_usage_stats: every chunk carries the usage so far; after each chunk's
// tokens the decoder reports the output count (the same in both walks, whatever the key order;
// `usage` before or after `choices`), so a chunk of several tokens can be told from one.
TEST(OpenAIDecoder, ContinuousUsageReportsTheOutputSoFarAfterEachChunksTokens) {
  const std::string s =
      R"(data: {"choices":[{"index":0,"delta":{"role":"assistant","content":""}}],"usage":{"prompt_tokens":5,"completion_tokens":0}})"
      "\n\n"
      R"(data: {"usage":{"prompt_tokens":5,"completion_tokens":3},"choices":[{"index":0,"delta":{"content":"a b c"}}]})"
      "\n\n"
      R"(data: {"choices":[{"index":0,"delta":{"content":" d"}}],"usage":{"prompt_tokens":5,"completion_tokens":4}})"
      "\n\n"
      R"(data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":4}})"
      "\n\n"
      "data: [DONE]\n\n";
  decode(s, provider::openai_chat);  // every split, both walks, every key order
  for (const bool fast : {true, false}) {
    std::string sequence;
    run({s}, provider::openai_chat, "text/event-stream", 1 << 20, fast, &sequence);
    EXPECT_NE(sequence.find("output(0)token(content,a b c)output(3)token(content, d)output(4)"
                            "finish(stop)output(4)"),
              std::string::npos)
        << sequence;
  }
}

TEST(OpenAIDecoder, LlamaCppTimingsAndLegacyErrorField) {
  const std::string s =
      "data: "
      "{\"choices\":[{\"delta\":{\"content\":\"ok\"}}],\"timings\":{\"cache_n\":236,\"prompt_n\":1,"
      "\"prompt_ms\":30.9,\"predicted_n\":35,\"predicted_ms\":661.0}}\n\n"
      ": ping\n\n"
      "error: {\"code\":400,\"message\":\"the request exceeds the available context "
      "size\",\"type\":\"invalid_request_error\"}\n\n"
      "data: [DONE]\n\n";
  EXPECT_EQ(decode(s, provider::openai_chat),
            "content=ok|reasoning=|tool=|error(invalid_request_error,the request exceeds the "
            "available context "
            "size)|in=237 out=35 reasoning=0 cached=236 write=-1 cache_fields=1|provider=llamacpp"
            "|engine=llama.cpp queue=-1 load=-1 prefill=30.9 decode=661 inference=-1 invalid=0");
}

TEST(OpenAIDecoder, NonStreamingBody) {
  const std::string s =
      R"({"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"Hello!","reasoning_content":"Greet."},"finish_reason":"stop"}],"usage":{"prompt_tokens":9,"completion_tokens":12,"prompt_tokens_details":{"cached_tokens":8},"completion_tokens_details":{"reasoning_tokens":2}}})";
  EXPECT_EQ(decode(s, provider::openai_chat, "application/json"),
            "content=Hello!|reasoning=Greet.|tool=|finish(stop)|in=9 out=12 reasoning=2 cached=8 "
            "write=-1 "
            "cache_fields=1|provider=openai-chat|id=x model=");
}

TEST(LlamaCppDecoder, NativeCompletionStream) {
  const std::string s =
      "data: {\"content\":\"Hel\",\"tokens\":[1],\"stop\":false}\n\n"
      "data: {\"content\":\"lo\",\"tokens\":[2],\"stop\":false}\n\n"
      "data: "
      "{\"content\":\"\",\"stop\":true,\"stop_type\":\"eos\",\"tokens_cached\":40,\"tokens_"
      "evaluated\":12,"
      "\"timings\":{\"cache_n\":40,\"prompt_n\":12,\"prompt_ms\":5.1,\"predicted_n\":2,\"predicted_"
      "ms\":20.0}}\n\n";
  EXPECT_EQ(decode(s, provider_from_path("/completion")),
            "content=Hello|reasoning=|tool=|finish(eos)|in=52 out=2 reasoning=0 cached=40 write=-1 "
            "cache_fields=1"
            "|provider=llamacpp|engine=llama.cpp queue=-1 load=-1 prefill=5.1 decode=20 "
            "inference=-1 invalid=0");
}

// ---- The engine's own account of its time (DESIGN.md §13)

// vLLM with --enable-per-request-metrics: a `metrics` object on the final usage chunk, its
// time_to_first_token_ms counted from scheduling (prefill).
TEST(EngineAccount, VllmMetricsObjectOnTheUsageChunk) {
  const std::string s =
      R"(data: {"id":"cmpl-1","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":null}]})"
      "\n\n"
      R"(data: {"id":"cmpl-1","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]})"
      "\n\n"
      R"(data: {"id":"cmpl-1","object":"chat.completion.chunk","model":"m","choices":[],"usage":{"prompt_tokens":2048,"completion_tokens":1,"prompt_tokens_details":{"cached_tokens":1920}},"metrics":{"queue_time_ms":180.25,"time_to_first_token_ms":40.5,"generation_time_ms":1801,"mean_itl_ms":12.0,"tokens_per_second":55.1}})"
      "\n\n"
      "data: [DONE]\n\n";
  EXPECT_EQ(decode(s, provider::openai_chat),
            "content=Hi|reasoning=|tool=|finish(stop)|in=2048 out=1 reasoning=0 cached=1920 "
            "write=-1 cache_fields=1|provider=openai-chat|id=cmpl-1 model=m"
            "|engine=vllm queue=180.25 load=-1 prefill=40.5 decode=1801 inference=-1 invalid=0");
}

// A hostile engine: negative, huge, NaN-like, wrong types.  Each such value is not reported and
// counted; null is just not reported; good values beside them are kept.
TEST(EngineAccount, ValuesThatAreNoDurationAreCountedNeverTaken) {
  const std::string s =
      R"(data: {"choices":[{"delta":{"content":"a"}}],"metrics":{"queue_time_ms":-5,"time_to_first_token_ms":"12","generation_time_ms":null}})"
      "\n\n"
      R"(data: {"choices":[],"metrics":{"queue_time_ms":1e300,"time_to_first_token_ms":[1],"generation_time_ms":7.5}})"
      "\n\n"
      R"(data: {"choices":[],"metrics":17,"timings":{"prompt_ms":true,"predicted_ms":{"x":1}}})"
      "\n\n";
  EXPECT_EQ(decode(s, provider::openai_chat),
            "content=a|reasoning=|tool=||in=-1 out=1 reasoning=0 cached=-1 write=-1 "
            "cache_fields=0|provider=llamacpp"
            "|engine=llama.cpp queue=-1 load=-1 prefill=-1 decode=7.5 inference=-1 invalid=6");
  // Ollama's nanoseconds, one of them negative.
  const std::string ollama =
      R"({"model":"m","response":"x","done":true,"load_duration":-1,"prompt_eval_duration":2000000,"eval_duration":"9"})"
      "\n";
  EXPECT_EQ(decode(ollama, provider::ollama, "application/x-ndjson"),
            "content=x|reasoning=|tool=||in=-1 out=1 reasoning=0 cached=-1 write=-1 "
            "cache_fields=0|provider=ollama|id= model=m"
            "|engine=ollama queue=-1 load=-1 prefill=2 decode=-1 inference=-1 invalid=2");
}

// A stream that says nothing of the engine's time has no account.
TEST(EngineAccount, NoFieldsNoAccount) {
  stream_decoder d(provider::openai_chat, "text/event-stream");
  test::decoder_transcript t;
  d.feed(openai_text_stream, 0, t);
  d.finish(0, t);
  EXPECT_FALSE(d.engine().reported());
  EXPECT_EQ(d.engine().invalid, 0u);
}

TEST(EngineAccount, HeaderDurations) {
  EXPECT_EQ(engine_header_ms("12"), 12);
  EXPECT_EQ(engine_header_ms(" 7 "), 7);
  EXPECT_EQ(engine_header_ms("0.25"), 0.25);
  EXPECT_EQ(engine_header_ms(""), -1);
  EXPECT_EQ(engine_header_ms("-3"), -1);
  EXPECT_EQ(engine_header_ms("12ms"), -1);
  EXPECT_EQ(engine_header_ms("nan"), -1);
  EXPECT_EQ(engine_header_ms("1e12"), -1);
}

}  // namespace
}  // namespace tokentap::parsers
