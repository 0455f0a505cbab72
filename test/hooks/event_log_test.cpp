// event_log: what goes in comes out, in order, across chunks, every entry on the alignment its
// non-temporal stores need.
#include "hooks/event_log.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace tokentap::hooks {
namespace {

std::string random_bytes(std::mt19937& rng, std::size_t n) {
  std::string bytes(n, '\0');
  for (auto& c : bytes) c = static_cast<char>(rng());
  return bytes;
}

TEST(EventLog, EntriesComeBackInOrderAligned) {
  std::mt19937 rng(8);
  std::vector<std::pair<std::int64_t, std::string>> in;
  event_log log;
  for (int i = 0; i < 600; ++i) {
    // Every length around the line and piece boundaries, then random ones up to 5 KiB.
    const auto n = i < 200 ? static_cast<std::size_t>(i)
                           : std::uniform_int_distribution<std::size_t>(0, 5000)(rng);
    const auto bytes = random_bytes(rng, n);
    in.emplace_back(i * 1000 + 7, bytes);
    log.append(in.back().first, bytes);
  }
  log.seal();
  std::size_t k = 0;
  log.for_each([&](std::int64_t t_us, std::string_view bytes) {
    ASSERT_LT(k, in.size());
    EXPECT_EQ(t_us, in[k].first) << k;
    EXPECT_EQ(bytes, in[k].second) << k;
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(bytes.data()) % event_log::align, 0u) << k;
    ++k;
  });
  EXPECT_EQ(k, in.size());
  EXPECT_EQ(event_log::entry_bytes(0), 16u);
  EXPECT_EQ(event_log::entry_bytes(1), 32u);
  EXPECT_EQ(event_log::entry_bytes(16), 32u);
  EXPECT_EQ(event_log::entry_bytes(17), 48u);

  event_log moved(std::move(log));
  std::size_t again = 0;
  moved.for_each(
      [&](std::int64_t, std::string_view bytes) { EXPECT_EQ(bytes, in[again++].second); });
  EXPECT_EQ(again, in.size());
}

// Texts logged between the reads (the trace's response text): for_each sees only the reads,
// for_each_text only the texts, with their tags, each in order, across chunks.
TEST(EventLog, TaggedTextsStayOutOfTheReads) {
  std::mt19937 rng(9);
  std::vector<std::pair<std::int64_t, std::string>> reads;
  std::vector<std::string> texts[3];
  event_log log;
  for (int i = 0; i < 3000; ++i) {
    const auto n = std::uniform_int_distribution<std::size_t>(0, i % 7 == 0 ? 300 : 40)(rng);
    const auto bytes = random_bytes(rng, n);
    const auto what = std::uniform_int_distribution<unsigned>(0, 2)(rng);
    if (what == 0) {
      reads.emplace_back(-i, bytes);  // times are any int64 (a negative one too)
      log.append(-i, bytes);
    } else {
      texts[what].push_back(bytes);
      log.append_text(what, bytes);
    }
  }
  log.seal();
  std::size_t k = 0;
  log.for_each([&](std::int64_t t_us, std::string_view bytes) {
    ASSERT_LT(k, reads.size());
    EXPECT_EQ(t_us, reads[k].first) << k;
    EXPECT_EQ(bytes, reads[k].second) << k;
    ++k;
  });
  EXPECT_EQ(k, reads.size());
  std::size_t seen[3] = {};
  log.for_each_text([&](unsigned tag, std::string_view t) {
    ASSERT_TRUE(tag == 1 || tag == 2) << tag;
    ASSERT_LT(seen[tag], texts[tag].size()) << tag;
    EXPECT_EQ(t, texts[tag][seen[tag]]) << tag << " " << seen[tag];
    ++seen[tag];
  });
  EXPECT_EQ(seen[1], texts[1].size());
  EXPECT_EQ(seen[2], texts[2].size());
}

}  // namespace
}  // namespace tokentap::hooks
