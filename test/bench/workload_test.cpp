// JSON workloads (DESIGN.md §14): what a line may say, what each task becomes, ShareGPT
// conversations (a line each, or one JSON array) becoming tasks of turns, and every way an entry
// is refused — with the file's name and the line at fault.
#include "bench/workload.hpp"

#include <gtest/gtest.h>

#include <string>

namespace tokentap::bench {
namespace {

std::string refusal(const std::string& text) {
  std::string error;
  const auto w = read_tasks(text, "tasks.jsonl", error);
  EXPECT_FALSE(w.has_value());
  return error;
}

TEST(Workload, EachLineIsATask) {
  const std::string text =
      R"({"id":"gsm-1","category":"math","messages":[{"role":"system","content":"Be brief."},)"
      R"({"role":"user","content":"2+2?"}],"answer":4,"grader":"numeric","max_tokens":64})"
      "\n\n"
      R"({"prompt":"Once upon a time","max_tokens":16})"
      "\r\n"
      R"({"id":"mc","category":"trivia","prompt":"Capital of France? (A) Rome (B) Paris","answer":"B","grader":"choice"})"
      "\n"
      R"({"id":"free","messages":[{"role":"user","content":"Name a colour."}],"answer":"blue"})";
  std::string error;
  const auto w = read_tasks(text, "tasks.jsonl", error);
  ASSERT_TRUE(w.has_value()) << error;
  ASSERT_EQ(w->size(), 4u);
  const auto& gsm = (*w)[0];
  EXPECT_EQ(gsm.id, "gsm-1");
  EXPECT_EQ(gsm.category, "math");
  ASSERT_EQ(gsm.messages.size(), 2u);
  EXPECT_EQ(gsm.messages[0].role, "system");
  EXPECT_EQ(gsm.messages[1].content, "2+2?");
  EXPECT_EQ(gsm.max_tokens, 64);
  ASSERT_TRUE(gsm.grade.has_value());
  EXPECT_EQ(gsm.grade->which(), grader::kind::numeric);
  EXPECT_TRUE(gsm.grade->judge("That makes 4.").correct);
  EXPECT_EQ(gsm.line, 1);
  // No id: named by its line (the blank line counts), so two runs of one file pair up.
  const auto& story = (*w)[1];
  EXPECT_EQ(story.id, "line3");
  EXPECT_EQ(story.prompt, "Once upon a time");
  EXPECT_FALSE(story.grade.has_value());
  EXPECT_EQ((*w)[2].grade->which(), grader::kind::choice);
  // An answer without a grader is graded exactly.
  EXPECT_EQ((*w)[3].grade->which(), grader::kind::exact);
  EXPECT_EQ((*w)[3].max_tokens, -1);
}

TEST(Workload, ABrokenLineIsRefusedWithItsFileAndLine) {
  const std::string ok = R"({"id":"a","prompt":"x"})"
                         "\n";
  EXPECT_EQ(refusal(ok + "{\"prompt\":\n").rfind("tasks.jsonl:2: not JSON (", 0), 0u);
  EXPECT_EQ(refusal(ok + "[1,2]"), "tasks.jsonl:2: a task is a JSON object");
  EXPECT_EQ(refusal(ok + R"({"id":"b"})"),
            "tasks.jsonl:2: a task needs either messages or a prompt");
  EXPECT_EQ(refusal(ok + R"({"prompt":"x","messages":[{"role":"user","content":"y"}]})"),
            "tasks.jsonl:2: a task needs either messages or a prompt");
  EXPECT_EQ(refusal(ok + R"({"id":"a","prompt":"y"})"), "tasks.jsonl:2: a second task with id 'a'");
  EXPECT_EQ(refusal(ok + R"({"prompt":"y","max_token":5})"),
            "tasks.jsonl:2: unknown key 'max_token' (id, category, messages, prompt, answer, "
            "grader, max_tokens; or a ShareGPT conversation: id, conversations)");
  EXPECT_EQ(refusal(ok + R"({"prompt":"y","max_tokens":0})"),
            "tasks.jsonl:2: max_tokens must be a whole number from 1 to 1000000");
  EXPECT_EQ(refusal(ok + R"({"messages":[]})"),
            "tasks.jsonl:2: messages must be a non-empty list of {role, content}");
  EXPECT_EQ(refusal(ok + R"({"messages":[{"role":"user"}]})"),
            "tasks.jsonl:2: each message needs a role and a content, both strings");
  EXPECT_EQ(refusal(ok + R"({"prompt":"y","grader":"numeric"})"),
            "tasks.jsonl:2: grader 'numeric' needs an answer");
  EXPECT_EQ(refusal(ok + R"({"prompt":"y","answer":"four","grader":"numeric"})"),
            "tasks.jsonl:2: grader numeric needs a number as the answer, not 'four'");
  EXPECT_EQ(refusal(ok + R"({"prompt":"y","answer":true})"),
            "tasks.jsonl:2: answer must be a string or a number");
  EXPECT_EQ(refusal(ok + R"({"prompt":7})"), "tasks.jsonl:2: prompt must be a string");
  EXPECT_EQ(refusal("\n\n"),
            "tasks.jsonl: no tasks (one JSON object per line, or a JSON array of ShareGPT "
            "conversations)");
}

// ShareGPT's own file shape: one JSON array, pretty-printed over many lines.
const std::string sharegpt = R"([
  {
    "id": "QWJhYvA_0",
    "conversations": [
      {"from": "system", "value": "You are terse."},
      {"from": "human", "value": "Summarize the plot of Hamlet."},
      {"from": "gpt", "value": "A prince avenges his father, and almost everyone dies."},
      {"from": "human", "value": "Shorter?"},
      {"from": "gpt", "value": "Revenge; deaths."},
      {"from": "human", "value": "Thanks [\"really\"] {ok}"}
    ]
  },
  {"id": "opened_by_gpt", "conversations": [{"from": "gpt", "value": "Hello!"},
                                            {"from": "human", "value": "Hi."}]},
  {"id": "empty", "conversations": []},
  {"conversations": [{"from": "user", "value": "no id"}, {"from": "assistant", "value": "ok"}],
   "model": "gpt-4"}
]
)";

