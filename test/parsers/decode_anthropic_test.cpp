// The Anthropic Messages decoder (reference §3c), on verbatim streams from
// ../shared/reference/sse-formats.md, each fed every way decode_everywhere.hpp feeds a body.
#include "parsers/stream_decoder.hpp"

#include <gtest/gtest.h>

#include "test/parsers/decode_everywhere.hpp"

namespace tokentap::parsers {
namespace {

using namespace std::string_literals;

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

}  // namespace
}  // namespace tokentap::parsers
