// Provider decoders on verbatim streams from ../shared/reference/sse-formats.md and on the
// simulator's own output, each fed whole, at every split, byte by byte and in random chunks.
#include "parsers/stream_decoder.hpp"

#include <gtest/gtest.h>

#include "sim/generator.hpp"
#include "test/support/chunking.hpp"
#include "test/support/decoder_transcript.hpp"
#include "test/support/json_keys.hpp"

namespace tokentap::parsers {
namespace {

using namespace std::string_literals;

std::string run(const std::vector<std::string_view>& chunks, provider p,
                std::string_view content_type, std::size_t max, bool fast_paths,
                std::string* sequence = nullptr) {
  stream_decoder d(p, content_type, max);
  d.set_fast_paths(fast_paths);
  test::decoder_transcript t;
  for (auto c : chunks) d.feed(c, 0, t);
  d.finish(0, t);
  EXPECT_FALSE(t.empty_token);
  if (sequence != nullptr) *sequence = t.sequence;
  return t.describe(d);
}

// Every way of splitting the body gives the same result, and the simdjson-only decoder (fast
// paths off) reports exactly the same calls in the same order.  The same holds for the body with
// the keys of every JSON object sorted, reversed and shuffled (three seeds): key order carries
// no meaning (RFC 8259 §4), and real senders differ in it.
std::string decode(std::string_view body, provider p,
                   std::string_view content_type = "text/event-stream", std::size_t max = 1 << 20) {
  const auto whole = test::grind(body, [&](const std::vector<std::string_view>& chunks) {
    return run(chunks, p, content_type, max, true);
  });
  std::string fast_sequence, reference_sequence;
  EXPECT_EQ(run({body}, p, content_type, max, true, &fast_sequence),
            run({body}, p, content_type, max, false, &reference_sequence));
  EXPECT_EQ(fast_sequence, reference_sequence);
  const std::pair<test::key_order, std::uint64_t> orders[] = {{test::key_order::sorted, 0},
                                                              {test::key_order::reversed, 0},
                                                              {test::key_order::shuffled, 1},
                                                              {test::key_order::shuffled, 2},
                                                              {test::key_order::shuffled, 3}};
  for (const auto& [order, seed] : orders) {
    const auto reordered = test::reorder_stream_keys(body, order, seed);
    SCOPED_TRACE("keys " +
                 std::string(order == test::key_order::sorted     ? "sorted"
                             : order == test::key_order::reversed ? "reversed"
                                                                  : "shuffled") +
                 ", seed " + std::to_string(seed) + ":\n" + reordered);
    EXPECT_EQ(reordered.size(), body.size());
    EXPECT_EQ(test::grind(reordered,
                          [&](const std::vector<std::string_view>& chunks) {
                            return run(chunks, p, content_type, max, true);
                          }),
              whole);
    for (const bool fast : {true, false}) {
      std::string sequence;
      run({reordered}, p, content_type, max, fast, &sequence);
      EXPECT_EQ(sequence, fast_sequence) << (fast ? "fast paths" : "simdjson only");
    }
  }
  return whole;
}

// ---- OpenAI Chat Completions (reference §3a, verbatim)

const std::string openai_text_stream =
    R"(data: {"id":"chatcmpl-CVFjOTBIgA3kuQLnIXXxtg7Ge7hbs","object":"chat.completion.chunk","created":1761564674,"model":"gpt-3.5-turbo-0125","service_tier":"default","system_fingerprint":null,"choices":[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}],"usage":null,"obfuscation":"kSx18"})"
    "\n\n"
    R"(data: {"id":"chatcmpl-CVFjOTBIgA3kuQLnIXXxtg7Ge7hbs","object":"chat.completion.chunk","created":1761564674,"model":"gpt-3.5-turbo-0125","service_tier":"default","system_fingerprint":null,"choices":[{"index":0,"delta":{"content":"Hi"},"logprobs":null,"finish_reason":null}],"usage":null,"obfuscation":"Gpkah"})"
    "\n\n"
    R"(data: {"id":"chatcmpl-CVFjOTBIgA3kuQLnIXXxtg7Ge7hbs","object":"chat.completion.chunk","created":1761564674,"model":"gpt-3.5-turbo-0125","service_tier":"default","system_fingerprint":null,"choices":[{"index":0,"delta":{"content":" there"},"logprobs":null,"finish_reason":null}],"usage":null,"obfuscation":"Gpkah"})"
    "\n\n"
    R"(data: {"id":"chatcmpl-CVFjOTBIgA3kuQLnIXXxtg7Ge7hbs","object":"chat.completion.chunk","created":1761564674,"model":"gpt-3.5-turbo-0125","service_tier":"default","system_fingerprint":null,"choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}],"usage":null,"obfuscation":"a"})"
    "\n\n"
    R"(data: {"id":"chatcmpl-CVFjOTBIgA3kuQLnIXXxtg7Ge7hbs","object":"chat.completion.chunk","created":1761564674,"model":"gpt-3.5-turbo-0125","service_tier":"default","system_fingerprint":null,"choices":[],"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}},"obfuscation":"8618FsxJD2gV"})"
    "\n\n"
    "data: [DONE]\n\n";

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

