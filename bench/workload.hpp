#pragma once
// Workloads given as JSON (DESIGN.md §14): one task per line — a prompt or a conversation to
// send, optionally graded: `{"id", "category", "messages" | "prompt", "answer", "grader":
// "exact|numeric|choice|regex", "max_tokens"}` — or a ShareGPT conversation, `{"id",
// "conversations": [{"from": "human" | "gpt" | "system", "value"}, …]}`, one per line or the
// whole file a JSON array of them (ShareGPT's own files).  A broken file is refused whole with
// its name and the line at fault, as a configuration is.  Pure: the caller reads the file.
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

/// One turn of a conversation: the user message it adds to the history.
struct turn {
  std::string user;
  std::int64_t max_tokens = -1;  ///< -1: the request sets none
  double think_ms = 0;           ///< after the previous turn's answer, before this one is sent
  /// Edited history: before this turn is sent, the answer of turn `edit_answer` (an earlier one)
  /// is rewritten in the history it resends, as a client that rewrites past messages does.  -1:
  /// none.
  int edit_answer = -1;
};

/// One request a workload asks for, or one conversation of several.
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
  /// A conversation: its turns, each sent after `messages` (its system prompt, when it has one)
  /// and the history so far — every earlier user message and the server's real answer to it —
  /// once the previous turn is answered and the turn's think time has passed.  Empty: one
  /// request, `messages` or `prompt`.
  std::vector<turn> turns;
  /// The client's context window, in tokens (four characters a token): a turn whose history
  /// would pass it drops its oldest turns, the first user message first — a context-window
  /// overflow, which truncates the history an engine had cached.  0: the history is kept whole.
  std::int64_t context_window = 0;
};

/// Reads a JSONL workload, or a JSON array of ShareGPT conversations; `file` names it in errors.
/// A ShareGPT conversation becomes a task of turns: each human message a turn, its max_tokens the
/// length of the reply that followed it (four characters a token; none after the last), its system
/// message the task's; the recorded replies themselves are not sent — each turn resends the
/// server's real answers.  A conversation without a human message is skipped and counted in
/// `skipped` (ShareGPT's published files have some).  nullopt with `error` = "FILE:LINE: reason"
/// for the first entry that is neither (every line must be one; blank lines aside), or for a file
/// without any.
std::optional<std::vector<task>> read_tasks(std::string_view text, const std::string& file,
                                            std::string& error, std::size_t* skipped = nullptr);

/// A message's length in tokens as the bench client estimates it: four characters a token (the
/// simulator's rule, and close to real tokenizers' on English text).
inline std::int64_t estimated_tokens(std::string_view text) {
  return static_cast<std::int64_t>((text.size() + 3) / 4);
}

}  // namespace tokentap::bench
