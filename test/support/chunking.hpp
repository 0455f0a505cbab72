#pragma once
// Feeds one input to an incremental parser in every way that matters and checks each way gives
// the same result as feeding it whole (Beast's parsegrind, proxygen's random atOnce):
// whole, split at every byte offset, byte by byte, and in random chunks (several seeds).
#include <gtest/gtest.h>

#include <functional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

namespace tokentap::test {

/// `run(chunks)` feeds the chunks to a fresh parser and returns a printable transcript of what it
/// produced.  Returns the transcript of the whole-input run; every other way must match it.
inline std::string grind(
    std::string_view input,
    const std::function<std::string(const std::vector<std::string_view>&)>& run,
    std::size_t max_split_points = 4096) {
  const std::string whole = run({input});
  // Two pieces, split at every offset (bounded for very large inputs).
  const std::size_t step = input.size() > max_split_points ? input.size() / max_split_points : 1;
  for (std::size_t i = 0; i <= input.size(); i += step) {
    const auto got = run({input.substr(0, i), input.substr(i)});
    if (got != whole) {
      ADD_FAILURE() << "split at " << i << " differs:\n" << got << "\nvs whole:\n" << whole;
      return whole;
    }
  }
  std::vector<std::string_view> bytes;
  for (std::size_t i = 0; i < input.size(); ++i) bytes.push_back(input.substr(i, 1));
  EXPECT_EQ(run(bytes), whole) << "byte by byte";
  for (unsigned seed = 1; seed <= 8; ++seed) {
    std::mt19937 rng(seed);
    std::uniform_int_distribution<std::size_t> len(1, 64);
    std::vector<std::string_view> chunks;
    for (std::size_t i = 0; i < input.size();) {
      const auto n = std::min(len(rng), input.size() - i);
      chunks.push_back(input.substr(i, n));
      i += n;
    }
    EXPECT_EQ(run(chunks), whole) << "random chunks, seed " << seed;
  }
  return whole;
}

}  // namespace tokentap::test