// ---- OpenAI Responses (reference §3b)

// llama.cpp's llama-server ends a failed Responses stream with a bare {"error":…} event and no
// response.completed or response.failed (recorded from the real engine).
TEST(ResponsesDecoder, ABareErrorEventEndsTheStreamWithItsError) {
  const std::string s =
      "event: response.output_text.delta\ndata: "
      "{\"type\":\"response.output_text.delta\",\"item_id\":\"msg_1\",\"delta\":\" ref\"}\n\n"
      "data: {\"error\":{\"code\":500,\"message\":\"Context size has been exceeded.\","
      "\"type\":\"server_error\"}}\n\n";
  EXPECT_EQ(decode(s, provider::openai_responses),
            "content= ref|reasoning=|tool=|error(server_error,Context size has been exceeded.)"
            "|in=-1 out=1 reasoning=0 cached=-1 write=-1 cache_fields=0|provider=openai-responses");
}

// A Responses answer without a stream (llama-server's, verbatim): its texts, usage and end.
TEST(ResponsesDecoder, AWholeResponseHasItsTextsAndUsage) {
  const std::string body =
      R"({"completed_at":1796524019,"created_at":1796524019,"id":"resp_SlNJ","model":"./tiny.gguf",)"
      R"("object":"response","output":[{"content":[{"type":"output_text","annotations":[],)"
      R"("logprobs":[],"text":" triggeredmerce"}],"id":"msg_jbx","role":"assistant",)"
      R"("status":"completed","type":"message"},{"type":"reasoning","summary":[{"type":)"
      R"("summary_text","text":"Thought."}]},{"type":"function_call","name":"f","arguments":)"
      R"("{\"a\":1}"}],"status":"completed","usage":{"input_tokens":30,"output_tokens":5,)"
      R"("total_tokens":35,"input_tokens_details":{"cached_tokens":29}}})";
  EXPECT_EQ(decode(body, provider::openai_responses, "application/json; charset=utf-8"),
            "content= triggeredmerce|reasoning=Thought.|tool={\"a\":1}|finish(completed)|in=30 "
            "out=5 reasoning=1 cached=29 write=-1 cache_fields=1|provider=openai-responses|"
            "id=resp_SlNJ model=./tiny.gguf");
}

TEST(ResponsesDecoder, TextReasoningUsageAndFailure) {
  const std::string s =
      "event: response.created\ndata: "
      "{\"type\":\"response.created\",\"sequence_number\":0,\"response\":{\"id\":\"resp_1\","
      "\"status\":\"in_progress\",\"usage\":null}}\n\n"
      "event: response.reasoning_summary_text.delta\ndata: "
      "{\"type\":\"response.reasoning_summary_text.delta\",\"sequence_number\":4,\"item_id\":\"rs_"
      "1\",\"output_index\":0,\"summary_index\":0,\"delta\":\"Two cities.\"}\n\n"
      "event: response.output_text.delta\ndata: "
      "{\"type\":\"response.output_text.delta\",\"sequence_number\":4,\"item_id\":\"msg_1\","
      "\"output_index\":0,\"content_index\":0,\"delta\":\"Greetings\",\"logprobs\":[],"
      "\"obfuscation\":\"mvkAadO\"}\n\n"
      "event: response.output_text.delta\ndata: "
      "{\"type\":\"response.output_text.delta\",\"sequence_number\":5,\"delta\":\", hello\"}\n\n"
      "event: response.output_text.done\ndata: "
      "{\"type\":\"response.output_text.done\",\"sequence_number\":15,\"text\":\"Greetings, "
      "hello\"}\n\n"
      "event: response.completed\ndata: "
      "{\"type\":\"response.completed\",\"sequence_number\":18,\"response\":{\"id\":\"resp_1\","
      "\"status\":\"completed\",\"error\":null,\"usage\":{\"input_tokens\":13,\"input_tokens_"
      "details\":{\"cached_tokens\":4},\"output_tokens\":12,\"output_tokens_details\":{\"reasoning_"
      "tokens\":3},\"total_tokens\":25}}}\n\n";
  EXPECT_EQ(decode(s, provider::openai_responses),
            "content=Greetings, hello|reasoning=Two cities.|tool=|finish(completed)|in=13 out=12 "
            "reasoning=3 "
            "cached=4 write=-1 cache_fields=1|provider=openai-responses|id=resp_1 model=");
  const std::string failed =
      "event: response.failed\ndata: "
      "{\"type\":\"response.failed\",\"response\":{\"status\":\"failed\",\"error\":{\"code\":"
      "\"server_error\",\"message\":\"boom\"}}}\n\n"
      "event: error\ndata: {\"type\":\"error\",\"code\":\"rate_limit_exceeded\",\"message\":\"slow "
      "down\",\"param\":null,\"sequence_number\":3}\n\n";
  EXPECT_EQ(
      decode(failed, provider::openai_responses),
      "content=|reasoning=|tool=|finish(failed)error(server_error,boom)error(rate_limit_exceeded,"
      "slow down)"
      "|in=-1 out=-1 reasoning=0 cached=-1 write=-1 cache_fields=0|provider=openai-responses");
}

