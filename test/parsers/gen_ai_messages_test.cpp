// Request conversations in the GenAI semantic conventions' shapes (gen-ai-input-messages.json,
// gen-ai-system-instructions.json), from each provider's request body, in any key order.
#include "parsers/gen_ai_messages.hpp"

#include <gtest/gtest.h>
#include <simdjson.h>

#include "base/json.hpp"
#include "test/support/json_keys.hpp"

namespace tokentap::parsers {
namespace {

// The same conversation whatever the order of the keys in the body's objects.
gen_ai_input read(std::string_view body, std::size_t max = 1 << 20) {
  const auto in = gen_ai_input_of(body, max);
  for (const auto order : {test::key_order::sorted, test::key_order::reversed}) {
    const auto other = gen_ai_input_of(test::reorder_keys(body, order, 0), max);
    EXPECT_EQ(other.input_messages, in.input_messages) << body;
    EXPECT_EQ(other.system_instructions, in.system_instructions) << body;
  }
  if (!in.input_messages.empty()) {
    EXPECT_TRUE(base::json::valid_utf8(in.input_messages));
  }
  return in;
}

TEST(GenAiMessages, OpenAiChatWithSystemPartsToolCallsAndToolAnswers) {
  const auto in = read(R"({"model":"gpt-4o","stream":true,"messages":[
    {"role":"developer","content":"Be brief."},
    {"role":"user","content":[{"type":"text","text":"What is in this image?"},
                              {"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA"}}]},
    {"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function",
      "function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},
    {"role":"tool","tool_call_id":"call_1","content":"rainy, 57°F"},
    {"role":"assistant","content":"It is rainy."}]})");
  EXPECT_EQ(in.system_instructions, "");
  EXPECT_EQ(
      in.input_messages,
      R"([{"role":"system","parts":[{"type":"text","content":"Be brief."}]},)"
      R"({"role":"user","parts":[{"type":"text","content":"What is in this image?"},)"
      R"({"type":"image_url"}]},)"
      R"({"role":"assistant","parts":[{"type":"tool_call","id":"call_1","name":"get_weather",)"
      R"("arguments":"{\"city\":\"Paris\"}"}]},)"
      R"({"role":"tool","parts":[{"type":"tool_call_response","id":"call_1",)"
      R"("response":"rainy, 57°F"}]},)"
      R"({"role":"assistant","parts":[{"type":"text","content":"It is rainy."}]}])");
  EXPECT_FALSE(in.truncated);
}

TEST(GenAiMessages, AnthropicSystemBlocksThinkingToolUseAndResults) {
  const auto in = read(R"({"model":"claude-sonnet-4-5","max_tokens":1024,
    "system":[{"type":"text","text":"You are a weather bot.","cache_control":{"type":"ephemeral"}}],
    "messages":[
      {"role":"user","content":"Weather in Paris?"},
      {"role":"assistant","content":[{"type":"thinking","thinking":"Need the tool.","signature":"x"},
        {"type":"tool_use","id":"toolu_1","name":"get_weather","input":{"city":"Paris"}}]},
      {"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1",
        "content":[{"type":"text","text":"rainy"}]},
        {"type":"image","source":{"type":"base64","media_type":"image/png","data":"AAAA"}}]}]})");
  EXPECT_EQ(in.system_instructions, R"([{"type":"text","content":"You are a weather bot."}])");
  EXPECT_EQ(
      in.input_messages,
      R"([{"role":"user","parts":[{"type":"text","content":"Weather in Paris?"}]},)"
      R"({"role":"assistant","parts":[{"type":"reasoning","content":"Need the tool."},)"
      R"({"type":"tool_call","id":"toolu_1","name":"get_weather","arguments":{"city":"Paris"}}]},)"
      R"({"role":"user","parts":[{"type":"tool_call_response","id":"toolu_1",)"
      R"("response":"rainy"},{"type":"image"}]}])");
  // A system prompt given as one string.
  EXPECT_EQ(read(R"({"system":"Terse.","messages":[{"role":"user","content":"hi"}]})")
                .system_instructions,
            R"([{"type":"text","content":"Terse."}])");
}

TEST(GenAiMessages, ResponsesInstructionsInputItemsAndFunctionCalls) {
  const auto in = read(R"({"model":"gpt-5","instructions":"Answer in French.","input":[
    {"role":"user","content":[{"type":"input_text","text":"Weather?"},{"type":"input_image","image_url":"https://x/y.png"}]},
    {"type":"function_call","call_id":"call_9","name":"get_weather","arguments":"{}"},
    {"type":"function_call_output","call_id":"call_9","output":"sunny"},
    {"type":"message","role":"assistant","content":[{"type":"output_text","text":"Il fait beau."}]}]})");
  EXPECT_EQ(in.system_instructions, R"([{"type":"text","content":"Answer in French."}])");
  EXPECT_EQ(
      in.input_messages,
      R"([{"role":"user","parts":[{"type":"text","content":"Weather?"},{"type":"input_image"}]},)"
      R"({"role":"assistant","parts":[{"type":"tool_call","id":"call_9","name":"get_weather",)"
      R"("arguments":"{}"}]},)"
      R"({"role":"tool","parts":[{"type":"tool_call_response","id":"call_9","response":"sunny"}]},)"
      R"({"role":"assistant","parts":[{"type":"text","content":"Il fait beau."}]}])");
  EXPECT_EQ(read(R"({"model":"gpt-5","input":"Tell me a joke."})").input_messages,
            R"([{"role":"user","parts":[{"type":"text","content":"Tell me a joke."}]}])");
}

