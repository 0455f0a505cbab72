// Synthetic workloads: a seed makes the same tasks; lengths follow their distribution within
// their bounds, counted as the simulator counts (four characters a token); requests share the
// pool's system prompts, a jittered share of them with a different start; a spec with an unknown
// key or a value out of range is refused with its file and line.
#include "bench/synthetic.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <set>

namespace tokentap::bench {
namespace {

// Words of a generated text.
std::size_t words(const std::string& s) {
  return s.empty() ? 0 : static_cast<std::size_t>(std::count(s.begin(), s.end(), ' ')) + 1;
}

synthetic_spec read(const std::string& yaml) {
  std::string err;
  auto s = read_synthetic(yaml, "w.yaml", err);
  EXPECT_TRUE(s) << err;
  return s.value_or(synthetic_spec{});
}

TEST(Synthetic, ASeedMakesTheSameTasks) {
  auto spec =
      read("synthetic:\n  requests: 20\n  seed: 3\n  input_tokens: {mean: 40, stddev: 10}\n");
  const auto a = synthetic_tasks(spec), b = synthetic_tasks(spec);
  ASSERT_EQ(a.size(), 20u);
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].id, "s" + std::to_string(i));
    EXPECT_EQ(a[i].messages.back().content, b[i].messages.back().content);
    EXPECT_EQ(a[i].max_tokens, b[i].max_tokens);
  }
  spec.seed = 4;
  EXPECT_NE(synthetic_tasks(spec)[0].messages.back().content, a[0].messages.back().content);
}

TEST(Synthetic, LengthsFollowTheirDistributionWithinTheirBounds) {
  const auto tasks =
      synthetic_tasks(read("synthetic:\n  requests: 4000\n  input_tokens: {mean: 300, stddev: 60}\n"
                           "  output_tokens: {mean: 100, stddev: 50, min: 80, max: 150}\n"));
  double sum = 0, sq = 0;
  for (const auto& t : tasks) {
    ASSERT_EQ(t.messages.size(), 1u);  // no system prompt asked for
    EXPECT_EQ(t.messages[0].role, "user");
    const auto n = static_cast<double>(words(t.messages[0].content));
    // One token per word as the simulator counts: four characters each, the last one's space
    // aside.
    EXPECT_EQ((t.messages[0].content.size() + 3) / 4, words(t.messages[0].content));
    sum += n;
    sq += n * n;
    EXPECT_GE(t.max_tokens, 80);
    EXPECT_LE(t.max_tokens, 150);
  }
  const double mean = sum / 4000, sd = std::sqrt(sq / 4000 - mean * mean);
  EXPECT_NEAR(mean, 300, 4);
  EXPECT_NEAR(sd, 60, 4);
  const auto fixed = synthetic_tasks(read("synthetic:\n  requests: 3\n  input_tokens: 50\n"));
  for (const auto& t : fixed) EXPECT_EQ(words(t.messages[0].content), 50u);
}

TEST(Synthetic, RequestsShareThePoolsSystemPromptsAndAJitteredShareBreaksThem) {
  const auto tasks = synthetic_tasks(read(
      "synthetic:\n  requests: 2000\n  input_tokens: 20\n  system_prompt: {tokens: 200, pool: 4}\n"
      "  cache_breakers: {jittered_system_prompt: 0.25}\n"));
  std::set<std::string> pool;
  std::size_t jittered = 0;
  for (const auto& t : tasks) {
    ASSERT_EQ(t.messages.size(), 2u);
    EXPECT_EQ(t.messages[0].role, "system");
    const auto& s = t.messages[0].content;
    if (s.starts_with("run ")) {
      ++jittered;
      EXPECT_EQ(words(s), 202u);  // two words put first
    } else {
      EXPECT_EQ(words(s), 200u);
      pool.insert(s);
    }
  }
  EXPECT_EQ(pool.size(), 4u);
  EXPECT_NEAR(static_cast<double>(jittered) / 2000, 0.25, 0.03);
}