// ---- Anthropic Messages (reference §3c)

TEST(AnthropicDecoder, DocsStreamWithThinkingToolsAndCumulativeUsage) {
  const std::string s =
      "event: message_start\ndata: "
      "{\"type\":\"message_start\",\"message\":{\"model\":\"claude-sonnet-4-5-20250929\",\"id\":"
      "\"msg_01QC4g3HwBThD4BaNtBckFDJ\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],"
      "\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":12,\"cache_creation_"
      "input_tokens\":100,\"cache_read_input_tokens\":2048,\"cache_creation\":{\"ephemeral_5m_"
      "input_tokens\":0,\"ephemeral_1h_input_tokens\":0},\"output_tokens\":1,\"service_tier\":"
      "\"standard\",\"inference_geo\":\"not_available\"}}}\n\n"
      "event: content_block_start\ndata: {\"type\": \"content_block_start\", \"index\": 0, "
      "\"content_block\": {\"type\": \"thinking\", \"thinking\": \"\"}}\n\n"
      "event: content_block_delta\ndata: {\"type\": \"content_block_delta\", \"index\": 0, "
      "\"delta\": {\"type\": \"thinking_delta\", \"thinking\": \"Let me solve this step by "
      "step:\\n\\n1. First break down 27 * 453\"}}\n\n"
      "event: content_block_delta\ndata: {\"type\": \"content_block_delta\", \"index\": 0, "
      "\"delta\": {\"type\": \"signature_delta\", \"signature\": "
      "\"EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds...\"}}\n\n"
      "event: ping\ndata: {\"type\": \"ping\"}\n\n"
      "event: content_block_delta\ndata: {\"type\": \"content_block_delta\", \"index\": 1, "
      "\"delta\": {\"type\": \"text_delta\", \"text\": \"Hello\"}}\n\n"
      "event: content_block_delta\ndata: {\"type\": \"content_block_delta\", \"index\": 1, "
      "\"delta\": {\"type\": \"text_delta\", \"text\": \"!\"}}\n\n"
      "event: content_block_delta\ndata: "
      "{\"type\":\"content_block_delta\",\"index\":2,\"delta\":{\"type\":\"input_json_delta\","
      "\"partial_json\":\"{\\\"location\\\":\"}}\n\n"
      "event: some_future_event\ndata: {\"type\":\"some_future_event\",\"x\":1}\n\n"
      "event: message_delta\ndata: "
      "{\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null},"
      "\"usage\":{\"output_tokens\":15}}\n\n"
      "event: message_delta\ndata: "
      "{\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null},"
      "\"usage\":{\"input_tokens\":12,\"cache_creation_input_tokens\":100,\"cache_read_input_"
      "tokens\":2048,\"output_tokens\":30}}\n\n"
      "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";
  EXPECT_EQ(decode(s, provider::anthropic),
            "content=Hello!|reasoning=Let me solve this step by step:\n\n1. First break down 27 * "
            "453|tool={\"location\":"
            "|finish(end_turn)finish(end_turn)|in=2160 out=30 reasoning=1 cached=2048 write=100 "
            "cache_fields=1"
            "|provider=anthropic|id=msg_01QC4g3HwBThD4BaNtBckFDJ model=claude-sonnet-4-5-20250929");
}

// Found by fuzz_decoder_anthropic (test/fuzz/regressions/decoder_anthropic-huge-float-count):
// converting 4.2e24 to int64 was undefined behaviour; it is now "not reported".
TEST(AnthropicDecoder, AbsurdFloatCountIsNotReported) {
  const std::string s =
      "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":"
      "{\"input_tokens\":4.2e24,\"output_tokens\":2.0}}}\n\n";
  EXPECT_EQ(decode(s, provider::anthropic),
            "content=|reasoning=|tool=||in=-1 out=2 reasoning=0 cached=-1 write=-1 cache_fields=0|"
            "provider=anthropic");
}

