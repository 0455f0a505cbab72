#include "parsers/openai_chunk.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <charconv>
#include <cstring>
#include <limits>
#include <optional>
#include <utility>

#include "base/text_bytes.hpp"
#include "parsers/stream_decoder.hpp"

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
    t[static_cast<std::size_t>(c)] = !base::json_plain(static_cast<unsigned char>(c));
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
  for (int i = 0; i < 4; ++i) v = v << 4 | static_cast<unsigned>(base::hex_value(s[i]));
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
// returns the position after it, nullptr for invalid JSON.  Containers are entered at a known
// depth.  The walk is decode_openai's (decode_openai_chat.cpp), field for field.
struct openai_chunk_reader::scan {
  openai_chunk_reader& r;
  const char* const end;
  // The string texts met (kept or empty) and the last one's quotes and choice: a shape, if it was
  // the only one and the chunk said nothing else (`plain`: no fact, no key met twice).
  int text_strings = 0;
  const char* text_open = nullptr;
  const char* text_close = nullptr;
  field text_what = field::content;
  std::size_t text_choice = 0;  // its choice's position in r.choices_
  bool plain = true;

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

  // A key the walk acts on, met in its object (bit of `seen`): met twice, the last one wins —
  // and the chunk is no shape.
  void met(unsigned& seen, unsigned bit) noexcept {
    if (seen & bit) plain = false;
    seen |= bit;
  }

  // A fact (a count, an error, llama.cpp's fields): the chunk is no shape.
  facts& fact() noexcept {
    plain = false;
    r.facts_dirty_ = true;
    return r.facts_;
  }

  const char* root(const char* s) {
    unsigned seen = 0;
    return object(s, 1, [&](std::string_view key, const char* v) -> const char* {
      if (is(key, "choices")) {
        met(seen, 1);
        r.choices_.clear();
        r.tool_texts_.clear();
        return *v == '[' ? choices(v) : value(v, 1);
      }
      if (is(key, "usage")) return *v == '{' ? usage(v) : value(v, 1);
      if (is(key, "error")) return error(v);
      if (is(key, "timings")) {
        fact().timings = true;
        return *v == '{' ? timings(v) : value(v, 1);
      }
      if (is(key, "metrics")) {  // vLLM, with --enable-per-request-metrics
        if (*v != '{') return value(v, 1);
        fact().metrics = true;
        return vllm_metrics(v);
      }
      if (is(key, "tokens_cached")) return count(v, 1, fact().tokens_cached);
      if (is(key, "content")) return string_value(v, 1, fact().top_content);
      if (is(key, "stop_type")) return string_value(v, 1, fact().stop_type);
      if (is(key, "id")) return identity_value(v, r.id_);
      if (is(key, "model")) return identity_value(v, r.model_);
      return value(v, 1);
    });
  }

  const char* choices(const char* s) {
    return array(s, 2, [&](const char* v) {
      r.choices_.emplace_back();
      return *v == '{' ? choice(v, r.choices_.size() - 1) : value(v, 2);
    });
  }

  const char* choice(const char* s, std::size_t at) {
    unsigned seen = 0;
    auto& c = r.choices_[at];  // (no choice is added while this one is read)
    return object(s, 3, [&](std::string_view key, const char* v) -> const char* {
      if (is(key, "delta") || is(key, "message")) {
        const int source = is(key, "delta") ? 0 : 1;
        met(seen, 1u << source);
        return *v == '{' ? delta(v, at, source) : value(v, 3);
      }
      if (is(key, "text")) {
        met(seen, 4);
        return text(v, 3, at, field::content, c.content[2]);
      }
      if (is(key, "finish_reason")) {
        met(seen, 8);
        return text(v, 3, at, field::finish_reason, c.finish);
      }
      if (is(key, "index")) {
        met(seen, 16);
        return index_value(v, c.index);
      }
      return value(v, 3);
    });
  }

  // `index`: an integer 0 .. 2^31-1 written as one (no fraction, no exponent); anything else is
  // choice 0.
  const char* index_value(const char* s, std::uint32_t& index) {
    if (*s != '-' && !is_digit(*s)) {
      index = 0;
      return value(s, 3);
    }
    const char* const after = number(s);
    if (after == nullptr) return nullptr;
    std::uint64_t n = 0;
    bool integer = true;
    for (const char* p = s; p < after && integer; ++p) {
      if (*p == '-') continue;
      if (!is_digit(*p)) integer = false;
      n = n > 0x7fffffff ? n : n * 10 + static_cast<unsigned>(*p - '0');
    }
    index = !integer || *s == '-' || n > 0x7fffffff ? 0 : static_cast<std::uint32_t>(n);
    return after;
  }

