#pragma once
// Shared pieces of the libFuzzer targets (test/fuzz/README.md).
//
// Every incremental parser is checked for the invariant the unit tests grind by hand: feeding the
// input whole, in fuzzer-chosen chunks and (for small inputs) byte by byte gives the same result.
// The first input byte picks the chunking (so the fuzzer explores splits as well as content); the
// rest is the payload.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#define FUZZ_CHECK(cond)                                                                 \
  do {                                                                                   \
    if (!(cond)) {                                                                       \
      std::fprintf(stderr, "invariant failed: %s (%s:%d)\n", #cond, __FILE__, __LINE__); \
      std::abort();                                                                      \
    }                                                                                    \
  } while (0)

namespace tokentap::fuzz {

struct input {
  std::uint8_t plan = 0;     ///< the first byte: chooses chunk sizes
  std::string_view payload;  ///< the rest
};

inline input split_input(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return {};
  return {data[0], std::string_view(reinterpret_cast<const char*>(data + 1), size - 1)};
}

/// Deterministic chunks of 1..(plan % 64 + 1) bytes from an xorshift stream seeded by `plan`.
inline std::vector<std::string_view> chunks(std::string_view s, std::uint8_t plan) {
  std::vector<std::string_view> out;
  std::uint32_t x = 0x9E3779B9u ^ (plan * 0x01000193u) ^ static_cast<std::uint32_t>(s.size());
  const std::size_t max = plan % 64 + 1;
  for (std::size_t i = 0; i < s.size();) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    const std::size_t n = std::min<std::size_t>(x % max + 1, s.size() - i);
    out.push_back(s.substr(i, n));
    i += n;
  }
  return out;
}

inline std::vector<std::string_view> bytes(std::string_view s) {
  std::vector<std::string_view> out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) out.push_back(s.substr(i, 1));
  return out;
}

/// Byte-by-byte feeding is quadratic in what a parser re-scans if it ever does; keep it for inputs
/// small enough that a fuzzer iteration stays fast.
constexpr std::size_t byte_by_byte_limit = 4096;

}  // namespace tokentap::fuzz
