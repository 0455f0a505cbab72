#include "parsers/gen_ai_messages.hpp"

#include <simdjson.h>

#include <algorithm>
#include <array>

#include "parsers/json_out.hpp"

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
    json::append_string(parts, take(content));
    parts += '}';
  }

  void tool_call(std::string& parts, std::string_view id, std::string_view tool,
                 std::string_view arguments, bool arguments_are_json) {
    open_part(parts, "tool_call");
    if (!id.empty()) {
      parts += ",\"id\":";
      json::append_string(parts, name(id));
    }
    parts += ",\"name\":";
    json::append_string(parts, name(tool));
    if (!arguments.empty()) {
      parts += ",\"arguments\":";
      // An object as written, unless the budget cuts it: then its text, cut.
      if (arguments_are_json && arguments.size() <= left_) {
        left_ -= arguments.size();
        parts += arguments;
      } else {
        json::append_string(parts, take(arguments));
      }
    }
    parts += '}';
  }

  void tool_response(std::string& parts, std::string_view id, std::string_view response) {
    open_part(parts, "tool_call_response");
    parts += ",\"id\":";
    json::append_string(parts, name(id));
    parts += ",\"response\":";
    json::append_string(parts, take(response));
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
    json::append_string(out, name(role.empty() ? std::string_view("user") : role));
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
    json::append_string(parts, name(type));
  }

  std::size_t left_;
  std::array<std::string, 4> sources_;
  std::string* at_ = &sources_[0];
};

// The providers' roles in the conventions' terms (OpenAI's `developer` is a system role).
std::string_view role_of(std::string_view role) {
  return role == "developer" ? std::string_view("system") : role;
}

// A content given as a string or as blocks: OpenAI parts (`text`, `image_url`, …), Anthropic
// blocks (`text`, `thinking`, `tool_use`, `tool_result`, `image`, …), Responses parts
// (`input_text`, `output_text`, `input_image`, …).
void content(writer& w, std::string& parts, dom::element v);

// A block's or part's fields, whatever their order.
struct block {
  std::string_view type, text, thinking, id, name, tool_use_id, call_id, output;
  std::string arguments;
  bool arguments_are_json = false;
  std::string result;  // tool_result's content as one text
};

void read_block(dom::element v, block& b) {
  fields(v, [&](std::string_view k, dom::element fv) {
    if (k == "type") {
      b.type = str(fv);
    } else if (k == "text") {
      b.text = str(fv);
    } else if (k == "thinking") {
      b.thinking = str(fv);
    } else if (k == "id") {
      b.id = str(fv);
    } else if (k == "name") {
      b.name = str(fv);
    } else if (k == "tool_use_id") {
      b.tool_use_id = str(fv);
    } else if (k == "call_id") {
      b.call_id = str(fv);
    } else if (k == "input") {  // Anthropic tool_use: an object
      b.arguments = json_text(fv);
      b.arguments_are_json = !b.arguments.empty();
    } else if (k == "arguments") {  // Responses function_call: a string
      b.arguments = str(fv);
    } else if (k == "output") {
      b.output = str(fv);
    } else if (k == "content") {  // tool_result: a string or text blocks
      if (is_string(fv)) {
        b.result = str(fv);
      } else {
        elements(fv, [&](dom::element part) {
          fields(part, [&](std::string_view pk, dom::element pv) {
            if (pk == "text") b.result += str(pv);
          });
        });
      }
    }
  });
}

void write_block(writer& w, std::string& parts, const block& b) {
  const auto t = b.type;
  if (t == "text" || t == "input_text" || t == "output_text") {
    w.text(parts, "text", b.text);
  } else if (t == "thinking") {
    w.text(parts, "reasoning", b.thinking);
  } else if (t == "tool_use") {
    w.tool_call(parts, b.id, b.name, b.arguments, b.arguments_are_json);
  } else if (t == "tool_result") {
    w.tool_response(parts, b.tool_use_id, b.result);
  } else if (t == "refusal") {
    w.text(parts, "text", b.text);
  } else {
    w.other(parts, t);
  }
}