TEST(Synthetic, ABrokenSpecIsRefusedWithItsLine) {
  std::string err;
  EXPECT_FALSE(read_synthetic("synthetic:\n  requests: 5\n  inptu_tokens: 3\n", "w.yaml", err));
  EXPECT_EQ(err,
            "w.yaml:3: unknown key 'inptu_tokens' in synthetic (requests, conversations, turns, "
            "think_time_ms, seed, input_tokens, output_tokens, system_prompt, cache_breakers)");
  EXPECT_FALSE(read_synthetic("synthetic:\n  requests: 0\n", "w.yaml", err));
  EXPECT_EQ(err, "w.yaml:2: requests must be a number from 1 to 1e+07");
  EXPECT_FALSE(
      read_synthetic("synthetic:\n  output_tokens: {mean: 10, min: 9, max: 3}\n", "w.yaml", err));
  EXPECT_EQ(err, "w.yaml:2: output_tokens: min is over max");
  EXPECT_FALSE(read_synthetic("synthetic:\n  cache_breakers: {jittered_system_prompt: 0.1}\n",
                              "w.yaml", err));
  EXPECT_EQ(err, "w.yaml:2: jittered_system_prompt needs a system_prompt");
  EXPECT_FALSE(read_synthetic("synthetic:\n  requests: 3\n  conversations: 3\n", "w.yaml", err));
  EXPECT_EQ(err, "w.yaml:3: conversations and requests: one or the other");
  EXPECT_FALSE(read_synthetic("synthetic:\n  think_time_ms: 5\n", "w.yaml", err));
  EXPECT_EQ(err, "w.yaml:2: think_time_ms needs conversations (requests are single-turn)");
  EXPECT_FALSE(
      read_synthetic("synthetic:\n  cache_breakers:\n    edited_history: 0.2\n", "w.yaml", err));
  EXPECT_EQ(err, "w.yaml:3: edited_history needs conversations (requests are single-turn)");
  EXPECT_FALSE(read_synthetic(
      "synthetic:\n  conversations: 2\n  cache_breakers: {context_window: 0}\n", "w.yaml", err));
  EXPECT_EQ(err, "w.yaml:3: context_window must be a number from 1 to 1.67772e+07");
  EXPECT_FALSE(read_synthetic("synthetic:\n  conversations: 2\n  turns: {mean: 3, max: 5000}\n",
                              "w.yaml", err));
  EXPECT_EQ(err, "w.yaml:3: turns: at most 1000");
  EXPECT_FALSE(read_synthetic("synthetic:\n  requests: [1\n", "w.yaml", err));
  EXPECT_EQ(err.rfind("w.yaml:", 0), 0u) << err;
}

TEST(Synthetic, ConversationsHaveTheirTurnsThinkTimesAndBreakers) {
  const auto spec = read(
      "synthetic:\n  conversations: 400\n  seed: 9\n  turns: {mean: 4, stddev: 2, min: 2, max: 6}\n"
      "  think_time_ms: {mean: 500, stddev: 100, min: 0}\n  input_tokens: 30\n"
      "  output_tokens: 12\n  system_prompt: {tokens: 50}\n"
      "  cache_breakers: {context_window: 300, edited_history: 0.25}\n");
  const auto tasks = synthetic_tasks(spec);
  ASSERT_EQ(tasks.size(), 400u);
  std::size_t later = 0, editable = 0, edited = 0;
  double think = 0;
  for (std::size_t i = 0; i < tasks.size(); ++i) {
    const auto& t = tasks[i];
    EXPECT_EQ(t.id, "c" + std::to_string(i));
    ASSERT_EQ(t.messages.size(), 1u);  // the opening: its system prompt
    EXPECT_EQ(t.messages[0].role, "system");
    EXPECT_EQ(t.context_window, 300);
    ASSERT_GE(t.turns.size(), 2u);
    ASSERT_LE(t.turns.size(), 6u);
    EXPECT_EQ(t.turns[0].think_ms, 0);  // the first turn starts the conversation
    EXPECT_EQ(t.turns[0].edit_answer, -1);
    EXPECT_EQ(t.turns[1].edit_answer, -1);  // the first answer was never part of a prompt yet
    for (std::size_t k = 0; k < t.turns.size(); ++k) {
      EXPECT_EQ(words(t.turns[k].user), 30u);
      EXPECT_EQ(t.turns[k].max_tokens, 12);
      if (k == 0) continue;
      ++later;
      think += t.turns[k].think_ms;
      if (k == 1) continue;
      ++editable;
      if (t.turns[k].edit_answer >= 0) {
        ++edited;
        // An answer an earlier turn resent: before the last one.
        EXPECT_LT(t.turns[k].edit_answer, static_cast<int>(k) - 1);
      }
    }
  }
  EXPECT_NEAR(think / static_cast<double>(later), 500, 15);
  EXPECT_NEAR(static_cast<double>(edited) / static_cast<double>(editable), 0.25, 0.04);
  // The same seed, the same conversations.
  EXPECT_EQ(synthetic_tasks(spec)[7].turns[1].user, tasks[7].turns[1].user);
}

TEST(Synthetic, AYamlWorkloadIsToldFromJsonl) {
  EXPECT_TRUE(is_synthetic("\n# a comment first\nsynthetic:\n"));
  EXPECT_TRUE(is_synthetic("  \nsynthetic:\n  requests: 3\n"));
  EXPECT_FALSE(is_synthetic(R"({"id":"a","prompt":"x"})"));
}

}  // namespace
}  // namespace tokentap::bench
