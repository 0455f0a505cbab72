#pragma once
// A request's conversation in the shapes of the OpenTelemetry GenAI semantic conventions
// (`gen_ai.system_instructions`, `gen_ai.input.messages`: JSON schemas
// gen-ai-system-instructions.json and gen-ai-input-messages.json), from the request body of
// any provider the decoders know: OpenAI chat `messages`, Responses `instructions` + `input`,
// Anthropic `system` + `messages`, Ollama `messages` or `system` + `prompt`, llama.cpp and TGI
// prompts.  Only for content capture (opt-in): texts are kept, images and files are named by
// their type only.
//
// Pure: no I/O, no Boost, never throws.  Whole documents (a request body is read whole before
// it is forwarded), validated whole before anything is read: a body that is not JSON gives
// nothing.
#include <cstddef>
#include <string>
#include <string_view>

namespace tokentap::parsers {

struct gen_ai_input {
  /// `[{"type":"text","content":…}, …]`; empty when the request has no instructions apart
  /// from its messages.
  std::string system_instructions;
  /// `[{"role":…,"parts":[{"type":"text","content":…} | {"type":"tool_call","id":…,"name":…,
  /// "arguments":…} | {"type":"tool_call_response","id":…,"response":…} |
  /// {"type":"reasoning","content":…} | {"type":<the provider's>}]}, …]`; empty when the body
  /// is not a JSON object or holds no conversation this reader knows.
  std::string input_messages;
  /// Some text was cut: the texts kept add up to at most max_text_bytes.
  bool truncated = false;
};

/// The conversation of `body`.  The providers' shapes do not collide, so one reader takes them
/// all: `messages` (OpenAI, Anthropic and Ollama roles and content blocks, OpenAI and Ollama
/// `tool_calls`), `system` and `instructions` (the instructions), `input` (Responses: a text or
/// items), `prompt` and `inputs` (a user text).  Texts (contents, tool arguments and responses)
/// add up to at most `max_text_bytes`; a text is cut at a UTF-8 character boundary.
gen_ai_input gen_ai_input_of(std::string_view body, std::size_t max_text_bytes);

}  // namespace tokentap::parsers