TEST(Workload, ShareGptConversationsBecomeTasksOfTurns) {
  for (const bool as_lines : {false, true}) {
    std::string text = sharegpt;
    if (as_lines) {  // the same conversations as JSONL: one per line
      text.clear();
      int depth = 0;
      bool in_string = false;
      for (std::size_t i = 1; i + 1 < sharegpt.rfind(']'); ++i) {
        const char c = sharegpt[i];
        if (in_string && c == '\\') {
          text += c;
          text += sharegpt[++i];
          continue;
        }
        if (c == '"') in_string = !in_string;
        if (!in_string && (c == '{' || c == '[')) ++depth;
        if (!in_string && (c == '}' || c == ']')) --depth;
        if (!in_string && depth == 0 && c == ',') {
          text += '\n';
          continue;
        }
        if (c != '\n') text += c;
      }
    }
    std::string error;
    std::size_t skipped = 9;
    const auto w = read_tasks(text, "sg.json", error, &skipped);
    ASSERT_TRUE(w.has_value()) << error;
    EXPECT_EQ(skipped, 1u);  // "empty": nothing asked
    ASSERT_EQ(w->size(), 3u);
    const auto& h = (*w)[0];
    EXPECT_EQ(h.id, "QWJhYvA_0");
    ASSERT_EQ(h.messages.size(), 1u);
    EXPECT_EQ(h.messages[0].role, "system");
    ASSERT_EQ(h.turns.size(), 3u);
    EXPECT_EQ(h.turns[0].user, "Summarize the plot of Hamlet.");
    // The recorded reply's length is what the turn asks for: 54 characters, 14 tokens.
    EXPECT_EQ(h.turns[0].max_tokens, 14);
    EXPECT_EQ(h.turns[1].max_tokens, 4);
    EXPECT_EQ(h.turns[2].user, "Thanks [\"really\"] {ok}");
    EXPECT_EQ(h.turns[2].max_tokens, -1);  // no reply recorded
    // A reply before any question is not sent.
    ASSERT_EQ((*w)[1].turns.size(), 1u);
    EXPECT_EQ((*w)[1].turns[0].user, "Hi.");
    EXPECT_TRUE((*w)[1].messages.empty());
    // No id: named by its line (the array's element starts on line 16; as JSONL, line 4).
    EXPECT_EQ((*w)[2].id, as_lines ? "line4" : "line16");
    EXPECT_EQ((*w)[2].turns[0].max_tokens, 1);
  }
}

TEST(Workload, ABrokenShareGptEntryIsRefusedAtItsLine) {
  std::string error;
  auto bad = sharegpt;
  bad.replace(bad.find("\"gpt\", \"value\": \"Revenge"), 5, "\"bot\"");
  EXPECT_FALSE(read_tasks(bad, "sg.json", error));
  EXPECT_EQ(error,
            "sg.json:2: unknown from 'bot' in conversations (human, gpt, system; user, "
            "assistant, chatgpt, bard, bing, model)");
  EXPECT_FALSE(
      read_tasks("[\n  {\"conversations\": [{\"from\": \"human\"}]}\n]", "sg.json", error));
  EXPECT_EQ(error,
            "sg.json:2: each message of conversations needs a from and a value, both strings");
  EXPECT_FALSE(read_tasks("[\n{\"conversations\": 3}\n]", "sg.json", error));
  EXPECT_EQ(error, "sg.json:2: conversations must be a list of {from, value}");
  EXPECT_FALSE(
      read_tasks("[\n{\"conversations\": []},\n{\"conversations\": [] x}\n]", "sg.json", error));
  EXPECT_EQ(error.rfind("sg.json:3: not JSON", 0), 0u) << error;
  EXPECT_FALSE(read_tasks("[\n{\"conversations\": []},\n", "sg.json", error));
  EXPECT_EQ(error, "sg.json:3: the JSON array does not close");
  const std::string twice = R"({"id":"x","conversations":[{"from":"human","value":"a"}]})";
  EXPECT_FALSE(read_tasks(twice + "\n" + twice, "sg.jsonl", error));
  EXPECT_EQ(error, "sg.jsonl:2: a second task with id 'x'");
}

}  // namespace
}  // namespace tokentap::bench
