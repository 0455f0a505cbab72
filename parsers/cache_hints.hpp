#pragma once
// Client-side prompt-cache hints, written into a request body without touching the rest of it:
// every byte outside the inserted text stays as the client sent it.  Pure: no I/O, no Boost.
#include <optional>
#include <string>
#include <string_view>

namespace tokentap::parsers {

/// OpenAI (and compatible) requests: the body with `"prompt_cache_key":"<key>"` as its first
/// member, or nothing when the body is not a JSON object or already has a top-level
/// `prompt_cache_key`.  `key` is written as given (the caller passes JSON-safe text).
std::optional<std::string> with_prompt_cache_key(std::string_view body, std::string_view key);

/// Anthropic Messages requests: the body with a `"cache_control":{"type":"ephemeral"}`
/// breakpoint on its last system block (a string `system` becomes one text block carrying it),
/// or nothing when the body is not a JSON object, has no system prompt, or already has a
/// `cache_control` anywhere (the client manages its breakpoints; Anthropic allows four).
std::optional<std::string> with_system_cache_breakpoint(std::string_view body);

}  // namespace tokentap::parsers
