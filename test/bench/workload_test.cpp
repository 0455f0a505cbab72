// JSONL workloads of tasks (DESIGN.md §14): what a line may say, what each task becomes, and
// every way a line is refused — with the file's name and the line at fault.
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
            "grader, max_tokens)");
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
  EXPECT_EQ(refusal("\n\n"), "tasks.jsonl: no tasks (one JSON object per line)");
}

}  // namespace
}  // namespace tokentap::bench
