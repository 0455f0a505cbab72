#include "bench/workload.hpp"

#include <simdjson.h>

#include <set>

namespace tokentap::bench {

namespace {

using simdjson::dom::element;

// A ShareGPT conversation's task (see read_tasks), or the reason it is not one; an empty task
// (no turns) when it has no human message.  Keys besides id and conversations are the dataset's
// own (model, source, …) and not read.
std::optional<task> read_sharegpt(simdjson::dom::object object, int line, std::string& why) {
  task t;
  t.line = line;
  if (const auto id = object["id"]; !id.error()) {
    std::string_view text;
    if (id.get(text) || text.empty() || text.size() > 256)
      return why = "id must be a string of 1-256 bytes", std::nullopt;
    t.id = std::string(text);
  }
  simdjson::dom::array list;
  if (object["conversations"].get(list))
    return why = "conversations must be a list of {from, value}", std::nullopt;
  for (const auto m : list) {
    std::string_view from, value;
    if (m["from"].get(from) || m["value"].get(value))
      return why = "each message of conversations needs a from and a value, both strings",
             std::nullopt;
    if (from == "human" || from == "user") {
      t.turns.push_back({.user = std::string(value)});
    } else if (from == "gpt" || from == "chatgpt" || from == "assistant" || from == "bard" ||
               from == "bing" || from == "model") {
      // The reply's length is what the turn asks for; a reply without a question before it
      // (a conversation opened by the model) is not sent.
      if (!t.turns.empty() && t.turns.back().max_tokens < 0)
        t.turns.back().max_tokens = std::max<std::int64_t>(1, estimated_tokens(value));
    } else if (from == "system") {
      if (t.turns.empty()) t.messages.push_back({"system", std::string(value)});
    } else {
      return why = "unknown from '" + std::string(from) +
                   "' in conversations (human, gpt, system; user, assistant, chatgpt, bard, "
                   "bing, model)",
             std::nullopt;
    }
  }
  if (t.turns.empty()) t.messages.clear();  // nothing asked: skipped
  if (t.id.empty()) t.id = "line" + std::to_string(line);
  return t;
}

// One entry's task, or the reason it is not one.
std::optional<task> read_task(element e, int line, std::string& why) {
  simdjson::dom::object object;
  if (e.get(object)) return why = "a task is a JSON object", std::nullopt;
  if (!object["conversations"].error()) return read_sharegpt(object, line, why);
  task t;
  t.line = line;
  bool has_messages = false, has_prompt = false;
  std::string grader_name;
  for (const auto field : object) {
    const std::string_view key = field.key;
    const element v = field.value;
    const auto text = [&](std::string& out) {
      if (!v.is_string()) return why = std::string(key) + " must be a string", false;
      out = std::string(v.get_string().value());
      return true;
    };
    if (key == "id") {
      if (!text(t.id)) return std::nullopt;
      if (t.id.empty() || t.id.size() > 256) return why = "id must be 1-256 bytes", std::nullopt;
    } else if (key == "category") {
      if (!text(t.category)) return std::nullopt;
    } else if (key == "prompt") {
      if (!text(t.prompt)) return std::nullopt;
      has_prompt = true;
    } else if (key == "messages") {
      simdjson::dom::array list;
      if (v.get(list) || list.size() == 0)
        return why = "messages must be a non-empty list of {role, content}", std::nullopt;
      for (const auto m : list) {
        std::string_view role, content;
        if (m["role"].get(role) || m["content"].get(content))
          return why = "each message needs a role and a content, both strings", std::nullopt;
        t.messages.push_back({std::string(role), std::string(content)});
      }
      has_messages = true;
    } else if (key == "answer") {
      if (v.is_string())
        t.answer = std::string(v.get_string().value());
      else if (v.is_number())
        t.answer = simdjson::minify(v);
      else
        return why = "answer must be a string or a number", std::nullopt;
    } else if (key == "grader") {
      if (!text(grader_name)) return std::nullopt;
    } else if (key == "max_tokens") {
      if (!v.is_int64() || v.get_int64().value() < 1 || v.get_int64().value() > 1000000)
        return why = "max_tokens must be a whole number from 1 to 1000000", std::nullopt;
      t.max_tokens = v.get_int64().value();
    } else {
      return why = "unknown key '" + std::string(key) +
                   "' (id, category, messages, prompt, answer, grader, max_tokens; or a ShareGPT "
                   "conversation: id, conversations)",
             std::nullopt;
    }
  }
  if (has_messages == has_prompt)
    return why = "a task needs either messages or a prompt", std::nullopt;
  if (!grader_name.empty() && t.answer.empty())
    return why = "grader '" + grader_name + "' needs an answer", std::nullopt;
  if (!t.answer.empty()) {
    t.grade = grader::make(grader_name.empty() ? "exact" : grader_name, t.answer, why);
    if (!t.grade) return std::nullopt;
  }
  if (t.id.empty()) t.id = "line" + std::to_string(line);
  return t;
}

// The top-level elements of a JSON array: each one's text and the line it starts on.  Only
// the nesting and the strings are followed; each element is parsed on its own afterwards.
// nullopt when the array never closes.
struct element_text {
  std::string_view text;
  int line;
};
std::optional<std::vector<element_text>> array_elements(std::string_view text, int& line) {
  std::vector<element_text> out;
  line = 1;
  std::size_t i = text.find('[');
  for (std::size_t k = 0; k < i; ++k) line += text[k] == '\n';
  int depth = 0, start_line = 0;
  std::size_t start = std::string_view::npos;
  bool in_string = false;
  const auto close = [&](std::size_t end) {
    if (start == std::string_view::npos) return;
    auto e = text.substr(start, end - start);
    while (!e.empty() &&
           (e.back() == ' ' || e.back() == '\n' || e.back() == '\r' || e.back() == '\t'))
      e.remove_suffix(1);
    out.push_back({e, start_line});
    start = std::string_view::npos;
  };
  for (++i; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\n') ++line;
    if (in_string) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        in_string = false;
      continue;
    }
    if (depth == 0 && (c == ',' || c == ']')) {
      close(i);
      if (c == ']') return out;
      continue;
    }
    if (depth == 0 && start == std::string_view::npos && c != ' ' && c != '\n' && c != '\r' &&
        c != '\t') {
      start = i;
      start_line = line;
    }
    if (c == '"')
      in_string = true;
    else if (c == '{' || c == '[')
      ++depth;
    else if (c == '}' || c == ']')
      --depth;
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::vector<task>> read_tasks(std::string_view text, const std::string& file,
                                            std::string& error, std::size_t* skipped) {
  // The entries: a JSON array's elements, or the lines.
  std::vector<element_text> entries;
  if (const auto first = text.find_first_not_of(" \t\r\n");
      first != std::string_view::npos && text[first] == '[') {
    int end_line = 0;
    auto elements = array_elements(text, end_line);
    if (!elements) {
      error = file + ":" + std::to_string(end_line) + ": the JSON array does not close";
      return std::nullopt;
    }
    entries = std::move(*elements);
  } else {
    int line = 0;
    while (!text.empty()) {
      ++line;
      const auto nl = text.find('\n');
      auto row = text.substr(0, nl);
      text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
      if (!row.empty() && row.back() == '\r') row.remove_suffix(1);
      if (row.find_first_not_of(" \t") == std::string_view::npos) continue;
      entries.push_back({row, line});
    }
  }
  std::vector<task> out;
  std::set<std::string> ids;
  simdjson::dom::parser parser;
  if (skipped) *skipped = 0;
  for (const auto& [row, line] : entries) {
    const auto fail = [&, line = line](const std::string& why) {
      error = file + ":" + std::to_string(line) + ": " + why;
      return std::nullopt;
    };
    element e;
    if (const auto err = parser.parse(row.data(), row.size()).get(e))
      return fail(std::string("not JSON (") + simdjson::error_message(err) + ")");
    std::string why;
    auto t = read_task(e, line, why);
    if (!t) return fail(why);
    if (t->messages.empty() && t->prompt.empty() && t->turns.empty()) {  // ShareGPT, no question
      if (skipped) ++*skipped;
      continue;
    }
    if (!ids.insert(t->id).second) return fail("a second task with id '" + t->id + "'");
    out.push_back(std::move(*t));
  }
  if (out.empty()) {
    error =
        file + ": no tasks (one JSON object per line, or a JSON array of ShareGPT conversations)";
    return std::nullopt;
  }
  return out;
}

}  // namespace tokentap::bench