  // `delta` (source 0) or `message` (1) of the choice at `at`.
  const char* delta(const char* s, std::size_t at, int source) {
    unsigned seen = 0;
    auto& c = r.choices_[at];
    return object(s, 4, [&](std::string_view key, const char* v) -> const char* {
      if (is(key, "content")) {
        met(seen, 1);
        return text(v, 4, at, field::content, c.content[source]);
      }
      if (is(key, "reasoning_content")) {
        met(seen, 2);
        return text(v, 4, at, field::reasoning, c.reasoning_content[source]);
      }
      if (is(key, "reasoning")) {
        met(seen, 4);
        return text(v, 4, at, field::reasoning, c.reasoning[source]);
      }
      if (is(key, "tool_calls")) {
        met(seen, 8);
        auto& range = c.tools[source];
        range[0] = static_cast<std::uint32_t>(r.tool_texts_.size());
        const char* const after = *v == '[' ? tool_calls(v, at) : value(v, 4);
        range[1] = static_cast<std::uint32_t>(r.tool_texts_.size());
        return after;
      }
      return value(v, 4);
    });
  }

  // Every `function.arguments` of every call, in order (a key met twice: both).
  const char* tool_calls(const char* s, std::size_t at) {
    const auto function = [&](const char* f) {
      unsigned seen = 0;
      return object(f, 7, [&](std::string_view key, const char* v) -> const char* {
        if (!is(key, "arguments")) return value(v, 7);
        met(seen, 1);
        std::string_view t;
        const char* const after = text(v, 7, at, field::tool_arguments, t);
        if (after != nullptr) r.tool_texts_.push_back(t);
        return after;
      });
    };
    const auto call = [&](const char* c) {
      unsigned seen = 0;
      return object(c, 6, [&](std::string_view key, const char* v) -> const char* {
        if (!is(key, "function")) return value(v, 6);
        met(seen, 1);
        return *v == '{' ? function(v) : value(v, 6);
      });
    };
    return array(s, 5, [&](const char* v) { return *v == '{' ? call(v) : value(v, 5); });
  }

  // A text of the choice at `at` into `slot`: a string's value, "" for anything else.
  const char* text(const char* s, int depth, std::size_t at, field what, std::string_view& slot) {
    if (*s != '"') {
      slot = {};
      return value(s, depth);
    }
    const char* const after = string_value(s, depth, slot);
    if (after == nullptr) return nullptr;
    ++text_strings;
    text_open = s;
    text_close = after - 1;
    text_what = what;
    text_choice = at;
    return after;
  }

  // A string's value into `out` ("" for any other value).
  const char* string_value(const char* s, int depth, std::string_view& out) {
    if (*s != '"') {
      out = {};
      return value(s, depth);
    }
    bool escaped = false;
    const char* const close = string_end(s, escaped);
    if (close == nullptr) return nullptr;
    out = std::string_view(s + 1, static_cast<std::size_t>(close - s - 1));
    if (escaped && !unescape(out, out)) return nullptr;
    return close + 1;
  }

  // `id`, `model`: a string, else none.  One that cannot be unescaped (a lone surrogate) is
  // none too, not a parse error: the walk reads the chunk as valid and skips it.
  const char* identity_value(const char* s, std::string_view& out) {
    if (*s != '"') {
      out = {};
      return value(s, 1);
    }
    bool escaped = false;
    const char* const close = string_end(s, escaped);
    if (close == nullptr) return nullptr;
    out = std::string_view(s + 1, static_cast<std::size_t>(close - s - 1));
    if (escaped && !unescape(out, out)) out = {};
    return close + 1;
  }

