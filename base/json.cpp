#include "base/json.hpp"

#include <array>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "base/text_bytes.hpp"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#if defined(__x86_64__) && defined(__GNUC__)
#include <tmmintrin.h>  // SSSE3, used only behind a run-time check
#endif

namespace tokentap::base::json {

bool valid_utf8(std::string_view s) noexcept {
  for (std::size_t i = 0; i < s.size();) {
    // ASCII eight bytes at a time, then one sequence.
    while (i + 8 <= s.size()) {
      std::uint64_t w;
      std::memcpy(&w, s.data() + i, 8);
      if (w & 0x8080808080808080ull) break;
      i += 8;
    }
    if (i == s.size()) break;
    const auto n = utf8_sequence(s.data() + i, s.data() + s.size());
    if (n == 0) return false;
    i += n;
  }
  return true;
}

namespace {

// Bytes of an 8-byte word that need attention in a JSON string: control characters, '"', '\\'
// and non-ASCII.  Non-zero when any does; the lowest set high bit marks the first one.
inline std::uint64_t special_bytes(std::uint64_t w) noexcept {
  constexpr std::uint64_t ones = 0x0101010101010101ull, highs = 0x8080808080808080ull;
  const auto zero_byte = [](std::uint64_t x) { return (x - ones) & ~x & highs; };
  const std::uint64_t control = (w - ones * 0x20) & ~w & highs;  // bytes < 0x20
  return control | (w & highs) | zero_byte(w ^ (ones * '"')) | zero_byte(w ^ (ones * '\\'));
}

// True when no byte of s needs attention (see special_bytes), checked eight at a time; stops at
// the first word that has one.
inline bool all_plain(std::string_view s) noexcept {
  const char* p = s.data();
  std::size_t n = s.size();
  if (n < 8) {
    bool plain = true;
    for (std::size_t i = 0; i < n; ++i) plain &= json_plain(static_cast<unsigned char>(p[i]));
    return plain;
  }
  std::uint64_t w;
  for (; n > 8; n -= 8, p += 8) {
    std::memcpy(&w, p, 8);
    if (special_bytes(w) != 0) return false;
  }
  std::memcpy(&w, s.data() + s.size() - 8, 8);  // the last eight (overlapping the loop's)
  return special_bytes(w) == 0;
}

// The second character of the two-character escapes, by byte; 0: written as \u00XX.  A table,
// not a switch: JSON inside SSE is mostly quotes, and a jump table per quote mispredicts.
constexpr auto short_escapes = [] {
  std::array<char, 128> t{};
  t['"'] = '"';
  t['\\'] = '\\';
  t['\n'] = 'n';
  t['\r'] = 'r';
  t['\t'] = 't';
  return t;
}();

// Writes the escape sequence for an ASCII byte that needs one ('"', '\\', control characters).
inline char* put_escape(char* w, unsigned char c) noexcept {
  static constexpr char hex[] = "0123456789abcdef";
  w[0] = '\\';
  if (const char e = short_escapes[c & 0x7f]) {
    w[1] = e;
    return w + 2;
  }
  w[1] = 'u';
  w[2] = '0';
  w[3] = '0';
  w[4] = hex[c >> 4];
  w[5] = hex[c & 15];
  return w + 6;
}

#if defined(__SSE2__)
// Sixteen bytes at p (p + 32 <= end, so every load below stays inside the input): copies them to
// w, escaping the ASCII ones that need it, and advances both.  JSON inside SSE has a quote every
// few bytes, so each special byte costs one load, one store and the escape, never a rescan.
// Stops early, with p at the byte, on the first non-ASCII byte (UTF-8 is validated by the caller)
// and returns false.  w needs 16 * 6 + 16 bytes of room.
inline bool escape_block(const char*& p, char*& w) noexcept {
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  // Signed compare: bytes >= 0x80 are negative, so "< 0x20" also flags non-ASCII.
  auto m = static_cast<unsigned>(
      _mm_movemask_epi8(_mm_or_si128(_mm_cmplt_epi8(v, _mm_set1_epi8(0x20)),
                                     _mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8('"')),
                                                  _mm_cmpeq_epi8(v, _mm_set1_epi8('\\'))))));
  unsigned pos = 0;
  while (m != 0) {
    const auto k = static_cast<unsigned>(__builtin_ctz(m));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(w),
                     _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + pos)));
    w += k - pos;
    const auto c = static_cast<unsigned char>(p[k]);
    if (c >= 0x80) {
      p += k;
      return false;
    }
    w = put_escape(w, c);
    pos = k + 1;
    m &= m - 1;
  }
  _mm_storeu_si128(reinterpret_cast<__m128i*>(w),
                   _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + pos)));
  w += 16 - pos;
  p += 16;
  return true;
}
constexpr bool simd_escape = true;

