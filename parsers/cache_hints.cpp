#include "parsers/cache_hints.hpp"

#include <simdjson.h>

namespace tokentap::parsers {

namespace {

using namespace simdjson;

bool is_space(char c) noexcept {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

// Whether `e` or anything inside it has a member named `name`.
bool has_key(dom::element e, std::string_view name, int depth = 0) {
  if (depth > 256) return true;  // (deeper than any request: say yes, change nothing)
  if (e.is_object()) {
    for (auto [k, v] : dom::object(e))
      if (k == name || has_key(v, name, depth + 1)) return true;
  } else if (e.is_array()) {
    for (auto v : dom::array(e))
      if (has_key(v, name, depth + 1)) return true;
  }
  return false;
}

}  // namespace

std::optional<std::string> with_prompt_cache_key(std::string_view body, std::string_view key) {
  dom::parser parser;
  dom::element doc;
  if (parser.parse(body.data(), body.size()).get(doc) != SUCCESS) return std::nullopt;
  dom::object top;
  if (doc.get_object().get(top) != SUCCESS) return std::nullopt;
  dom::element present;
  if (top.at_key("prompt_cache_key").get(present) == SUCCESS) return std::nullopt;
  std::size_t open = 0;
  while (open < body.size() && is_space(body[open])) ++open;  // (valid JSON: '{' comes next)
  std::string out;
  out.reserve(body.size() + key.size() + 24);
  out.append(body.substr(0, open + 1));
  out += "\"prompt_cache_key\":\"";
  out += key;
  out += '"';
  if (top.size() > 0) out += ',';
  out.append(body.substr(open + 1));
  return out;
}

std::optional<std::string> with_system_cache_breakpoint(std::string_view body) {
  // Validate and look for breakpoints on a DOM; find the bytes to change with the on-demand
  // parser, whose raw views point into the (padded) input at the offsets of `body`.
  {
    dom::parser parser;
    dom::element doc;
    if (parser.parse(body.data(), body.size()).get(doc) != SUCCESS || !doc.is_object())
      return std::nullopt;
    if (has_key(doc, "cache_control")) return std::nullopt;
  }
  const padded_string padded(body);
  ondemand::parser parser;
  ondemand::document doc;
  if (parser.iterate(padded).get(doc) != SUCCESS) return std::nullopt;
  ondemand::object top;
  if (doc.get_object().get(top) != SUCCESS) return std::nullopt;
  ondemand::value system;
  if (top.find_field_unordered("system").get(system) != SUCCESS) return std::nullopt;
  ondemand::json_type type;
  if (system.type().get(type) != SUCCESS) return std::nullopt;
  const auto offset = [&](std::string_view inside) {
    return static_cast<std::size_t>(inside.data() - padded.data());
  };
  constexpr std::string_view breakpoint = R"("cache_control":{"type":"ephemeral"})";
  std::string out;
  if (type == ondemand::json_type::string) {
    // "system":"..." -> "system":[{"type":"text","text":"...","cache_control":{...}}]
    std::string_view token = system.raw_json_token();
    while (!token.empty() && is_space(token.back())) token.remove_suffix(1);
    const auto at = offset(token);
    out.append(body.substr(0, at));
    out += R"([{"type":"text","text":)";
    out += token;
    out += ',';
    out += breakpoint;
    out += "}]";
    out.append(body.substr(at + token.size()));
    return out;
  }
  if (type != ondemand::json_type::array) return std::nullopt;
  ondemand::array blocks;
  if (system.get_array().get(blocks) != SUCCESS) return std::nullopt;
  std::string_view last;
  for (auto block : blocks) {
    ondemand::object o;
    if (block.get_object().get(o) != SUCCESS) return std::nullopt;
    if (o.raw_json().get(last) != SUCCESS) return std::nullopt;
  }
  if (last.empty()) return std::nullopt;  // an empty system array: nothing to mark
  // Before the last block's closing brace, with a comma unless the block is empty.
  auto close = offset(last) + last.size();
  while (close > 0 && body[close - 1] != '}') --close;
  --close;
  auto before = close;
  while (before > 0 && is_space(body[before - 1])) --before;
  const bool empty_block = body[before - 1] == '{';
  out.append(body.substr(0, close));
  if (!empty_block) out += ',';
  out += breakpoint;
  out.append(body.substr(close));
  return out;
}

}  // namespace tokentap::parsers