  const char* usage(const char* s) {
    auto& u = fact().usage;
    std::optional<std::int64_t> details_cached, hit;
    const auto details = [&](const char* v, std::string_view wanted,
                             std::optional<std::int64_t>& out) {
      return object(v, 3, [&](std::string_view key, const char* dv) {
        return is_key(key, wanted) ? count(dv, 3, out) : value(dv, 3);
      });
    };
    s = object(s, 2, [&](std::string_view key, const char* v) -> const char* {
      if (is(key, "prompt_tokens")) return count(v, 2, u.prompt);
      if (is(key, "completion_tokens")) return count(v, 2, u.completion);
      if (is(key, "prompt_tokens_details"))
        return *v == '{' ? details(v, "cached_tokens", details_cached) : value(v, 2);
      if (is(key, "completion_tokens_details"))
        return *v == '{' ? details(v, "reasoning_tokens", u.reasoning) : value(v, 2);
      if (is(key, "prompt_cache_hit_tokens")) return count(v, 2, hit);  // DeepSeek
      return value(v, 2);
    });
    const auto n = details_cached.value_or(-1) >= 0 ? *details_cached : hit.value_or(-1);
    if (n >= 0) u.cached = n;
    return s;
  }

  const char* timings(const char* s) {
    auto& f = fact();
    return object(s, 2, [&](std::string_view key, const char* v) -> const char* {
      if (is(key, "prompt_n")) return count(v, 2, f.prompt_n);
      if (is(key, "cache_n")) return count(v, 2, f.cache_n);
      if (is(key, "predicted_n")) return count(v, 2, f.predicted_n);
      if (is(key, "prompt_ms")) return duration(v, 2, f.prompt_ms);
      if (is(key, "predicted_ms")) return duration(v, 2, f.predicted_ms);
      return value(v, 2);
    });
  }

  const char* vllm_metrics(const char* s) {
    auto& f = fact();
    return object(s, 2, [&](std::string_view key, const char* v) -> const char* {
      if (is(key, "queue_time_ms")) return duration(v, 2, f.queue_time_ms);
      if (is(key, "time_to_first_token_ms")) return duration(v, 2, f.time_to_first_token_ms);
      if (is(key, "generation_time_ms")) return duration(v, 2, f.generation_time_ms);
      return value(v, 2);
    });
  }

  // A duration in milliseconds: a number that is one (engine_duration), NaN for any other
  // value, absent for null.
  const char* duration(const char* s, int depth, std::optional<double>& out) {
    if (*s == 'n') {
      out.reset();
      return value(s, depth);
    }
    if (*s != '-' && !is_digit(*s)) {
      out = std::numeric_limits<double>::quiet_NaN();
      return value(s, depth);
    }
    const char* const after = number(s);
    if (after == nullptr) return nullptr;
    const double d = engine_number(std::string_view(s, static_cast<std::size_t>(after - s)));
    out = d >= 0 && engine_duration(d) >= 0 ? d : std::numeric_limits<double>::quiet_NaN();
    return after;
  }

  // `error`: a string (its message), an object (`type`, else `code`, and `message`), or no
  // error; met twice, the last one says.
  const char* error(const char* s) {
    auto& f = r.facts_;
    f.error = false;
    f.error_type = f.error_message = {};
    if (*s == '"') {
      fact().error = true;
      return string_value(s, 1, f.error_message);
    }
    if (*s != '{') return value(s, 1);
    fact().error = true;
    std::string_view type, code;
    s = object(s, 2, [&](std::string_view key, const char* v) -> const char* {
      if (is(key, "type")) return string_value(v, 2, type);
      if (is(key, "code")) return string_value(v, 2, code);
      if (is(key, "message")) return string_value(v, 2, f.error_message);
      return value(v, 2);
    });
    f.error_type = type.empty() ? code : type;
    return s;
  }

  // A count as the decoder takes one: an integer as written; a number with a fraction or an
  // exponent truncated when it is 0 .. 9e18; -1 for anything else.
  const char* count(const char* s, int depth, std::optional<std::int64_t>& out) {
    if (*s != '-' && !is_digit(*s)) {
      out = -1;
      return value(s, depth);
    }
    const char* const after = number(s);
    if (after == nullptr) return nullptr;
    out = count_of(s, after);
    return after;
  }

