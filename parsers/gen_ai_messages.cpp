#include "parsers/gen_ai_messages.hpp"

#include <simdjson.h>

#include <algorithm>
#include <array>
#include <optional>

#include "base/json.hpp"

namespace tokentap::parsers {

namespace {

namespace dom = simdjson::dom;

constexpr std::size_t max_name_bytes = 256;  // roles, ids, tool names, part types

std::string_view str(dom::element v) {
  std::string_view s;
  return v.get_string().get(s) ? std::string_view{} : s;
}

bool is_string(dom::element v) {
  return v.is_string();
}

// An object's or array's JSON text, minified (Anthropic's tool `input`, Ollama's tool
// arguments), else empty.
std::string json_text(dom::element v) {
  if (!v.is_object() && !v.is_array()) return {};
  return simdjson::minify(v);
}

template <class F>
bool fields(dom::element v, F&& f) {
  dom::object o;
  if (v.get_object().get(o)) return false;
  for (auto [key, value] : o) f(key, value);
  return true;
}

template <class F>
bool elements(dom::element v, F&& f) {
  dom::array a;
  if (v.get_array().get(a)) return false;
  for (auto item : a) f(item);
  return true;
}

// Writes parts and messages, keeping the texts within one budget.
class writer {
 public:
  explicit writer(std::size_t budget) : left_(budget) {}

  // A text cut to what is left of the budget, at a character boundary.
  std::string_view take(std::string_view t) {
    if (t.size() > left_) {
      truncated = true;
      auto n = left_;
      while (n > 0 && (static_cast<unsigned char>(t[n]) & 0xc0) == 0x80) --n;
      t = t.substr(0, n);
    }
    left_ -= t.size();
    return t;
  }

  static std::string_view name(std::string_view s) { return s.substr(0, max_name_bytes); }

  void text(std::string& parts, std::string_view type, std::string_view content) {
    open_part(parts, type);
    parts += ",\"content\":";
    base::json::append_string(parts, take(content));
    parts += '}';
  }

  void tool_call(std::string& parts, std::string_view id, std::string_view tool,
                 std::string_view arguments, bool arguments_are_json) {
    open_part(parts, "tool_call");
    if (!id.empty()) {
      parts += ",\"id\":";
      base::json::append_string(parts, name(id));
    }
    parts += ",\"name\":";
    base::json::append_string(parts, name(tool));
    if (!arguments.empty()) {
      parts += ",\"arguments\":";
      // An object as written, unless the budget cuts it: then its text, cut.
      if (arguments_are_json && arguments.size() <= left_) {
        left_ -= arguments.size();
        parts += arguments;
      } else {
        base::json::append_string(parts, take(arguments));
      }
    }
    parts += '}';
  }

  void tool_response(std::string& parts, std::string_view id, std::string_view response) {
    open_part(parts, "tool_call_response");
    parts += ",\"id\":";
    base::json::append_string(parts, name(id));
    parts += ",\"response\":";
    base::json::append_string(parts, take(response));
    parts += '}';
  }

  // A part this reader keeps no content of (an image, a file, audio): named by its type.
  void other(std::string& parts, std::string_view type) {
    open_part(parts, type.empty() ? std::string_view("unknown") : type);
    parts += '}';
  }

  // Where the next messages go: one list per source (`messages`, `input`, `prompt`, `inputs`),
  // joined in that order whatever the order of the body's keys.
  void source(std::size_t i) { at_ = &sources_[i]; }

  void message(std::string_view role, const std::string& parts) {
    auto& out = *at_;
    out += ",{\"role\":";
    base::json::append_string(out, name(role.empty() ? std::string_view("user") : role));
    out += ",\"parts\":[";
    out += parts;
    out += "]}";
  }

  std::string messages() && {
    std::string all;
    for (const auto& m : sources_) all += m;
    if (all.empty()) return all;
    all[0] = '[';  // (each message starts with a comma)
    all += ']';
    return all;
  }

  bool truncated = false;

 private:
  static void open_part(std::string& parts, std::string_view type) {
    if (!parts.empty()) parts += ',';
    parts += "{\"type\":";
    base::json::append_string(parts, name(type));
  }