#if defined(__x86_64__) && defined(__GNUC__)
// With SSSE3 (every x86-64 CPU since 2006; checked at run time, the build stays baseline):
// quotes and backslashes — all that JSON inside SSE needs besides the line ends — are escaped
// without a loop per byte.  Each 8-byte half goes through one shuffle whose pattern, by the
// half's mask of quotes/backslashes, interleaves a backslash before each of them.
constexpr auto backslash_shuffles = [] {
  std::array<std::array<std::uint8_t, 16>, 256> t{};
  for (unsigned m = 0; m < 256; ++m) {
    unsigned k = 0;
    for (unsigned i = 0; i < 8; ++i) {
      if (m & (1u << i)) t[m][k++] = 8;  // lane 8..15 hold backslashes
      t[m][k++] = static_cast<std::uint8_t>(i);
    }
    while (k < 16) t[m][k++] = 0x80;  // zero; overwritten by the next store or trimmed
  }
  return t;
}();

// The first n (<= 16) bytes of v are input: escapes them to w (32 bytes of room) and advances
// it; false, with nothing written, if one of them is left to the caller (a control character
// other than \n, \r, \t; a non-ASCII byte).  SSE payloads end every event with \n\n, so line
// ends are escaped here too: the byte becomes its letter and gets a backslash like a quote.
__attribute__((target("ssse3,popcnt"), always_inline)) inline bool ssse3_block(__m128i v,
                                                                               unsigned n,
                                                                               char*& w) noexcept {
  const unsigned valid = n == 16 ? 0xffffu : (1u << n) - 1;
  const __m128i bsl = _mm_set1_epi8('\\');
  __m128i special = _mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8('"')), _mm_cmpeq_epi8(v, bsl));
  // Signed compare: bytes >= 0x80 are negative, so "< 0x20" also flags non-ASCII.
  const __m128i low = _mm_cmplt_epi8(v, _mm_set1_epi8(0x20));
  if ((static_cast<unsigned>(_mm_movemask_epi8(low)) & valid) != 0) {  // rare but for line ends
    const __m128i is_nl = _mm_cmpeq_epi8(v, _mm_set1_epi8('\n')),
                  is_cr = _mm_cmpeq_epi8(v, _mm_set1_epi8('\r')),
                  is_tab = _mm_cmpeq_epi8(v, _mm_set1_epi8('\t'));
    const __m128i letter = _mm_or_si128(is_nl, _mm_or_si128(is_cr, is_tab));
    if ((static_cast<unsigned>(_mm_movemask_epi8(_mm_andnot_si128(letter, low))) & valid) != 0)
      return false;
    // \n \r \t are written as n r t, after the backslash the shuffle puts before them.
    v = _mm_or_si128(_mm_andnot_si128(letter, v),
                     _mm_or_si128(_mm_and_si128(is_nl, _mm_set1_epi8('n')),
                                  _mm_or_si128(_mm_and_si128(is_cr, _mm_set1_epi8('r')),
                                               _mm_and_si128(is_tab, _mm_set1_epi8('t')))));
    special = _mm_or_si128(special, letter);
  }
  const auto m = static_cast<unsigned>(_mm_movemask_epi8(special)) & valid;
  if (m == 0) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(w), v);
    w += n;
    return true;
  }
  const unsigned lo = m & 0xff, hi = m >> 8;
  const auto pattern = [](unsigned k) {
    return _mm_loadu_si128(reinterpret_cast<const __m128i*>(backslash_shuffles[k].data()));
  };
  _mm_storeu_si128(reinterpret_cast<__m128i*>(w),
                   _mm_shuffle_epi8(_mm_unpacklo_epi64(v, bsl), pattern(lo)));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(w + 8 + __builtin_popcount(lo)),
                   _mm_shuffle_epi8(_mm_unpackhi_epi64(v, bsl), pattern(hi)));
  // Bytes past n (a partial block's padding) were copied after the real ones: cut off here.
  w += n + static_cast<unsigned>(__builtin_popcount(m));
  return true;
}