TEST(AnthropicDecoder, OverloadedErrorEvent) {
  EXPECT_EQ(decode("event: error\ndata: {\"type\": \"error\", \"error\": {\"type\": "
                   "\"overloaded_error\", \"message\": \"Overloaded\"}}\n\n",
                   provider::anthropic),
            "content=|reasoning=|tool=|error(overloaded_error,Overloaded)|in=-1 out=-1 reasoning=0 "
            "cached=-1 "
            "write=-1 cache_fields=0|provider=anthropic");
}

// ---- Ollama, TGI

TEST(OllamaDecoder, NdjsonChatAndGenerate) {
  const std::string chat =
      "{\"model\":\"gemma2:2b\",\"message\":{\"role\":\"assistant\",\"content\":\"\",\"thinking\":"
      "\"hmm\"},\"done\":false}\n"
      "{\"model\":\"gemma2:2b\",\"message\":{\"role\":\"assistant\",\"content\":\"Hi\"},\"done\":"
      "false}\n"
      "{\"model\":\"gemma2:2b\",\"message\":{\"role\":\"assistant\",\"content\":\"\"},\"done_"
      "reason\":\"stop\",\"done\":true,\"total_duration\":4353619900,\"prompt_eval_count\":10,"
      "\"prompt_eval_duration\":246847000,\"eval_count\":17,\"eval_duration\":4032296000}\n";
  EXPECT_EQ(decode(chat, provider::ollama, "application/x-ndjson"),
            "content=Hi|reasoning=hmm|tool=|finish(stop)|in=10 out=17 reasoning=1 cached=-1 "
            "write=-1 cache_fields=0"
            "|provider=ollama|id= model=gemma2:2b"
            "|engine=ollama queue=-1 load=-1 prefill=246.847 decode=4032.3 inference=-1 invalid=0");
  const std::string generate =
      "{\"model\": \"llama3.2\", \"created_at\": \"2023-08-04T08:52:19.385406455-07:00\", "
      "\"response\": \"The\", \"done\": false}\n"
      "{\"model\": \"llama3.2\", \"created_at\": \"2023-08-04T19:22:45.499127Z\", \"response\": "
      "\"\", \"done\": true, \"context\": [1, 2, 3], \"total_duration\": 10706818083, "
      "\"load_duration\": 6338219291, \"prompt_eval_count\": 26, \"prompt_eval_duration\": "
      "130079000, \"eval_count\": 259, \"eval_duration\": 4232710000}\n"
      "{\"error\":\"model unloaded\"}\n";
  EXPECT_EQ(decode(generate, provider::ollama, "application/x-ndjson"),
            "content=The|reasoning=|tool=|error(,model unloaded)|in=26 out=259 reasoning=0 "
            "cached=-1 write=-1 "
            "cache_fields=0|provider=ollama|id= model=llama3.2"
            "|engine=ollama queue=-1 load=6338.22 prefill=130.079 decode=4232.71 inference=-1 "
            "invalid=0");
}

TEST(TgiDecoder, DataWithoutSpaceDetailsAndErrors) {
  const std::string s =
      "data:{\"index\":1,\"token\":{\"id\":13,\"text\":\"\\n\",\"logprob\":-0.5283203,\"special\":"
      "false},\"generated_text\":null,\"details\":null}\n\n"
      "data:{\"index\":2,\"token\":{\"id\":32072,\"text\":\"日本\",\"logprob\":-2.4394531,"
      "\"special\":false},\"generated_text\":null,\"details\":null}\n\n"
      "data:{\"index\":3,\"token\":{\"id\":2,\"text\":\"</"
      "s>\",\"logprob\":0,\"special\":true},\"generated_text\":\"\\n日本\",\"details\":{\"finish_"
      "reason\":\"eos_token\",\"generated_tokens\":3,\"input_length\":7,\"seed\":null}}\n\n"
      "data:{\"error\":\"Request failed during generation\",\"error_type\":\"generation\"}\n\n";
  EXPECT_EQ(decode(s, provider::tgi),
            "content=\n日本|reasoning=|tool=|finish(eos_token)error(generation,Request failed "
            "during generation)"
            "|in=7 out=3 reasoning=0 cached=-1 write=-1 cache_fields=0|provider=tgi");
}

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
  EXPECT_EQ(provider_from_path("/v1/chat/completions"), provider::openai_chat);
  EXPECT_EQ(provider_from_path("/openai/v1/responses"), provider::openai_responses);
  EXPECT_EQ(provider_from_path("/v1/messages"), provider::anthropic);
  EXPECT_EQ(provider_from_path("/api/chat"), provider::ollama);
  EXPECT_EQ(provider_from_path("/generate_stream"), provider::tgi);
  EXPECT_EQ(provider_from_path("/completion"), provider::llamacpp);
  EXPECT_EQ(provider_from_path("/v1/embeddings"), provider::unknown);
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
