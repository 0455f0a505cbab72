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

TEST(EventLog, EntriesComeBackInOrderAligned) {
  std::mt19937 rng(8);
  std::vector<std::pair<std::int64_t, std::string>> in;
  event_log log;
  for (int i = 0; i < 600; ++i) {
    // Every length around the line and piece boundaries, then random ones up to 5 KiB.
    const auto n = i < 200 ? static_cast<std::size_t>(i)
                           : std::uniform_int_distribution<std::size_t>(0, 5000)(rng);
    std::string bytes(n, '\0');
    for (auto& c : bytes) c = static_cast<char>(rng());
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

}  // namespace
}  // namespace tokentap::hooks