// Escapes 16-byte blocks from p into w while 32 bytes of room are left — the last, partial block
// too (through a padded copy) — and stops at a block ssse3_block leaves to the caller's
// per-block path (UTF-8 to validate, a \u00XX escape).
__attribute__((target("ssse3,popcnt"))) void escape_run_ssse3(const char*& p_ref, const char* end,
                                                              char*& w_ref,
                                                              const char* wend) noexcept {
  // Local cursors: through the references, every store of output bytes could alias them, and
  // the compiler reloaded and stored both around each block.
  const char* p = p_ref;
  char* w = w_ref;
  while (end - p >= 16 && wend - w >= 32) {
    if (!ssse3_block(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)), 16, w)) break;
    p += 16;
  }
  if (end - p > 0 && end - p < 16 && wend - w >= 32) {
    const auto n = static_cast<unsigned>(end - p);
    alignas(16) char tail[16];
    std::memset(tail, 'a', sizeof tail);
    std::memcpy(tail, p, n);
    if (ssse3_block(_mm_load_si128(reinterpret_cast<const __m128i*>(tail)), n, w)) p = end;
  }
  p_ref = p;
  w_ref = w;
}

bool have_ssse3() noexcept {
  static const bool yes = __builtin_cpu_supports("ssse3") && __builtin_cpu_supports("popcnt");
  return yes;
}
#define TOKENTAP_ESCAPE_SSSE3 1
#endif
#else
inline bool escape_block(const char*&, char*&) noexcept {
  return false;
}  // never called
constexpr bool simd_escape = false;
#endif

#ifndef TOKENTAP_ESCAPE_SSSE3
inline void escape_run_ssse3(const char*&, const char*, char*&, const char*) noexcept {}
inline bool have_ssse3() noexcept {
  return false;
}
#endif

// The byte at p that needs attention (see special_bytes): its escape, or the UTF-8 sequence it
// starts copied, or — invalid — U+FFFD (Strict: false, nothing written).  At most six bytes.
template <bool Strict>
inline bool put_special(const char*& p, const char* end, char*& w) noexcept {
  const auto c = static_cast<unsigned char>(*p);
  if (c < 0x80) {
    w = put_escape(w, c);
    ++p;
  } else if (const auto n = utf8_sequence(p, end); n != 0) {
    std::memcpy(w, p, n);
    w += n;
    p += n;
  } else {
    if constexpr (Strict) return false;
    std::memcpy(w, "\xEF\xBF\xBD", 3);  // U+FFFD
    w += 3;
    ++p;
  }
  return true;
}

// Strings of at most short_max bytes with something to escape (a token with a quote, the framing
// around a trace's chat chunk: ": t 123\ndata: ", "\n\n"): eight bytes at a time into a buffer
// on the stack, then one append — the general path's sizing, zero-filling and block setup cost
// more than such a string itself.  The same rules as escape_into's loop.
constexpr std::size_t short_max = 48;

// Strings up to this long are first checked whole for anything to escape (escape_into,
// append_string): when there is nothing, one copy.
constexpr std::size_t short_plain_max = 256;

template <bool Strict>
bool escape_short(std::string& out, std::string_view s) {
  // A padded copy: every word is loaded whole (a variable-length load per word would be a call).
  char in[short_max + 8];
  std::memcpy(in, s.data(), s.size());
  std::memset(in + s.size(), 'a', 8);  // past the end: plain bytes
  char buf[short_max * 6 + 8];         // an escape is at most six bytes; a word is stored whole
  char* w = buf;
  const char* p = in;
  const char* const end = in + s.size();
  while (p < end) {
    std::uint64_t word;
    std::memcpy(&word, p, 8);
    std::memcpy(w, &word, 8);
    const auto m = special_bytes(word);
    const auto plain =
        std::min(m == 0 ? 8 : static_cast<std::ptrdiff_t>(__builtin_ctzll(m) / 8), end - p);
    w += plain;
    p += plain;
    if (m != 0 && p != end && !put_special<Strict>(p, end, w)) return false;
  }
  out.append(buf, w);
  return true;
}