TEST(GenAiMessages, OllamaChatToolCallsAndPromptsOfGenerateTgiAndLlamaCpp) {
  EXPECT_EQ(read(R"({"model":"llama3.2","messages":[{"role":"assistant","content":"",
        "tool_calls":[{"function":{"name":"get_weather","arguments":{"city":"Oslo"}}}]}]})")
                .input_messages,
            R"([{"role":"assistant","parts":[)"
            R"({"type":"tool_call","name":"get_weather","arguments":{"city":"Oslo"}}]}])");
  const auto generate =
      read(R"({"model":"llama3.2","system":"Short.","prompt":"Why is the sky blue?"})");
  EXPECT_EQ(generate.system_instructions, R"([{"type":"text","content":"Short."}])");
  EXPECT_EQ(generate.input_messages,
            R"([{"role":"user","parts":[{"type":"text","content":"Why is the sky blue?"}]}])");
  EXPECT_EQ(read(R"({"inputs":"Hello","parameters":{"max_new_tokens":20}})").input_messages,
            R"([{"role":"user","parts":[{"type":"text","content":"Hello"}]}])");
  EXPECT_EQ(read(R"({"prompt":"Building a website","n_predict":128})").input_messages,
            R"([{"role":"user","parts":[{"type":"text","content":"Building a website"}]}])");
}

TEST(GenAiMessages, TextsShareOneBudgetAndAreCutAtACharacterBoundary) {
  // 6 bytes of budget: "abc" whole, then one "é" (2 bytes; the next would be split), then "z".
  const auto in = read(R"({"messages":[{"role":"user","content":"abc"},)"
                       R"({"role":"user","content":"ééé"},{"role":"user","content":"zzz"}]})",
                       6);
  EXPECT_TRUE(in.truncated);
  EXPECT_EQ(in.input_messages, R"([{"role":"user","parts":[{"type":"text","content":"abc"}]},)"
                               R"({"role":"user","parts":[{"type":"text","content":"é"}]},)"
                               R"({"role":"user","parts":[{"type":"text","content":"z"}]}])");
  // The budget goes to a message's content before its tool calls, whatever the keys' order (read()
  // compares the body with its keys sorted and reversed).
  const auto calls = read(R"({"messages":[{"tool_calls":[{"id":"c","function":{"name":"f",)"
                          R"("arguments":"0123456789"}}],"role":"assistant","content":"abcdef"}]})",
                          8);
  EXPECT_TRUE(calls.truncated);
  EXPECT_NE(calls.input_messages.find(R"({"type":"text","content":"abcdef"})"), std::string::npos)
      << calls.input_messages;
  EXPECT_NE(calls.input_messages.find(R"("arguments":"01")"), std::string::npos)
      << calls.input_messages;
  // A tool's JSON arguments that no longer fit become their text, cut.
  const auto args = read(R"({"messages":[{"role":"assistant","content":[{"type":"tool_use",)"
                         R"("id":"t","name":"f","input":{"k":"0123456789"}}]}]})",
                         8);
  EXPECT_TRUE(args.truncated);
  EXPECT_NE(args.input_messages.find(R"("arguments":"{\"k\":\"01")"), std::string::npos)
      << args.input_messages;
}

TEST(GenAiMessages, WhatIsNoConversationGivesNothing) {
  for (const char* body : {"", "not json", "[1,2]", R"({"model":"x"})", R"({"messages":[}")"})
    EXPECT_EQ(gen_ai_input_of(body, 1024).input_messages, "") << body;
  // On-Demand does not validate what it skips: an invalid tool input is not copied out as it is.
  const auto broken = gen_ai_input_of(
      R"({"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f",)"
      R"("input":{"x":[1 2 \u0000]}}]}]})",
      1024);
  EXPECT_EQ(broken.input_messages.find("[1 2"), std::string::npos) << broken.input_messages;
  if (!broken.input_messages.empty()) {
    simdjson::dom::parser p;
    EXPECT_FALSE(p.parse(broken.input_messages).error()) << broken.input_messages;
  }
  // Strings are escaped again on the way out.
  EXPECT_EQ(read(R"({"messages":[{"role":"user","content":"a\"b\\c\n\u0001"}]})").input_messages,
            R"([{"role":"user","parts":[{"type":"text","content":"a\"b\\c\n\u0001"}]}])");
}

}  // namespace
}  // namespace tokentap::parsers
