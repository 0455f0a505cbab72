// The OpenAI Responses, Anthropic Messages, Ollama and TGI decoders on verbatim streams from
// ../shared/reference/sse-formats.md §3b-§3e, each fed every way decode_everywhere.hpp feeds a
// body.
#include "parsers/stream_decoder.hpp"

#include <gtest/gtest.h>

#include "test/parsers/decode_everywhere.hpp"

namespace tokentap::parsers {
namespace {

using namespace std::string_literals;

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

}  // namespace
}  // namespace tokentap::parsers