  static std::int64_t count_of(const char* s, const char* e) noexcept {
    const bool negative = *s == '-';
    std::uint64_t n = 0;
    bool integer = true, overflow = false;
    for (const char* p = negative ? s + 1 : s; p < e; ++p) {
      if (!is_digit(*p)) {
        integer = false;
        break;
      }
      const auto d = static_cast<unsigned>(*p - '0');
      if (n > (std::numeric_limits<std::uint64_t>::max() - d) / 10) overflow = true;
      n = n * 10 + d;
    }
    constexpr auto max = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
    if (integer && !overflow && n <= max + (negative ? 1 : 0))
      return negative ? static_cast<std::int64_t>(0 - n) : static_cast<std::int64_t>(n);
    double d = 0;
    const auto [ptr, ec] = std::from_chars(s, e, d);
    if (ec == std::errc::result_out_of_range) {
      // Too large is no count; too small (an exponent far below zero) is zero.
      const char* x = std::find_if(s, e, [](char c) { return c == 'e' || c == 'E'; });
      return x + 1 < e && x[1] == '-' ? 0 : -1;
    }
    if (ec != std::errc() || ptr != e || !(d >= 0 && d < 9.0e18)) return -1;
    return static_cast<std::int64_t>(d);
  }

  static bool is_key(std::string_view key, std::string_view wanted) noexcept {
    return key == wanted;
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

  // A key, unescaped when it has escapes.
  const char* key_string(const char* s, std::string_view& key) {
    bool escaped = false;
    const char* const close = string_end(s, escaped);
    if (close == nullptr) return nullptr;
    key = std::string_view(s + 1, static_cast<std::size_t>(close - s - 1));
    if (escaped && !unescape(key, key)) return nullptr;
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
          if (base::hex_value(s[i]) < 0) return nullptr;
        s += 6;
        continue;
      }
      if (c < 0x20) return nullptr;
      const auto n = base::utf8_sequence(s, end);
      if (n == 0) return nullptr;
      s += n;
    }
  }

  // Decodes a validated escaped string into r.unescaped_.  Surrogate escapes are taken only as a
  // proper pair, as simdjson takes them: a lone one is invalid.
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
  parts_.clear();
  id_ = model_ = {};
  if (facts_dirty_) {
    facts_ = {};
    facts_dirty_ = false;
  }
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
    const char* const open = begin + prefix - 1;
    const char* const close = sc.end - suffix;
    bool escaped = false;
    if (std::memcmp(begin, last->around_.data(), prefix) == 0 &&
        std::memcmp(close, last->around_.data() + prefix, suffix) == 0 &&
        sc.string_end(open, escaped) == close) {
      std::string_view t(open + 1, static_cast<std::size_t>(close - open - 1));
      if (!escaped || sc.unescape(t, t)) {
        if (!t.empty()) parts_.push_back(part{last->what_, last->choice_, t});
        ++shaped_reads_;
        last->fits_ = true;
        return true;
      }
      unescaped_.clear();  // an invalid escape: the full read below finds it
    }
  }
  choices_.clear();
  tool_texts_.clear();
  const char* s = sc.ws(begin);
  if (s == nullptr || *s != '{' || !(s = sc.root(s)) || sc.ws(s) != nullptr)
    return false;  // not one object and whitespace
  // The texts in the decoder's order (decode_openai_chat.cpp, emit_choice).
  const auto add = [&](field what, std::uint32_t choice, std::string_view t) {
    if (!t.empty()) parts_.push_back(part{what, choice, t});
  };
  for (const auto& c : choices_) {
    for (int source = 0; source < 2; ++source) {
      const auto rc = c.reasoning_content[source];
      add(field::reasoning, c.index, rc.empty() ? c.reasoning[source] : rc);
    }
    for (const auto t : c.content) add(field::content, c.index, t);
    for (const auto& range : c.tools)
      for (auto j = range[0]; j < range[1]; ++j)
        add(field::tool_arguments, c.index, tool_texts_[j]);
    add(field::finish_reason, c.index, c.finish);
  }
  if (last != nullptr && sc.plain && sc.text_strings == 1 && doc.size() <= max_shape_bytes) {
    last->around_.assign(begin, sc.text_open + 1);
    last->around_.append(sc.text_close, sc.end);
    last->prefix_ = static_cast<std::uint32_t>(sc.text_open + 1 - begin);
    last->what_ = sc.text_what;
    last->choice_ = choices_[sc.text_choice].index;
    ++last->version_;
    last->fits_ = true;
  }
  return true;
}

}  // namespace tokentap::parsers
