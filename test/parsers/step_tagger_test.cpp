// The step tagger against design/STEPS.md: every labelled dev example (test/data/steps-dev.json,
// copied from shared/fixtures) fed whole, one token at a time as 1-, 2- and 3-character deltas,
// and split at every byte; plus a case for each rule, including what must not start a step.
#include "parsers/step_tagger.hpp"

#include <gtest/gtest.h>

#include <simdjson.h>

#include <algorithm>
#include <fstream>
#include <random>
#include <sstream>

namespace tokentap::parsers {
namespace {

using labels = std::vector<std::pair<std::uint64_t, std::string>>;

labels run(const std::vector<std::string_view>& deltas) {
  step_tagger t;
  std::int64_t ts = 0;
  for (auto d : deltas) t.feed(d, ++ts);
  t.finish();
  labels out;
  for (const auto& s : t.steps()) out.emplace_back(s.offset, std::string(to_string(s.kind)));
  return out;
}

// Splits text into deltas of n UTF-8 characters.
std::vector<std::string_view> by_chars(std::string_view text, std::size_t n) {
  std::vector<std::string_view> out;
  std::size_t start = 0, chars = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const bool lead = (static_cast<unsigned char>(text[i]) & 0xC0) != 0x80;
    if (lead && chars == n) {
      out.push_back(text.substr(start, i - start));
      start = i;
      chars = 0;
    }
    if (lead) ++chars;
  }
  out.push_back(text.substr(start));
  return out;
}

// Every way of feeding must give `expected`.
void check_all_ways(std::string_view text, const labels& expected) {
  EXPECT_EQ(run({text}), expected) << "whole: " << text;
  for (std::size_t n : {1, 2, 3})
    EXPECT_EQ(run(by_chars(text, n)), expected) << n << "-char deltas: " << text;
  for (std::size_t i = 1; i < text.size(); ++i) {
    const auto got = run({text.substr(0, i), text.substr(i)});
    if (got != expected) {
      ADD_FAILURE() << "split at byte " << i << ": " << text;
      return;
    }
  }
}

TEST(StepTagger, DevExamplesEveryWay) {
  std::ifstream in(std::string(TOKENTAP_SOURCE_DIR) + "/test/data/steps-dev.json");
  std::stringstream ss;
  ss << in.rdbuf();
  simdjson::padded_string json(ss.str());
  simdjson::ondemand::parser p;
  auto doc = p.iterate(json);
  int examples = 0;
  for (auto ex : doc.get_array()) {
    std::string_view text_view;
    ASSERT_FALSE(ex["text"].get_string().get(text_view));
    const std::string text(text_view);
    labels expected;
    for (auto st : ex["steps"].get_array()) {
      std::uint64_t off = 0;
      std::string_view kind;
      ASSERT_FALSE(st["offset"].get_uint64().get(off));
      ASSERT_FALSE(st["kind"].get_string().get(kind));
      expected.emplace_back(off, std::string(kind));
    }
    SCOPED_TRACE(text);
    check_all_ways(text, expected);
    ++examples;
  }
  EXPECT_EQ(examples, 8);
}

TEST(StepTagger, TriggersOnlyAtLineOrSentenceStarts) {
  check_all_ways("We retry. so then the retry fires and Therefore nothing.", {{0, "other"}});
  check_all_ways("Look. So it is.", {{0, "other"}, {6, "conclusion"}});
  check_all_ways("Value 28.27. Then done.", {{0, "other"}, {13, "step"}});
  check_all_ways("Alpha.\nWait, no.", {{0, "other"}, {7, "backtrack"}});
}

TEST(StepTagger, EnglishTriggersNeedAFollower) {
  check_all_ways("Ok. Nowhere to go. Now go.", {{0, "other"}, {19, "step"}});
  check_all_ways("Ok. Checkpoint reached. Check: fine.", {{0, "other"}, {24, "verification"}});
  check_all_ways("Ok. Thus", {{0, "other"}, {4, "conclusion"}});  // end of text is a follower
}

TEST(StepTagger, LongestTriggerWins) {
  check_all_ways("A. But wait, no.", {{0, "other"}, {3, "backtrack"}});
  check_all_ways("A. Let me double-check it.", {{0, "other"}, {3, "verification"}});
  check_all_ways("综上所述，完成。", {{0, "conclusion"}});
}

TEST(StepTagger, BlankLinesAndMarkers) {
  check_all_ways("Intro\n\nplain text\n  \nmore", {{0, "other"}, {7, "other"}, {21, "other"}});
  check_all_ways("A\n10. ten\n100. not\n(2) two\n* star\n\xE2\x80\xA2 dot\n-dash",
                 {{0, "other"}, {2, "step"}, {19, "step"}, {27, "step"}, {34, "step"}});
  check_all_ways("A\nStep 12: go\nSteps are fine\n第十步：好\n第几步",
                 {{0, "other"}, {2, "step"}, {29, "step"}});
  check_all_ways("A\n1)x\n2) y", {{0, "other"}, {6, "step"}});
  // Found by fuzz_step_tagger (test/fuzz/regressions/step_tagger-long-numeral-run): a numeral run
  // longer than the lookahead decided differently whole and split.  Eight numerals at most.
  check_all_ways("A\n第12345678步\n第" + std::string(70, '7') + "二步",
                 {{0, "other"}, {2, "step"}});
}

TEST(StepTagger, ChineseSentenceEnds) {
  check_all_ways("计算；然后结束！因此对", {{0, "other"}, {9, "step"}, {24, "conclusion"}});
}

TEST(StepTagger, TimestampsTokensAndRedundancy) {
  step_tagger t;
  t.feed("First, add 2 and 3.", 100);
  t.feed("\n\n", 150);
  t.feed("Wait, ", 200);
  t.feed("let me add 2 and 3 again.", 250);
  t.feed("\n\nFirst, add 2 and 3.", 300);
  t.finish();
  const auto& s = t.steps();
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[0].t_ns, 100);
  EXPECT_EQ(s[0].tokens, 1u);
  EXPECT_EQ(s[1].kind, step_kind::backtrack);
  EXPECT_EQ(s[1].t_ns, 200);
  EXPECT_EQ(s[1].end_ns, 250);
  EXPECT_EQ(s[1].tokens, 3u);  // the blank-line delta introduces it
  EXPECT_FALSE(s[1].redundant);
  EXPECT_EQ(s[2].t_ns, 300);  // the step starts inside the delta that arrived at 300
  EXPECT_EQ(s[2].tokens, 1u);
  EXPECT_TRUE(s[2].redundant);  // same text as step 0
  EXPECT_EQ(t.redundant_tokens(), 1u);
}

