#include "bench/workload.hpp"

#include <simdjson.h>

#include <set>

namespace tokentap::bench {

namespace {

using simdjson::dom::element;

// One line's task, or the reason it is not one.
std::optional<task> read_task(element e, int line, std::string& why) {
  simdjson::dom::object object;
  if (e.get(object)) return why = "a task is a JSON object", std::nullopt;
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
                   "' (id, category, messages, prompt, answer, grader, max_tokens)",
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

}  // namespace

std::optional<std::vector<task>> read_tasks(std::string_view text, const std::string& file,
                                            std::string& error) {
  std::vector<task> out;
  std::set<std::string> ids;
  simdjson::dom::parser parser;
  int line = 0;
  while (!text.empty()) {
    ++line;
    const auto nl = text.find('\n');
    auto row = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    if (!row.empty() && row.back() == '\r') row.remove_suffix(1);
    if (row.find_first_not_of(" \t") == std::string_view::npos) continue;
    const auto fail = [&](const std::string& why) {
      error = file + ":" + std::to_string(line) + ": " + why;
      return std::nullopt;
    };
    element e;
    if (const auto err = parser.parse(row.data(), row.size()).get(e))
      return fail(std::string("not JSON (") + simdjson::error_message(err) + ")");
    std::string why;
    auto t = read_task(e, line, why);
    if (!t) return fail(why);
    if (!ids.insert(t->id).second) return fail("a second task with id '" + t->id + "'");
    out.push_back(std::move(*t));
  }
  if (out.empty()) {
    error = file + ": no tasks (one JSON object per line)";
    return std::nullopt;
  }
  return out;
}

}  // namespace tokentap::bench
