#include "parsers/openai_chunk.hpp"

#include <array>
#include <bit>
#include <cstring>
#include <utility>

#include "parsers/text_bytes.hpp"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace tokentap::parsers {

namespace {

// Bytes that end a run of plain string bytes: the closing quote, an escape, a control character
// (invalid unescaped) and the first byte of a multi-byte UTF-8 sequence (validated one by one).
constexpr auto stop_table = [] {
  std::array<bool, 256> t{};
  for (int c = 0; c < 256; ++c)
    t[static_cast<std::size_t>(c)] = !detail::json_plain(static_cast<unsigned char>(c));
  return t;
}();

// The first byte at or after `s` that stops a run, or `end`.
const char* next_stop(const char* s, const char* end) noexcept {
#if defined(__SSE2__)
  const __m128i quote = _mm_set1_epi8('"');
  const __m128i backslash = _mm_set1_epi8('\\');
  const __m128i space = _mm_set1_epi8(0x20);
  while (end - s >= 16) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s));
    // Signed compare: 0x00-0x1f and 0x80-0xff (negative) are both "less than a space".
    const __m128i hit =
        _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, backslash)),
                     _mm_cmplt_epi8(v, space));
    const auto mask = static_cast<unsigned>(_mm_movemask_epi8(hit));
    if (mask != 0) return s + std::countr_zero(mask);
    s += 16;
  }
#endif
  while (s < end && !stop_table[static_cast<unsigned char>(*s)]) ++s;
  return s;
}

// The four hex digits at `s` (validated while scanning the string).
unsigned hex4(const char* s) noexcept {
  unsigned v = 0;
  for (int i = 0; i < 4; ++i) v = v << 4 | static_cast<unsigned>(detail::hex_value(s[i]));
  return v;
}