void content(writer& w, std::string& parts, dom::element v) {
  if (is_string(v)) {
    w.text(parts, "text", str(v));
    return;
  }
  elements(v, [&](dom::element item) {
    if (is_string(item)) {
      w.text(parts, "text", str(item));
      return;
    }
    block b;
    read_block(item, b);
    write_block(w, parts, b);
  });
}

// OpenAI's and Ollama's `tool_calls`: `[{"id":…,"function":{"name":…,"arguments":…}}]`, the
// arguments a string (OpenAI) or an object (Ollama).
void tool_calls(writer& w, std::string& parts, dom::element v) {
  elements(v, [&](dom::element call) {
    std::string_view id, name;
    std::string arguments;
    bool json = false;
    fields(call, [&](std::string_view k, dom::element cv) {
      if (k == "id") {
        id = str(cv);
      } else if (k == "function") {
        fields(cv, [&](std::string_view fk, dom::element fv) {
          if (fk == "name") {
            name = str(fv);
          } else if (fk == "arguments") {
            if (is_string(fv)) {
              arguments = str(fv);
            } else {
              arguments = json_text(fv);
              json = !arguments.empty();
            }
          }
        });
      }
    });
    w.tool_call(parts, id, name, arguments, json);
  });
}

// One element of `messages`: role, content, tool calls; a `tool` message answers a call.
void message(writer& w, dom::element v) {
  std::string_view role, tool_call_id, text;
  std::string parts, calls;
  bool text_content = false;
  fields(v, [&](std::string_view k, dom::element mv) {
    if (k == "role") {
      role = str(mv);
    } else if (k == "content") {
      if (is_string(mv)) {
        text = str(mv);
        text_content = true;
      } else {
        content(w, parts, mv);
      }
    } else if (k == "tool_calls") {
      tool_calls(w, calls, mv);
    } else if (k == "tool_call_id") {
      tool_call_id = str(mv);
    }
  });
  if (role == "tool" && !tool_call_id.empty()) {
    std::string response;
    w.tool_response(response, tool_call_id, text);
    w.message(role, response);
    return;
  }
  if (text_content && !text.empty()) {  // (an assistant's "" beside its tool calls)
    std::string t;
    w.text(t, "text", text);
    parts = t + (parts.empty() ? "" : "," + parts);
  }
  if (!calls.empty()) parts += (parts.empty() ? "" : ",") + calls;
  w.message(role_of(role), parts);
}

// Responses `input` items: messages (role + content) and function calls and their outputs.
void input_item(writer& w, dom::element v) {
  std::string_view role;
  std::string parts;
  block b;
  bool has_content = false;
  std::string_view text;
  bool text_content = false;
  fields(v, [&](std::string_view k, dom::element iv) {
    if (k == "role") {
      role = str(iv);
    } else if (k == "content") {
      has_content = true;
      if (is_string(iv)) {
        text = str(iv);
        text_content = true;
      } else {
        content(w, parts, iv);
      }
    } else if (k == "type") {
      b.type = str(iv);
    } else if (k == "call_id") {
      b.call_id = str(iv);
    } else if (k == "name") {
      b.name = str(iv);
    } else if (k == "arguments") {
      b.arguments = str(iv);
    } else if (k == "output") {
      b.output = str(iv);
    }
  });
  if (b.type == "function_call") {
    std::string call;
    w.tool_call(call, b.call_id, b.name, b.arguments, false);
    w.message("assistant", call);
  } else if (b.type == "function_call_output") {
    std::string response;
    w.tool_response(response, b.call_id, b.output);
    w.message("tool", response);
  } else if (has_content) {
    if (text_content) w.text(parts, "text", text);
    w.message(role_of(role), parts);
  }
}

// `system` or `instructions`: a text, or text blocks.
void instructions(writer& w, std::string& out, dom::element v) {
  if (is_string(v)) {
    w.text(out, "text", str(v));
    return;
  }
  elements(v, [&](dom::element item) {
    block b;
    read_block(item, b);
    if (!b.text.empty()) w.text(out, "text", b.text);
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
