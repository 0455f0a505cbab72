// The list of cache lines a stream's next event touches (parsers/hot_lines.hpp): every line of
// every range added, once, in order; what does not fit is dropped, never written past the list.
#include "parsers/hot_lines.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

namespace tokentap::parsers {
namespace {

constexpr std::uintptr_t line = hot_lines::line;

std::vector<std::uintptr_t> lines_of(const hot_lines& l) {
  std::vector<std::uintptr_t> out;
  l.for_each_line([&](const void* p) { out.push_back(reinterpret_cast<std::uintptr_t>(p)); });
  return out;
}

// The lines [p, p + bytes) covers, by definition.
std::vector<std::uintptr_t> expected(const char* p, std::size_t bytes) {
  std::vector<std::uintptr_t> out;
  const auto first = reinterpret_cast<std::uintptr_t>(p);
  for (auto at = first & ~(line - 1); at < first + bytes; at += line) out.push_back(at);
  return out;
}

TEST(HotLines, EveryLineOfARangeOnceInOrder) {
  alignas(64) static char arena[64 * 200];
  std::mt19937 rng(7);
  for (int round = 0; round < 2000; ++round) {
    hot_lines l;
    std::vector<std::uintptr_t> want;
    // A few ranges each (not more than fit: the longest takes three entries).
    for (int k = 0; k < 5; ++k) {
      const auto bytes = std::uniform_int_distribution<std::size_t>(1, 64 * 150)(rng);
      const auto at = std::uniform_int_distribution<std::size_t>(0, sizeof arena - bytes)(rng);
      l.add(arena + at, bytes);
      const auto e = expected(arena + at, bytes);
      want.insert(want.end(), e.begin(), e.end());
    }
    ASSERT_EQ(lines_of(l), want) << "round " << round;
  }
}

TEST(HotLines, ARangeOverSixtyFourLinesTakesMoreEntries) {
  alignas(64) static char arena[64 * 130];
  hot_lines l;
  l.add(arena, 64 * 64);  // exactly one entry's worth
  EXPECT_EQ(l.size(), 1u);
  l.add(arena, 64 * 64 + 1);  // one line more: two
  EXPECT_EQ(l.size(), 3u);
  l.add_range(arena + 63, arena + 65);  // straddles a line boundary: one entry of two lines
  EXPECT_EQ(l.size(), 4u);
  const auto got = lines_of(l);
  ASSERT_EQ(got.size(), 64u + 65u + 2u);
  EXPECT_EQ(got.back(), reinterpret_cast<std::uintptr_t>(arena) + line);
}

TEST(HotLines, NullAndEmptyRangesAreIgnored) {
  char byte = 0;
  hot_lines l;
  l.add(nullptr, 100);
  l.add(&byte, 0);
  EXPECT_EQ(l.size(), 0u);
  l.add_range(&byte, &byte);
  l.add_range(&byte + 1, &byte);  // inverted
  EXPECT_EQ(l.size(), 0u);
  l.add(&byte);
  EXPECT_EQ(lines_of(l), expected(&byte, 1));
  l.prefetch();
  l.clear();
  EXPECT_EQ(l.size(), 0u);
  EXPECT_TRUE(lines_of(l).empty());
}

TEST(HotLines, AFullListKeepsTheFirstEntriesAndDropsTheRest) {
  alignas(64) static char arena[64 * 100];
  hot_lines l;
  for (std::size_t i = 0; i < hot_lines::capacity + 10; ++i) l.add(arena + i * 64 * 2);
  EXPECT_EQ(l.size(), hot_lines::capacity);
  const auto got = lines_of(l);
  ASSERT_EQ(got.size(), hot_lines::capacity);
  for (std::size_t i = 0; i < got.size(); ++i)
    EXPECT_EQ(got[i], reinterpret_cast<std::uintptr_t>(arena + i * 64 * 2));
  // A long range added to a nearly full list keeps what fits of it.
  hot_lines m;
  for (std::size_t i = 0; i + 1 < hot_lines::capacity; ++i) m.add(arena);
  m.add(arena, 64 * 100);
  EXPECT_EQ(m.size(), hot_lines::capacity);
  EXPECT_EQ(lines_of(m).size(), hot_lines::capacity - 1 + 64);
}

}  // namespace
}  // namespace tokentap::parsers