// Times and token counts against their definition, for random texts cut into random deltas (the
// tagger scans a delta where it arrived unless text is held back, and keeps only an undecided
// rest): a step's time is the arrival of the delta holding its first byte; a delta belongs to the
// step holding its first non-blank byte — the next one after it for a blank delta, the first step
// for deltas before it — and a step ends with the arrival of its last delta.
TEST(StepTagger, TimesAndTokensOfRandomDeltasMatchTheirDefinition) {
  std::mt19937 rng(5);
  const std::string_view pieces[] = {
      " ",   "  ",    "\n",     "\n\n",         ".",        "!",    "?",
      ",",   "First", "First,", "Therefore",    " Wait,",   "Hmm",  "So",
      "1. ", "- ",    "(3)",    "Step 4",       "第一步",   "首先", "因此",
      "。",  "word",  "the",    "Let me check", "Actually", "\t",   "\r\n",
      "é",   "😀",     "\xFF"};
  const auto blank = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
  for (int round = 0; round < 3000; ++round) {
    std::string text;
    for (auto n = rng() % 40; n > 0; --n) text += pieces[rng() % std::size(pieces)];
    std::vector<std::pair<std::size_t, std::int64_t>> deltas;  // (start, arrival)
    step_tagger t;
    for (std::size_t i = 0; i < text.size();) {
      const auto k = std::min<std::size_t>(text.size() - i, 1 + rng() % (rng() % 3 ? 12 : 2));
      deltas.emplace_back(i, 10 * static_cast<std::int64_t>(deltas.size() + 1));
      t.feed(std::string_view(text).substr(i, k), deltas.back().second);
      i += k;
    }
    t.finish();
    const auto& steps = t.steps();
    if (steps.empty()) continue;
    // The step holding byte q (the first step for bytes before it).
    const auto step_of = [&](std::size_t q) {
      std::size_t i = 0;
      while (i + 1 < steps.size() && steps[i + 1].offset <= q) ++i;
      return i;
    };
    std::vector<std::uint32_t> tokens(steps.size(), 0);
    std::vector<std::int64_t> end(steps.size());
    for (std::size_t i = 0; i < steps.size(); ++i) {
      std::int64_t at = 0;  // arrival of the delta holding the step's first byte
      for (const auto& [start, arrival] : deltas)
        if (start <= steps[i].offset) at = arrival;
      ASSERT_EQ(steps[i].t_ns, at) << "step " << i << " of: " << text;
      end[i] = at;
    }
    for (const auto& [start, arrival] : deltas) {
      auto q = start;
      while (q < text.size() && blank(text[q])) ++q;
      const auto i = step_of(q);
      ++tokens[i];
      end[i] = std::max(end[i], arrival);
    }
    for (std::size_t i = 0; i < steps.size(); ++i) {
      ASSERT_EQ(steps[i].tokens, tokens[i]) << "step " << i << " of: " << text;
      ASSERT_EQ(steps[i].end_ns, end[i]) << "step " << i << " of: " << text;
    }
  }
}

// The last step (closed by finish) is compared with every earlier one like the others, though its
// own trigrams are no longer indexed.
TEST(StepTagger, TheLastStepIsComparedWithEveryEarlierOne) {
  step_tagger t;
  t.feed("First, add 2 and 3.\n\nThen, add 2 and 3.\n\nFirst, add 2 and 3.", 1);
  t.finish();
  ASSERT_EQ(t.steps().size(), 3u);
  EXPECT_FALSE(t.steps()[0].redundant);
  EXPECT_FALSE(t.steps()[1].redundant);  // "then" changes a trigram of three
  EXPECT_TRUE(t.steps()[2].redundant);
  // Earlier steps without a single word leave nothing to repeat.
  step_tagger marks;
  marks.feed("...\n\n!!!\n\nFirst, add 2 and 3.", 1);
  marks.finish();
  ASSERT_EQ(marks.steps().size(), 3u);
  EXPECT_FALSE(marks.steps()[2].redundant);
  EXPECT_EQ(marks.redundant_tokens(), 0u);
  // One step only: not redundant.
  step_tagger one;
  one.feed("First, add 2 and 3.", 1);
  one.finish();
  ASSERT_EQ(one.steps().size(), 1u);
  EXPECT_FALSE(one.steps()[0].redundant);
}

TEST(StepTagger, ConfiguredTriggersReplaceOrAdd) {
  auto trig = step_triggers::defaults();
  trig.step.push_back("Primero");
  step_tagger t(trig);
  t.feed("Hola. Primero, esto.", 1);
  t.finish();
  ASSERT_EQ(t.steps().size(), 2u);
  EXPECT_EQ(t.steps()[1].kind, step_kind::step);
}

}  // namespace
}  // namespace tokentap::parsers