// The one escaping loop.  Writes straight into `out` (grown as needed, trimmed at the end).
// Strict: invalid UTF-8 makes it undo what it wrote and return false; otherwise an invalid byte
// becomes U+FFFD.
template <bool Strict>
bool escape_into(std::string& out, std::string_view s) {
  // Short strings with nothing to escape (header names and values, labels, ids, reasons): one
  // scan and one append — the general path's sizing, zero-filling and block setup cost ~10
  // times more for them.  Strings that do need escapes (SSE reads: a quote in the first eight
  // bytes) leave the scan at their first one.
  if (s.size() <= short_plain_max && all_plain(s)) {
    out.append(s);
    return true;
  }
  if (s.size() <= short_max) return escape_short<Strict>(out, s);
  const std::size_t mark = out.size();
  out.resize(mark + s.size() + s.size() / 4 + 16);
  char* w = out.data() + mark;
  const char* p = s.data();
  const char* const end = p + s.size();
  const bool ssse3 = simd_escape && have_ssse3();
  // Out of room (input dense with quotes or control characters): size for the rest at twice its
  // length.  Relative to the input left, not to `out`, which may be a long record under
  // construction: doubling that would zero-fill (and maybe copy) all of it for a few bytes.
  const auto room = [&](std::size_t need) {
    if (static_cast<std::size_t>(out.data() + out.size() - w) < need) {
      const auto used = static_cast<std::size_t>(w - out.data());
      out.resize(used + need + 2 * static_cast<std::size_t>(end - p) + 16);
      w = out.data() + used;
    }
  };
  while (p < end) {
    if (ssse3) {
      room(64);
      escape_run_ssse3(p, end, w, out.data() + out.size());
      if (p == end) break;
      // Stopped at a block with a byte for the paths below (control character, non-ASCII).
    }
    if (simd_escape && end - p >= 32) {
      room(16 * 6 + 16);
      if (escape_block(p, w)) continue;  // else stopped at a non-ASCII byte: validated below
    } else if (end - p >= 8) {
      // Eight bytes at a time: store the whole word (room is reserved), advance past the bytes
      // that need nothing.
      room(16);
      std::uint64_t word;
      std::memcpy(&word, p, 8);
      std::memcpy(w, &word, 8);
      const auto m = special_bytes(word);
      if (m == 0) {
        w += 8;
        p += 8;
        continue;
      }
      const auto k = static_cast<std::size_t>(__builtin_ctzll(m) / 8);
      w += k;
      p += k;
    } else {
      const auto c = static_cast<unsigned char>(*p);
      if (json_plain(c)) {
        room(1);
        *w++ = static_cast<char>(c);
        ++p;
        continue;
      }
    }
    room(6);
    if (!put_special<Strict>(p, end, w)) {
      out.resize(mark);
      return false;
    }
  }
  out.resize(static_cast<std::size_t>(w - out.data()));
  return true;
}

}  // namespace

void append_escaped(std::string& out, std::string_view s) {
  escape_into<false>(out, s);
}

bool append_escaped_if_utf8(std::string& out, std::string_view s) {
  return escape_into<true>(out, s);
}

bool append_string_if_utf8(std::string& out, std::string_view s) {
  out.push_back('"');
  if (!escape_into<true>(out, s)) {
    out.pop_back();
    return false;
  }
  out.push_back('"');
  return true;
}

std::string escaped(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 8);
  append_escaped(out, s);
  return out;
}

bool plain(std::string_view s) noexcept {
  return all_plain(s);
}

void append_string(std::string& out, std::string_view s) {
  // Names, ids, header values: nearly always plain and short — quoted on the stack and
  // appended once (three appends and the escaper's calls cost more than the copy).
  if (char buf[short_plain_max + 2]; s.size() <= short_plain_max && all_plain(s)) {
    buf[0] = '"';
    if (!s.empty()) std::memcpy(buf + 1, s.data(), s.size());  // (an empty view may be null)
    buf[s.size() + 1] = '"';
    out.append(buf, s.size() + 2);
    return;
  }
  out.push_back('"');
  append_escaped(out, s);
  out.push_back('"');
}