  std::size_t left_;
  std::array<std::string, 4> sources_;
  std::string* at_ = &sources_[0];
};

// The providers' roles in the conventions' terms (OpenAI's `developer` is a system role).
std::string_view role_of(std::string_view role) {
  return role == "developer" ? std::string_view("system") : role;
}

// An object's fields this reader uses, whatever their order (a key met twice: the last one):
// a message, a content block or part, a Responses input item, a tool call or its function.
struct item {
  std::string_view type, role, text, thinking, id, name, tool_use_id, tool_call_id, call_id, output;
  std::string arguments;  ///< `arguments` or Anthropic's `input`: a string, or JSON when an object
  bool arguments_are_json = false;
  std::optional<dom::element> content, tool_calls, function;
};

item read_item(dom::element v) {
  item it;
  fields(v, [&](std::string_view k, dom::element fv) {
    if (k == "type") {
      it.type = str(fv);
    } else if (k == "role") {
      it.role = str(fv);
    } else if (k == "text") {
      it.text = str(fv);
    } else if (k == "thinking") {
      it.thinking = str(fv);
    } else if (k == "id") {
      it.id = str(fv);
    } else if (k == "name") {
      it.name = str(fv);
    } else if (k == "tool_use_id") {
      it.tool_use_id = str(fv);
    } else if (k == "tool_call_id") {
      it.tool_call_id = str(fv);
    } else if (k == "call_id") {
      it.call_id = str(fv);
    } else if (k == "output") {
      it.output = str(fv);
    } else if (k == "arguments" || k == "input") {
      it.arguments = is_string(fv) ? std::string(str(fv)) : json_text(fv);
      it.arguments_are_json = !is_string(fv) && !it.arguments.empty();
    } else if (k == "content") {
      it.content = fv;
    } else if (k == "tool_calls") {
      it.tool_calls = fv;
    } else if (k == "function") {
      it.function = fv;
    }
  });
  return it;
}

// A content as one text: a string, or its blocks' texts (a tool's result).
std::string text_of(const std::optional<dom::element>& v) {
  if (!v) return {};
  if (is_string(*v)) return std::string(str(*v));
  std::string out;
  elements(*v, [&](dom::element part) { out += read_item(part).text; });
  return out;
}

// A content given as a string or as blocks: OpenAI parts (`text`, `image_url`, …), Anthropic
// blocks (`text`, `thinking`, `tool_use`, `tool_result`, `image`, …), Responses parts
// (`input_text`, `output_text`, `input_image`, …).  An empty string says nothing (an
// assistant's "" beside its tool calls).
void content(writer& w, std::string& parts, dom::element v) {
  if (is_string(v)) {
    if (!str(v).empty()) w.text(parts, "text", str(v));
    return;
  }
  elements(v, [&](dom::element part) {
    if (is_string(part)) {
      w.text(parts, "text", str(part));
      return;
    }
    const auto b = read_item(part);
    const auto t = b.type;
    if (t == "text" || t == "input_text" || t == "output_text" || t == "refusal") {
      w.text(parts, "text", b.text);
    } else if (t == "thinking") {
      w.text(parts, "reasoning", b.thinking);
    } else if (t == "tool_use") {
      w.tool_call(parts, b.id, b.name, b.arguments, b.arguments_are_json);
    } else if (t == "tool_result") {
      w.tool_response(parts, b.tool_use_id, text_of(b.content));
    } else {
      w.other(parts, t);
    }
  });
}

// One element of `messages`: its content, then its tool calls (OpenAI's and Ollama's
// `[{"id":…,"function":{"name":…,"arguments":…}}]`); a `tool` message answers a call.
void message(writer& w, dom::element v) {
  const auto m = read_item(v);
  std::string parts;
  if (m.role == "tool" && !m.tool_call_id.empty()) {
    w.tool_response(parts, m.tool_call_id, text_of(m.content));
    w.message(m.role, parts);
    return;
  }
  if (m.content) content(w, parts, *m.content);
  if (m.tool_calls) {
    elements(*m.tool_calls, [&](dom::element call) {
      const auto c = read_item(call);
      const auto f = c.function ? read_item(*c.function) : item{};
      w.tool_call(parts, c.id, f.name, f.arguments, f.arguments_are_json);
    });
  }
  w.message(role_of(m.role), parts);
}

// Responses `input` items: messages (role + content) and function calls and their outputs.
void input_item(writer& w, dom::element v) {
  const auto it = read_item(v);
  std::string parts;
  if (it.type == "function_call") {
    w.tool_call(parts, it.call_id, it.name, it.arguments, it.arguments_are_json);
    w.message("assistant", parts);
  } else if (it.type == "function_call_output") {
    w.tool_response(parts, it.call_id, it.output);
    w.message("tool", parts);
  } else if (it.content) {
    content(w, parts, *it.content);
    w.message(role_of(it.role), parts);
  }
}

// `system` or `instructions`: a text, or text blocks.
void instructions(writer& w, std::string& out, dom::element v) {
  if (is_string(v)) {
    w.text(out, "text", str(v));
    return;
  }
  elements(v, [&](dom::element block) {
    const auto text = read_item(block).text;
    if (!text.empty()) w.text(out, "text", text);
  });
}

}  // namespace

gen_ai_input gen_ai_input_of(std::string_view body, std::size_t max_text_bytes) {
  gen_ai_input in;
  // The whole document, validated before anything is read: a body that is not JSON gives
  // nothing, never part of a conversation.
  thread_local dom::parser parser;
  // What a large body made the parser grow to goes back once it is read.
  struct release_large {
    dom::parser& p;
    std::size_t size;
    ~release_large() {
      if (size > (std::size_t{1} << 20)) p = dom::parser();
    }
  } release{parser, body.size()};
  dom::element root;
  if (parser.parse(body.data(), body.size()).get(root)) return in;
  writer w(max_text_bytes);
  std::array<std::string, 2> system;  // `system`, then `instructions`
  const bool ok = fields(root, [&](std::string_view k, dom::element v) {
    if (k == "messages") {
      w.source(0);
      elements(v, [&](dom::element m) { message(w, m); });
    } else if (k == "system" || k == "instructions") {
      instructions(w, system[k == "system" ? 0 : 1], v);
    } else if (k == "input") {
      w.source(1);
      if (is_string(v)) {
        std::string parts;
        w.text(parts, "text", str(v));
        w.message("user", parts);
      } else {
        elements(v, [&](dom::element item) { input_item(w, item); });
      }
    } else if ((k == "prompt" || k == "inputs") && is_string(v)) {
      w.source(k == "prompt" ? 2 : 3);
      std::string parts;
      w.text(parts, "text", str(v));
      w.message("user", parts);
    }
  });
  if (!ok) return in;
  auto joined = std::move(system[0]);
  if (!joined.empty() && !system[1].empty()) joined += ',';
  joined += system[1];
  if (!joined.empty()) in.system_instructions = "[" + joined + "]";
  in.truncated = w.truncated;
  in.input_messages = std::move(w).messages();
  return in;
}

}  // namespace tokentap::parsers
