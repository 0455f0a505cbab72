// The OpenAI Responses decoder (reference §3b), on verbatim streams from
// ../shared/reference/sse-formats.md, each fed every way decode_everywhere.hpp feeds a body.
#include "parsers/stream_decoder.hpp"

#include <gtest/gtest.h>

#include "test/parsers/decode_everywhere.hpp"

namespace tokentap::parsers {
namespace {

using namespace std::string_literals;

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

}  // namespace
}  // namespace tokentap::parsers