void append_base64(std::string& out, std::string_view s) {
  static constexpr char tbl[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  out.push_back('"');
  std::size_t i = 0;
  for (; i + 2 < s.size(); i += 3) {
    const std::uint32_t v = (static_cast<unsigned char>(s[i]) << 16) |
                            (static_cast<unsigned char>(s[i + 1]) << 8) |
                            static_cast<unsigned char>(s[i + 2]);
    out.push_back(tbl[v >> 18]);
    out.push_back(tbl[(v >> 12) & 63]);
    out.push_back(tbl[(v >> 6) & 63]);
    out.push_back(tbl[v & 63]);
  }
  if (i < s.size()) {
    std::uint32_t v = static_cast<unsigned char>(s[i]) << 16;
    if (i + 1 < s.size()) v |= static_cast<unsigned char>(s[i + 1]) << 8;
    out.push_back(tbl[v >> 18]);
    out.push_back(tbl[(v >> 12) & 63]);
    out.push_back(i + 1 < s.size() ? tbl[(v >> 6) & 63] : '=');
    out.push_back('=');
  }
  out.push_back('"');
}

std::string base64_decode(std::string_view s) {
  auto val = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    return c == '+' ? 62 : c == '/' ? 63 : -1;
  };
  std::string out;
  int buf = 0, bits = 0;
  for (char c : s) {
    const int v = val(c);
    if (v < 0) continue;
    buf = (buf << 6) | v;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((buf >> bits) & 0xFF));
    }
  }
  return out;
}

namespace {

// Most bytes put_ms writes: 1000000000000000.000 (v < 1e15, rounded up).
constexpr std::size_t ms_max_chars = 20;

// v (0 <= v < 1e15) with fixed three decimals, without printf (trace records carry thousands
// of these); returns the end.
inline char* put_ms(char* w, double v) noexcept {
  const auto milli = static_cast<std::uint64_t>(v * 1000.0 + 0.5);
  w = std::to_chars(w, w + ms_max_chars, milli / 1000).ptr;
  const auto frac = static_cast<unsigned>(milli % 1000);
  *w++ = '.';
  *w++ = static_cast<char>('0' + frac / 100);
  *w++ = static_cast<char>('0' + frac / 10 % 10);
  *w++ = static_cast<char>('0' + frac % 10);
  return w;
}

}  // namespace

void append_ms(std::string& out, double v) {
  if (v < 0 || !std::isfinite(v)) {  // not applicable; no number at all (not JSON)
    out += "null";
    return;
  }
  char buf[320];      // "%.3f" of the largest double
  if (!(v < 1e15)) {  // absurd values: the slow general path
    std::snprintf(buf, sizeof buf, "%.3f", v);
    out += buf;
    return;
  }
  out.append(buf, put_ms(buf, v));
}

void append_ms_list(std::string& out, std::span<const double> values) {
  // Written in place, room for the longest of each reserved up front: one resize instead of an
  // append (a capacity check and a copy) per value.
  std::size_t at = out.size();
  for (std::size_t i = 0; i < values.size(); ++i) {
    const double v = values[i];
    if (!(v >= 0 && v < 1e15)) {  // null, NaN, absurd: the general path
      out.resize(at);
      if (i) out.push_back(',');
      append_ms(out, v);
      at = out.size();
      continue;
    }
    if (out.size() < at + 1 + ms_max_chars)
      out.resize(at + (values.size() - i) * (1 + ms_max_chars));
    char* w = out.data() + at;
    if (i) *w++ = ',';
    at = static_cast<std::size_t>(put_ms(w, v) - out.data());
  }
  out.resize(at);
}

