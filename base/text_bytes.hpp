#pragma once
// Byte-level rules shared by the JSON writer (base/json), the chat-chunk reader
// (parsers/openai_chunk) and the HTTP body decoder (parsers/http_body).
#include <cstddef>

namespace tokentap::base {

/// A byte that stands for itself inside a JSON string: printable ASCII other than `"` and `\`.
/// Everything else needs an escape (control characters, `"`, `\`) or starts a multi-byte UTF-8
/// sequence.
constexpr bool json_plain(unsigned char c) noexcept {
  return c >= 0x20 && c < 0x80 && c != '"' && c != '\\';
}

/// Length of the well-formed UTF-8 sequence at `s` (`s < end`), 0 if there is none: Unicode
/// Table 3-7 — no overlong forms, no surrogates, nothing past U+10FFFF (what simdjson accepts).
/// An ASCII byte is a sequence of one.
inline std::size_t utf8_sequence(const char* s, const char* end) noexcept {
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(s[i]); };
  const unsigned c = byte(0);
  if (c < 0x80) return 1;
  std::size_t n;
  unsigned lo = 0x80, hi = 0xbf;  // the second byte's range
  if (c >= 0xc2 && c <= 0xdf) {
    n = 2;
  } else if (c >= 0xe0 && c <= 0xef) {
    n = 3;
    if (c == 0xe0) lo = 0xa0;
    if (c == 0xed) hi = 0x9f;
  } else if (c >= 0xf0 && c <= 0xf4) {
    n = 4;
    if (c == 0xf0) lo = 0x90;
    if (c == 0xf4) hi = 0x8f;
  } else {
    return 0;
  }
  if (static_cast<std::size_t>(end - s) < n || byte(1) < lo || byte(1) > hi) return 0;
  for (std::size_t i = 2; i < n; ++i)
    if ((byte(i) & 0xc0) != 0x80) return 0;
  return n;
}

/// The value of a hex digit, -1 for any other byte.
constexpr int hex_value(char c) noexcept {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace tokentap::base