void append_utf8(std::string& out, unsigned cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xc0 | cp >> 6));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xe0 | cp >> 12));
    out.push_back(static_cast<char>(0x80 | (cp >> 6 & 0x3f)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  } else {
    out.push_back(static_cast<char>(0xf0 | cp >> 18));
    out.push_back(static_cast<char>(0x80 | (cp >> 12 & 0x3f)));
    out.push_back(static_cast<char>(0x80 | (cp >> 6 & 0x3f)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  }
}

bool is_digit(char c) noexcept {
  return c >= '0' && c <= '9';
}

// The byte a one-character escape (`\n`, `\"`, ...) stands for; 0 for `u` and invalid escapes.
constexpr char escaped_byte(char c) noexcept {
  switch (c) {
    case '"':
    case '\\':
    case '/':
      return c;
    case 'b':
      return '\b';
    case 'f':
      return '\f';
    case 'n':
      return '\n';
    case 'r':
      return '\r';
    case 't':
      return '\t';
    default:
      return 0;
  }
}

// A key compared with a literal of known length (the compiler inlines the comparison).
template <std::size_t N>
bool is(std::string_view key, const char (&literal)[N]) noexcept {
  return key.size() == N - 1 && std::memcmp(key.data(), literal, N - 1) == 0;
}

}  // namespace

// Recursive descent over [begin, end): every step takes the position of what it reads and
// returns the position after it, nullptr to decline.  Containers are entered at a known depth.
struct openai_chunk_reader::scan {
  openai_chunk_reader& r;
  const char* const end;
  // The string texts met (kept or empty) and the last one's quotes: a shape, if it was the only.
  int text_strings = 0;
  const char* text_open = nullptr;
  const char* text_close = nullptr;
  field text_what = field::content;
  std::uint32_t text_choice = 0;
  // Each kept part's place in its choice's order (the slow decoder's emit_choice).
  std::array<std::uint8_t, max_parts> ranks{};

  enum rank : std::uint8_t {
    reasoning_rank = 0,  // + 0 delta, 1 message
    content_rank = 2,    // + 0 delta, 1 message, 2 text
    tool_rank = 5,       // + 0 delta, 1 message
    finish_rank = 7
  };

  // The first byte at or after `s` that is not JSON whitespace; nullptr at the end.
  const char* ws(const char* s) const noexcept {
    if (s<end&& static_cast<unsigned char>(*s)> ' ') return s;  // compact JSON: always
    for (; s < end; ++s) {
      const char c = *s;
      if (c != ' ' && c != '\n' && c != '\r' && c != '\t') return s;
    }
    return nullptr;
  }

  template <class OnField>
  const char* object(const char* s, int depth, OnField&& on_field) {
    if (depth > max_depth || !(s = ws(s + 1))) return nullptr;  // past '{'
    if (*s == '}') return s + 1;
    for (;;) {
      std::string_view key;
      if (*s != '"' || !(s = key_string(s, key)) || !(s = ws(s)) || *s != ':' || !(s = ws(s + 1)) ||
          !(s = on_field(key, s)) || !(s = ws(s)))
        return nullptr;
      if (*s == '}') return s + 1;
      if (*s != ',' || !(s = ws(s + 1))) return nullptr;
    }
  }

  template <class OnElement>
  const char* array(const char* s, int depth, OnElement&& on_element) {
    if (depth > max_depth || !(s = ws(s + 1))) return nullptr;  // past '['
    if (*s == ']') return s + 1;
    for (;;) {
      if (!(s = on_element(s)) || !(s = ws(s))) return nullptr;
      if (*s == ']') return s + 1;
      if (*s != ',' || !(s = ws(s + 1))) return nullptr;
    }
  }

  // Whether a key the decoder acts on is met for the first time in its object (bit of `seen`):
  // a repeated one is the slow path's (the last one wins there).
  static bool first_time(unsigned& seen, unsigned bit) noexcept {
    if (seen & bit) return false;
    seen |= bit;
    return true;
  }

  // The fields decode_openai reads for provider openai_chat, mirrored one for one.
  const char* root(const char* s) {
    unsigned seen = 0;
    return object(s, 1, [&](std::string_view key, const char* v) -> const char* {
      if (is(key, "choices")) {
        if (!first_time(seen, 1)) return nullptr;
        return *v == '[' ? choices(v) : value(v, 1);
      }
      if (is(key, "usage")) return literal(v, "null");  // counts: the slow path reads them
      if (is(key, "error") || is(key, "timings") || is(key, "tokens_cached")) return nullptr;
      return value(v, 1);
    });
  }

  const char* choices(const char* s) {
    return array(s, 2, [&](const char* v) { return *v == '{' ? choice(v) : value(v, 2); });
  }

  // A choice's parts are kept as met, then put in the decoder's order and given its index
  // (which may come after them).
  const char* choice(const char* s) {
    const std::size_t first = r.count_;
    const int strings_before = text_strings;
    std::uint32_t index = 0;
    unsigned seen = 0;
    s = object(s, 3, [&](std::string_view key, const char* v) -> const char* {
      if (is(key, "delta") || is(key, "message")) {
        const int source = is(key, "delta") ? 0 : 1;
        if (!first_time(seen, 1u << source)) return nullptr;
        return *v == '{' ? delta(v, source) : value(v, 3);
      }
      if (is(key, "text"))
        return first_time(seen, 4) ? text(v, field::content, content_rank + 2, 3) : nullptr;
      if (is(key, "finish_reason"))
        return first_time(seen, 8) ? text(v, field::finish_reason, finish_rank, 3) : nullptr;
      if (is(key, "index")) return first_time(seen, 16) ? index_value(v, index) : nullptr;
      return value(v, 3);
    });
    if (s == nullptr) return nullptr;
    for (std::size_t i = first; i < r.count_; ++i) {  // insertion sort: at most max_parts
      r.parts_[i].choice = index;
      for (std::size_t j = i; j > first && ranks[j - 1] > ranks[j]; --j) {
        std::swap(ranks[j - 1], ranks[j]);
        std::swap(r.parts_[j - 1], r.parts_[j]);
      }
    }
    if (text_strings != strings_before) text_choice = index;
    return s;
  }

  // `index`: a plain integer (its value, or 0 past 2^31-1 or below 0, as the decoder takes it)
  // or a value that is not a number (0); a fraction or an exponent is declined.
  const char* index_value(const char* s, std::uint32_t& index) {
    if (*s != '-' && !is_digit(*s)) {
      index = 0;
      return value(s, 3);
    }
    const char* const start = s;
    const char* const after = number(s);
    if (after == nullptr) return nullptr;
    std::uint64_t n = 0;
    for (const char* p = start; p < after; ++p) {
      if (*p == '-') continue;
      if (!is_digit(*p)) return nullptr;
      n = n > 0x7fffffff ? n : n * 10 + static_cast<unsigned>(*p - '0');
    }
    index = *start == '-' || n > 0x7fffffff ? 0 : static_cast<std::uint32_t>(n);
    return after;
  }

  // `delta` (source 0) or `message` (1).
  const char* delta(const char* s, int source) {
    unsigned seen = 0;
    return object(s, 4, [&](std::string_view key, const char* v) -> const char* {
      if (is(key, "content"))
        return first_time(seen, 1)
                   ? text(v, field::content, static_cast<std::uint8_t>(content_rank + source), 4)
                   : nullptr;
      if (is(key, "reasoning_content") || is(key, "reasoning")) {
        // Both, or one twice: the slow path chooses between them.
        if (!first_time(seen, 2)) return nullptr;
        return text(v, field::reasoning, static_cast<std::uint8_t>(reasoning_rank + source), 4);
      }
      if (is(key, "tool_calls")) {
        if (!first_time(seen, 4)) return nullptr;
        return *v == '[' ? tool_calls(v, source) : value(v, 4);
      }
      return value(v, 4);
    });
  }

  const char* tool_calls(const char* s, int source) {
    const auto rank = static_cast<std::uint8_t>(tool_rank + source);
    const auto function = [&](const char* f) {
      unsigned seen = 0;
      return object(f, 7, [&](std::string_view key, const char* v) -> const char* {
        if (!is(key, "arguments")) return value(v, 7);
        return first_time(seen, 1) ? text(v, field::tool_arguments, rank, 7) : nullptr;
      });
    };
    const auto call = [&](const char* c) {
      unsigned seen = 0;
      return object(c, 6, [&](std::string_view key, const char* v) -> const char* {
        if (!is(key, "function")) return value(v, 6);
        if (!first_time(seen, 1)) return nullptr;
        return *v == '{' ? function(v) : value(v, 6);
      });
    };
    return array(s, 5, [&](const char* v) { return *v == '{' ? call(v) : value(v, 5); });
  }

  // A value whose string form is a text; anything else the slow path reads as "" (no event).
  const char* text(const char* s, field what, std::uint8_t rank, int depth) {
    if (*s != '"') return value(s, depth);
    bool escaped = false;
    const char* const close = string_end(s, escaped);
    if (close == nullptr || !keep(s, close, escaped, what, rank)) return nullptr;
    ++text_strings;
    text_open = s;
    text_close = close;
    text_what = what;
    return close + 1;
  }

  // The text of the validated string between the quotes at `open` and `close`, as a part.
  bool keep(const char* open, const char* close, bool escaped, field what, std::uint8_t rank,
            std::uint32_t choice = 0) {
    std::string_view t(open + 1, static_cast<std::size_t>(close - open - 1));
    if (escaped && !unescape(t, t)) return false;
    if (!t.empty()) {
      if (r.count_ == max_parts) return false;
      ranks[r.count_] = rank;
      r.parts_[r.count_++] = part{what, choice, t};
    }
    return true;
  }

  const char* value(const char* s, int depth) {
    switch (*s) {
      case '"': {
        bool escaped = false;
        const char* const close = string_end(s, escaped);
        return close != nullptr ? close + 1 : nullptr;
      }
      case '{':
        return object(s, depth + 1,
                      [&](std::string_view, const char* v) { return value(v, depth + 1); });
      case '[':
        return array(s, depth + 1, [&](const char* v) { return value(v, depth + 1); });
      case 't':
        return literal(s, "true");
      case 'f':
        return literal(s, "false");
      case 'n':
        return literal(s, "null");
      default:
        return number(s);
    }
  }

  // A key: compared as written, so one with an escape is declined (the slow path unescapes).
  const char* key_string(const char* s, std::string_view& key) {
    bool escaped = false;
    const char* const close = string_end(s, escaped);
    if (close == nullptr || escaped) return nullptr;
    key = std::string_view(s + 1, static_cast<std::size_t>(close - s - 1));
    return close + 1;
  }

  // The closing quote of the string opening at `s`, everything between validated: UTF-8, no
  // control bytes, escapes well formed (`\u` with four hex digits).
  const char* string_end(const char* s, bool& escaped) const noexcept {
    for (++s;;) {
      s = next_stop(s, end);
      if (s == end) return nullptr;
      const auto c = static_cast<unsigned char>(*s);
      if (c == '"') return s;
      if (c == '\\') {
        if (end - s < 2) return nullptr;
        escaped = true;
        if (s[1] != 'u') {
          if (escaped_byte(s[1]) == 0) return nullptr;
          s += 2;
          continue;
        }
        if (end - s < 6) return nullptr;
        for (int i = 2; i < 6; ++i)
          if (detail::hex_value(s[i]) < 0) return nullptr;
        s += 6;
        continue;
      }
      if (c < 0x20) return nullptr;
      const auto n = detail::utf8_sequence(s, end);
      if (n == 0) return nullptr;
      s += n;
    }
  }

  // Decodes a validated escaped string into r.unescaped_.  Surrogate escapes are taken only as a
  // proper pair (simdjson's handling of anything else differs by version: declined).
  bool unescape(std::string_view in, std::string_view& out) {
    auto& u = r.unescaped_;
    const std::size_t start = u.size();
    const char* p = in.data();
    const char* const stop = p + in.size();
    while (p < stop) {
      const auto* bs =
          static_cast<const char*>(std::memchr(p, '\\', static_cast<std::size_t>(stop - p)));
      u.append(p, bs != nullptr ? bs : stop);
      if (bs == nullptr) break;
      if (bs[1] != 'u') {
        u.push_back(escaped_byte(bs[1]));
        p = bs + 2;
        continue;
      }
      unsigned cp = hex4(bs + 2);
      p = bs + 6;
      if (cp >= 0xdc00 && cp <= 0xdfff) return false;
      if (cp >= 0xd800 && cp <= 0xdbff) {
        if (stop - p < 6 || p[0] != '\\' || p[1] != 'u') return false;
        const unsigned low = hex4(p + 2);
        if (low < 0xdc00 || low > 0xdfff) return false;
        cp = 0x10000 + ((cp - 0xd800) << 10) + (low - 0xdc00);
        p += 6;
      }
      append_utf8(u, cp);
    }
    out = std::string_view(u.data() + start, u.size() - start);
    return true;
  }

  const char* number(const char* s) const noexcept {
    if (*s == '-') ++s;
    if (s == end) return nullptr;
    if (*s == '0') {
      ++s;
    } else if (is_digit(*s)) {
      while (s < end && is_digit(*s)) ++s;
    } else {
      return nullptr;
    }
    if (s < end && *s == '.') {
      ++s;
      if (s == end || !is_digit(*s)) return nullptr;
      while (s < end && is_digit(*s)) ++s;
    }
    if (s < end && (*s == 'e' || *s == 'E')) {
      ++s;
      if (s < end && (*s == '+' || *s == '-')) ++s;
      if (s == end || !is_digit(*s)) return nullptr;
      while (s < end && is_digit(*s)) ++s;
    }
    return s;
  }

  template <std::size_t N>
  const char* literal(const char* s, const char (&word)[N]) const noexcept {
    if (static_cast<std::size_t>(end - s) < N - 1 || std::memcmp(s, word, N - 1) != 0)
      return nullptr;
    return s + (N - 1);
  }
};

bool openai_chunk_reader::read(std::string_view doc, shape* last) noexcept {
  count_ = 0;
  if (doc.size() > max_bytes) return false;
  // Unescaped text is never longer than its escaped form, so with this capacity appending never
  // reallocates and the views already handed out stay valid.
  if (unescaped_.capacity() < doc.size()) unescaped_.reserve(doc.size());
  unescaped_.clear();
  const char* const begin = doc.data();
  scan sc{*this, begin + doc.size()};
  if (last != nullptr) last->fits_ = false;
  if (last != nullptr && !last->empty() && doc.size() >= last->around_.size()) {
    // Shaped like the last chunk: the same bytes before and after one valid string.  JSON read
    // up to an opening quote does not depend on what follows it, nor the rest on the string's
    // contents once it closes where the last one did.
    const std::size_t prefix = last->prefix_, suffix = last->around_.size() - prefix;
    const char* const close = sc.end - suffix;
    bool escaped = false;
    if (std::memcmp(begin, last->around_.data(), prefix) == 0 &&
        std::memcmp(close, last->around_.data() + prefix, suffix) == 0 &&
        sc.string_end(begin + prefix - 1, escaped) == close) {
      if (sc.keep(begin + prefix - 1, close, escaped, last->what_, 0, last->choice_)) {
        ++shaped_reads_;
        last->fits_ = true;
        return true;
      }
      count_ = 0;  // an invalid escape: the full read below declines it
      unescaped_.clear();
    }
  }
  const char* s = sc.ws(begin);
  if (s == nullptr || *s != '{' || !(s = sc.root(s)) || sc.ws(s) != nullptr)
    return false;  // not one object and whitespace
  if (last != nullptr && sc.text_strings == 1 && doc.size() <= max_shape_bytes) {
    last->around_.assign(begin, sc.text_open + 1);
    last->around_.append(sc.text_close, sc.end);
    last->prefix_ = static_cast<std::uint32_t>(sc.text_open + 1 - begin);
    last->what_ = sc.text_what;
    last->choice_ = sc.text_choice;
    ++last->version_;
    last->fits_ = true;
  }
  return true;
}

}  // namespace tokentap::parsers