void append_rfc3339_us(std::string& out, std::int64_t us) {
  // Days and the time of day (floored: before 1970 the day starts earlier), then the civil date
  // of the day (H. Hinnant's days-to-civil, proleptic Gregorian).
  constexpr std::int64_t us_per_day = 86'400'000'000;
  std::int64_t days = us / us_per_day, rest = us % us_per_day;
  if (rest < 0) {
    rest += us_per_day;
    --days;
  }
  const std::int64_t z = days + 719468;
  const std::int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const auto doe = static_cast<unsigned>(z - era * 146097);
  const unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const unsigned mp = (5 * doy + 2) / 153;
  const unsigned day = doy - (153 * mp + 2) / 5 + 1;
  const unsigned month = mp < 10 ? mp + 3 : mp - 9;
  const std::int64_t year = static_cast<std::int64_t>(yoe) + era * 400 + (month <= 2);
  if (year < 0 || year > 9999) {  // not four digits: as printf writes it
    char buf[64];
    const auto n = std::snprintf(buf, sizeof buf, "%04lld-%02u-%02uT", static_cast<long long>(year),
                                 month, day);
    out.append(buf, static_cast<std::size_t>(n));
  } else {
    char d[11];
    const auto y = static_cast<unsigned>(year);
    d[0] = static_cast<char>('0' + y / 1000);
    d[1] = static_cast<char>('0' + y / 100 % 10);
    d[2] = static_cast<char>('0' + y / 10 % 10);
    d[3] = static_cast<char>('0' + y % 10);
    d[4] = '-';
    d[5] = static_cast<char>('0' + month / 10);
    d[6] = static_cast<char>('0' + month % 10);
    d[7] = '-';
    d[8] = static_cast<char>('0' + day / 10);
    d[9] = static_cast<char>('0' + day % 10);
    d[10] = 'T';
    out.append(d, sizeof d);
  }
  const auto secs = static_cast<unsigned>(rest / 1'000'000);
  auto frac = static_cast<unsigned>(rest % 1'000'000);
  char t[16];
  const unsigned parts[3] = {secs / 3600, secs / 60 % 60, secs % 60};
  for (int i = 0; i < 3; ++i) {
    t[3 * i] = static_cast<char>('0' + parts[i] / 10);
    t[3 * i + 1] = static_cast<char>('0' + parts[i] % 10);
    t[3 * i + 2] = i < 2 ? ':' : '.';
  }
  for (int i = 14; i >= 9; --i, frac /= 10) t[i] = static_cast<char>('0' + frac % 10);
  t[15] = 'Z';
  out.append(t, sizeof t);
}

void append_int(std::string& out, std::int64_t v) {
  if (v < 0) {
    out += "null";
    return;
  }
  char buf[24];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, r.ptr);
}

writer& writer::open(char bracket, bool array) {
  before_value();
  out_ += bracket;
  ++depth_;
  const std::uint64_t bit = std::uint64_t{1} << (depth_ & 63);
  arrays_ = array ? arrays_ | bit : arrays_ & ~bit;
  has_value_ &= ~bit;
  return *this;
}

writer& writer::end() {
  const std::uint64_t bit = std::uint64_t{1} << (depth_ & 63);
  out_ += (arrays_ & bit) ? ']' : '}';
  if (depth_ > 0) --depth_;
  return *this;
}

void writer::before_value() {
  if (after_key_) {
    after_key_ = false;
    return;
  }
  const std::uint64_t bit = std::uint64_t{1} << (depth_ & 63);
  if (has_value_ & bit) out_ += ',';
  has_value_ |= bit;
}

writer& writer::key(std::string_view k) {
  before_value();
  out_ += '"';
  append_escaped(out_, k);
  out_ += "\":";
  after_key_ = true;
  return *this;
}

writer& writer::string(std::string_view s) {
  before_value();
  append_string(out_, s);
  return *this;
}

writer& writer::string_or_null(std::string_view s) {
  return s.empty() ? null() : string(s);
}

writer& writer::boolean(bool b) {
  before_value();
  out_ += b ? "true" : "false";
  return *this;
}

writer& writer::null() {
  before_value();
  out_ += "null";
  return *this;
}

writer& writer::number(double v, int decimals) {
  if (!std::isfinite(v)) return null();
  before_value();
  char buf[400];  // the largest double in fixed notation, and its decimals
  out_.append(buf, std::to_chars(buf, buf + sizeof buf, v, std::chars_format::fixed, decimals).ptr);
  return *this;
}

writer& writer::significant(double v, int digits) {
  if (!std::isfinite(v)) return null();
  before_value();
  char buf[64];
  out_.append(buf, std::to_chars(buf, buf + sizeof buf, v, std::chars_format::general, digits).ptr);
  return *this;
}

writer& writer::ms(double v) {
  before_value();
  append_ms(out_, v);
  return *this;
}

writer& writer::raw(std::string_view json) {
  before_value();
  out_ += json;
  return *this;
}

}  // namespace tokentap::base::json
