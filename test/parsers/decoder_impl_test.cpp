// The pieces every provider's walk shares (decoder_impl.hpp): the `<think>` splitter, however its
// tags are cut across deltas; counts and engine durations read as both walks read them; what a
// first payload shows the sniffs.
#include "parsers/decoder_impl.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

namespace tokentap::parsers {
namespace {

// The channel runs a splitter makes of `deltas`, merged: "r:" reasoning, "c:" content.
std::string split(const std::vector<std::string>& deltas) {
  think_splitter t;
  std::string out;
  bool last = false, any = false;
  const auto emit = [&](bool in_think, std::string_view part) {
    if (part.empty()) return;
    if (!any || in_think != last) out += std::string(any ? "|" : "") + (in_think ? "r:" : "c:");
    out += part;
    last = in_think;
    any = true;
  };
  for (const auto& d : deltas) t.feed(d, emit);
  t.flush(emit);
  return out;
}

TEST(ThinkSplitter, TagsCutAnywhereAcrossDeltasSplitTheSameWay) {
  const std::string text = "<think>plan a<b</think>answer <i>x</i>";
  const std::string whole = split({text});
  EXPECT_EQ(whole, "r:plan a<b|c:answer <i>x</i>");
  for (std::size_t i = 1; i < text.size(); ++i)
    for (std::size_t j = i; j < text.size(); ++j)
      EXPECT_EQ(split({text.substr(0, i), text.substr(i, j - i), text.substr(j)}), whole)
          << i << "," << j;
}

TEST(ThinkSplitter, AHeldPrefixThatNeverBecomesATagIsTextAtTheEnd) {
  EXPECT_EQ(split({"5 <", "/thi"}), "c:5 </thi");
  EXPECT_EQ(split({"<think>a</thi"}), "r:a</thi");
  // feed() says when the prefix it holds came with the delta fed (the caller keeps that
  // delta's time for the flush), and not while it holds one begun earlier.
  think_splitter held;
  const auto none = [](bool, std::string_view) {};
  EXPECT_FALSE(held.feed("plain", none));
  EXPECT_TRUE(held.feed("a <", none));
  EXPECT_FALSE(held.feed("/th", none));  // "</th": still the first delta's prefix
  EXPECT_TRUE(held.feed("x <", none));   // "</thx <": text, and a new prefix from this delta
  EXPECT_FALSE(held.feed("b", none));    // "<b": text
  std::string flushed = "?";
  held.flush([&](bool, std::string_view part) { flushed = part; });
  EXPECT_EQ(flushed, "?");  // nothing held
  think_splitter t;
  EXPECT_TRUE(t.passes_whole("plain"));
  EXPECT_FALSE(t.passes_whole("a<b"));
}

// One JSON value as the walks read one.
template <class F>
auto read_value(const std::string& json, F&& f) {
  simdjson::ondemand::parser parser;
  const simdjson::padded_string padded(json);
  simdjson::ondemand::document doc;
  EXPECT_FALSE(parser.iterate(padded).get(doc));
  simdjson::ondemand::value v;
  EXPECT_FALSE(doc["v"].get(v));
  return f(v);
}

TEST(DecoderImpl, CountsAreWholeNumbersAndAnythingElseIsNotReported) {
  const auto count = [](const std::string& v) {
    return read_value("{\"v\":" + v + "}", [](od::value x) { return num(x); });
  };
  EXPECT_EQ(count("12"), 12);
  EXPECT_EQ(count("12.0"), 12);
  EXPECT_EQ(count("4.2e24"), -1);  // out of range: not reported, never undefined behaviour
  EXPECT_EQ(count("-3.5"), -1);
  EXPECT_EQ(count("\"7\""), -1);
}

TEST(DecoderImpl, EngineDurationsAreAbsentForNullAndNoDurationForGarbage) {
  const auto ms = [](const std::string& v, double scale = 1) {
    return read_value("{\"v\":" + v + "}", [&](od::value x) { return duration_ms(x, scale); });
  };
  EXPECT_EQ(ms("12.5"), 12.5);
  EXPECT_DOUBLE_EQ(*ms("2000000", 1e-6), 2.0);  // Ollama's nanoseconds
  EXPECT_FALSE(ms("null").has_value());
  for (const char* bad : {"-1", "\"3\"", "1e400", "2e9"}) {
    const auto d = ms(bad);
    ASSERT_TRUE(d.has_value()) << bad;
    EXPECT_TRUE(std::isnan(*d)) << bad;
  }
}

TEST(DecoderImpl, ASniffSeesTheKeysTheTypeAndTheEventType) {
  const std::string_view keys[] = {"model", "done"};
  const sniffed s{"", "", keys};
  EXPECT_TRUE(s.has("done"));
  EXPECT_FALSE(s.has("choices"));
  EXPECT_TRUE(sniff_ollama(s));
  EXPECT_FALSE(sniff_openai_chat(s));
  EXPECT_TRUE(sniff_anthropic({"message_start", "", {}}));
  EXPECT_TRUE(sniff_responses({"", "response.created", {}}));
}

}  // namespace
}  // namespace tokentap::parsers
