#pragma once
// Workloads given as JSONL (DESIGN.md §14): one task per line — a prompt or a conversation to
// send, optionally graded: `{"id", "category", "messages" | "prompt", "answer", "grader":
// "exact|numeric|choice|regex", "max_tokens"}`.  A broken file is refused whole with its name
// and the line at fault, as a configuration is.  Pure: the caller reads the file.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "bench/grader.hpp"

namespace tokentap::bench {

struct message {
  std::string role, content;
};

/// One request a workload asks for.
struct task {
  std::string id;                 ///< unique in its workload (`line<N>` when the line names none)
  std::string category;           ///< graded tasks: what accuracy is reported per
  std::vector<message> messages;  ///< a chat request; else `prompt`
  std::string prompt;             ///< a completion request
  std::optional<grader> grade;    ///< with an `answer`
  std::string answer;
  std::int64_t max_tokens = -1;  ///< -1: the request sets none
  int line = 0;                  ///< where the file wrote it
  /// A recorded request (bench/recorded.hpp): sent as it was — its method, path and body, its
  /// own model — `at_s` seconds after the first recorded one.  Empty path: a request is made of
  /// `messages` or `prompt`.
  std::string method, path, body;
  double at_s = -1;
};

/// Reads a JSONL workload; `file` names it in errors.  nullopt with `error` =
/// "FILE:LINE: reason" for the first line that is not a task (every line must be; blank lines
/// aside), or for a file without any.
std::optional<std::vector<task>> read_tasks(std::string_view text, const std::string& file,
                                            std::string& error);

}  // namespace tokentap::bench
