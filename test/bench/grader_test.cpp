// Graded tasks (DESIGN.md §14): the answer is read after the reasoning, from where a response
// states it, and each grader judges it as its docs say — including the answers that look right
// to a careless extractor and are not.
#include "bench/grader.hpp"

#include <gtest/gtest.h>

#include <string>

namespace tokentap::bench {
namespace {

grader make(std::string_view kind, std::string_view expected) {
  std::string error;
  auto g = grader::make(kind, expected, error);
  EXPECT_TRUE(g.has_value()) << error;
  return g ? *g : grader{};
}

TEST(Grader, TheAnswerIsReadAfterTheReasoning) {
  EXPECT_EQ(after_reasoning("<think>2+2 is 5? no</think>\nThe answer is 4."), "\nThe answer is 4.");
  EXPECT_EQ(after_reasoning("no reasoning here"), "no reasoning here");
  // A response that reasons, then states: the reasoning's "answer" is not the answer.
  const auto g = make("numeric", "4");
  EXPECT_TRUE(g.judge("<think>The answer is 5, or is it... 2+2</think>So 2+2 = 4.").correct);
  EXPECT_FALSE(g.judge("<think>The answer is 4</think>The answer is 5.").correct);
}

TEST(Grader, WhereAResponseStatesItsAnswer) {
  EXPECT_EQ(stated_answer("Work: 3*4 = 12, so \\boxed{12}. Then \\boxed{\\frac{1}{2}}"),
            "\\frac{1}{2}");
  EXPECT_EQ(stated_answer("Thinking about it.\nThe answer is: **Paris**."), "Paris");
  EXPECT_EQ(stated_answer("first answer: x\nFinal Answer: y"), "y");
  EXPECT_EQ(stated_answer("line one\nline two.\n\n  \n"), "line two");
  EXPECT_EQ(stated_answer(""), "");
  EXPECT_EQ(stated_answer("The answer is\n42"), "42");  // nothing after the marker: last line
}

TEST(Grader, ExactIgnoresCaseSpacingAndAClosingPeriod) {
  const auto g = make("exact", "New  York");
  EXPECT_TRUE(g.judge("The answer is new york.").correct);
  EXPECT_TRUE(g.judge("Answer: **NEW YORK**").correct);
  const auto v = g.judge("The answer is New York City.");
  EXPECT_FALSE(v.correct);
  EXPECT_EQ(v.extracted, "new york city");
}

TEST(Grader, NumericTakesTheStatedAnswersLastNumber) {
  const auto g = make("numeric", "1234.5");
  EXPECT_TRUE(g.judge("Adding them: 1,000 + 234.5 gives 1,234.5.").correct);
  EXPECT_TRUE(g.judge("\\boxed{1234.50}").correct);
  EXPECT_FALSE(g.judge("The answer is 1234.6").correct);
  EXPECT_EQ(g.judge("no digits at all").extracted, "");
  EXPECT_EQ(last_number("from 2023-2024"), 2024);
  EXPECT_EQ(last_number("it is -17 degrees"), -17);
  EXPECT_EQ(last_number("c = 3e8 m/s"), 3e8);
  EXPECT_EQ(last_number("eps 1.5E-3."), 1.5e-3);
  EXPECT_EQ(last_number("version v2"), 2);
  EXPECT_FALSE(last_number("none").has_value());
  EXPECT_TRUE(make("numeric", "-0.25").judge("x = -0.25").correct);
  EXPECT_TRUE(make("numeric", "1000000").judge("one million: 1e6").correct);
}

TEST(Grader, ChoiceTakesTheFirstStandAloneLetter) {
  const auto g = make("choice", "b");
  EXPECT_TRUE(g.judge("Considering each option... The answer is (B).").correct);
  EXPECT_TRUE(g.judge("B) 42").correct);
  EXPECT_TRUE(g.judge("Answer: B").correct);
  const auto v = g.judge("The answer is C, not B.");
  EXPECT_FALSE(v.correct);
  EXPECT_EQ(v.extracted, "C");
  // Capitals inside words are not choices.
  EXPECT_EQ(g.judge("Answer: Because of D").extracted, "D");
}

TEST(Grader, RegexSearchesTheWholeAnswer) {
  const auto g = make("regex", R"(\b(Paris|paris)\b)");
  EXPECT_TRUE(g.judge("It is the capital: Paris, on the Seine.\nMore text.").correct);
  EXPECT_FALSE(g.judge("<think>Paris?</think>Lyon").correct);  // not in the reasoning
  EXPECT_EQ(g.judge("paris").extracted, "paris");
}

// Step consistency compares what a conclusion step and the final answer state, as the grader
// reads them.
TEST(Grader, AConclusionAndAnAnswerThatStateTheSame) {
  const auto numeric = make("numeric", "12");
  EXPECT_EQ(numeric.extract("Therefore, 3 × 4 = 12."), numeric.extract("The answer is 12"));
  EXPECT_NE(numeric.extract("So it is 11."), numeric.extract("The answer is 12"));
  EXPECT_EQ(numeric.extract("Therefore, we are done."), "");
  const auto choice = make("choice", "A");
  EXPECT_EQ(choice.extract("Thus the answer is (C)."), "C");
  EXPECT_EQ(make("exact", "paris").extract("So: Paris."), "so: paris");
}

TEST(Grader, AGraderThatCannotWorkIsRefusedWithItsReason) {
  std::string error;
  EXPECT_FALSE(grader::make("fuzzy", "x", error));
  EXPECT_EQ(error, "grader must be exact, numeric, choice or regex, not 'fuzzy'");
  EXPECT_FALSE(grader::make("numeric", "four", error));
  EXPECT_EQ(error, "grader numeric needs a number as the answer, not 'four'");
  EXPECT_FALSE(grader::make("choice", "AB", error));
  EXPECT_EQ(error, "grader choice needs one letter as the answer, not 'AB'");
  EXPECT_FALSE(grader::make("regex", "(unclosed", error));
  EXPECT_NE(error.find("grader regex: '(unclosed' is not a pattern"), std::string::npos) << error;
  EXPECT_FALSE(grader::make("exact", "  ", error));
  EXPECT_EQ(error, "grader exact needs a non-empty answer");
}

}  // namespace
}  // namespace tokentap::bench
