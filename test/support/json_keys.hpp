#pragma once
// Reorders the members of every JSON object in a document or a stream, keeping every byte: the
// members trade places, the separators and whitespace between them stay where they were, so the
// result is exactly as long as the input (a size limit cuts it where it cut the original).
// RFC 8259 §4: "JSON parsing libraries have been observed to differ as to whether or not they
// make the ordering of object members visible to calling software" — ours must not.
//
// Used by the decoder, inspector and trace-reader tests and by the fuzz targets to check that a
// reader gives the same result whatever the key order.  Header-only, no GoogleTest.  Anything
// that is not strict JSON (RFC 8259, UTF-8 validated) is returned unchanged, and so is an object
// with two members of the same (unescaped) name: their relative order may carry meaning to a
// reader (last wins), so the property is not asked of them.
#include <algorithm>
#include <cstdint>
#include <numeric>
#include <string>
#include <string_view>
#include <vector>

namespace tokentap::test {

enum class key_order : std::uint8_t { sorted, reversed, shuffled };

namespace json_keys_detail {

class reorderer {
 public:
  reorderer(std::string_view in, key_order o, std::uint64_t seed)
      : s_(in.data()),
        end_(in.data() + in.size()),
        order_(o),
        rng_(seed * 0x9e3779b97f4a7c15ull | 1) {}

  /// The reordered document, or false when `in` is not one JSON value (whitespace around it).
  bool run(std::string& out) {
    const char* p = ws(s_);
    if (p == end_ || !value(p, out, 0)) return false;
    return ws(p) == end_;
  }

  /// The whitespace before the document (run() writes what follows it).
  std::string_view lead() const { return {s_, static_cast<std::size_t>(ws(s_) - s_)}; }

 private:
  static constexpr int max_depth = 256;

  const char* ws(const char* p) const {
    while (p < end_ && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')) ++p;
    return p;
  }

  bool value(const char*& p, std::string& out, int depth) {
    if (p == end_ || depth > max_depth) return false;
    const char* const start = p;
    switch (*p) {
      case '{':
        return object(p, out, depth);
      case '[': {
        out.push_back('[');
        const char* q = ws(p + 1);
        out.append(p + 1, q);
        if (q < end_ && *q == ']') {
          out.push_back(']');
          p = q + 1;
          return true;
        }
        for (;;) {
          if (!value(q, out, depth + 1)) return false;
          const char* r = ws(q);
          out.append(q, r);
          if (r == end_) return false;
          if (*r == ']') {
            out.push_back(']');
            p = r + 1;
            return true;
          }
          if (*r != ',') return false;
          const char* n = ws(r + 1);
          out.append(r, n);
          q = n;
        }
      }
      case '"': {
        if (!string(p, nullptr)) return false;
        out.append(start, p);
        return true;
      }
      case 't':
        return literal(p, "true", out);
      case 'f':
        return literal(p, "false", out);
      case 'n':
        return literal(p, "null", out);
      default:
        if (!number(p)) return false;
        out.append(start, p);
        return true;
    }
  }

  struct member {
    std::string name;  // unescaped
    std::string text;  // key, colon and value as reordered
  };

  bool object(const char*& p, std::string& out, int depth) {
    std::vector<member> members;
    std::vector<std::string_view> separators;  // before the first member, between, after the last
    const char* q = ws(p + 1);
    if (q < end_ && *q == '}') {
      out.append(p, q + 1);
      p = q + 1;
      return true;
    }
    separators.emplace_back(p + 1, static_cast<std::size_t>(q - p - 1));
    for (;;) {
      if (q == end_ || *q != '"') return false;
      member m;
      const char* k = q;
      if (!string(q, &m.name)) return false;
      const char* colon = ws(q);
      if (colon == end_ || *colon != ':') return false;
      const char* v = ws(colon + 1);
      m.text.assign(k, v);
      if (!value(v, m.text, depth + 1)) return false;
      members.push_back(std::move(m));
      const char* r = ws(v);
      if (r == end_) return false;
      if (*r == '}') {
        separators.emplace_back(v, static_cast<std::size_t>(r - v));
        p = r + 1;
        break;
      }
      if (*r != ',') return false;
      q = ws(r + 1);
      separators.emplace_back(v, static_cast<std::size_t>(q - v));
    }
    std::vector<std::size_t> perm(members.size());
    std::iota(perm.begin(), perm.end(), std::size_t{0});
    std::vector<std::string_view> names;
    for (const auto& m : members) names.push_back(m.name);
    std::sort(names.begin(), names.end());
    const bool duplicates = std::adjacent_find(names.begin(), names.end()) != names.end();
    if (!duplicates) {
      switch (order_) {
        case key_order::sorted:
          std::stable_sort(perm.begin(), perm.end(), [&](std::size_t a, std::size_t b) {
            return members[a].name < members[b].name;
          });
          break;
        case key_order::reversed:
          std::reverse(perm.begin(), perm.end());
          break;
        case key_order::shuffled:
          for (std::size_t i = perm.size(); i > 1; --i) std::swap(perm[i - 1], perm[next() % i]);
          break;
      }
    }
    out.push_back('{');
    for (std::size_t i = 0; i < members.size(); ++i) {
      out.append(separators[i]);
      out.append(members[perm[i]].text);
    }
    out.append(separators.back());
    out.push_back('}');
    return true;
  }

  std::uint64_t next() {
    rng_ ^= rng_ << 13;
    rng_ ^= rng_ >> 7;
    rng_ ^= rng_ << 17;
    return rng_;
  }

  static int hex(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }

  static void utf8(std::string& o, unsigned cp) {
    if (cp < 0x80) {
      o.push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
      o.push_back(static_cast<char>(0xc0 | cp >> 6));
      o.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
    } else if (cp < 0x10000) {
      o.push_back(static_cast<char>(0xe0 | cp >> 12));
      o.push_back(static_cast<char>(0x80 | (cp >> 6 & 0x3f)));
      o.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
    } else {
      o.push_back(static_cast<char>(0xf0 | cp >> 18));
      o.push_back(static_cast<char>(0x80 | (cp >> 12 & 0x3f)));
      o.push_back(static_cast<char>(0x80 | (cp >> 6 & 0x3f)));
      o.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
    }
  }

  // A string at p (its opening quote), validated; its unescaped text into `text` when given.
  bool string(const char*& p, std::string* text) {
    for (++p; p < end_;) {
      const auto c = static_cast<unsigned char>(*p);
      if (c == '"') {
        ++p;
        return true;
      }
      if (c < 0x20) return false;
      if (c == '\\') {
        if (end_ - p < 2) return false;
        const char e = p[1];
        if (e == 'u') {
          if (end_ - p < 6) return false;
          unsigned cp = 0;
          for (int i = 2; i < 6; ++i) {
            const int h = hex(p[i]);
            if (h < 0) return false;
            cp = cp << 4 | static_cast<unsigned>(h);
          }
          p += 6;
          if (cp >= 0xd800 && cp <= 0xdbff && end_ - p >= 6 && p[0] == '\\' && p[1] == 'u') {
            unsigned lo = 0;
            bool ok = true;
            for (int i = 2; i < 6; ++i) {
              const int h = hex(p[i]);
              ok = ok && h >= 0;
              lo = lo << 4 | static_cast<unsigned>(h < 0 ? 0 : h);
            }
            if (ok && lo >= 0xdc00 && lo <= 0xdfff) {
              cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
              p += 6;
            }
          }
          if (text) utf8(*text, cp);
          continue;
        }
        const std::string_view simple = "\"\\/bfnrt";
        const auto at = simple.find(e);
        if (at == std::string_view::npos) return false;
        if (text) text->push_back("\"\\/\b\f\n\r\t"[at]);
        p += 2;
        continue;
      }
      // UTF-8: the shortest form, no surrogates, at most U+10FFFF.
      std::size_t n = 1;
      if (c >= 0x80) {
        if (c >= 0xc2 && c <= 0xdf)
          n = 2;
        else if (c >= 0xe0 && c <= 0xef)
          n = 3;
        else if (c >= 0xf0 && c <= 0xf4)
          n = 4;
        else
          return false;
        if (end_ - p < static_cast<std::ptrdiff_t>(n)) return false;
        for (std::size_t i = 1; i < n; ++i)
          if ((static_cast<unsigned char>(p[i]) & 0xc0) != 0x80) return false;
        const auto c1 = static_cast<unsigned char>(p[1]);
        if ((c == 0xe0 && c1 < 0xa0) || (c == 0xed && c1 > 0x9f) || (c == 0xf0 && c1 < 0x90) ||
            (c == 0xf4 && c1 > 0x8f))
          return false;
      }
      if (text) text->append(p, n);
      p += n;
    }
    return false;
  }

  bool number(const char*& p) const {
    auto digit = [&](const char* q) { return q < end_ && *q >= '0' && *q <= '9'; };
    if (p < end_ && *p == '-') ++p;
    if (!digit(p)) return false;
    if (*p == '0')
      ++p;
    else
      while (digit(p)) ++p;
    if (p < end_ && *p == '.') {
      ++p;
      if (!digit(p)) return false;
      while (digit(p)) ++p;
    }
    if (p < end_ && (*p == 'e' || *p == 'E')) {
      ++p;
      if (p < end_ && (*p == '+' || *p == '-')) ++p;
      if (!digit(p)) return false;
      while (digit(p)) ++p;
    }
    return true;
  }

  bool literal(const char*& p, std::string_view word, std::string& out) {
    if (static_cast<std::size_t>(end_ - p) < word.size() ||
        std::string_view(p, word.size()) != word)
      return false;
    out.append(word);
    p += word.size();
    return true;
  }

  const char* s_;
  const char* end_;
  key_order order_;
  std::uint64_t rng_;
};

}  // namespace json_keys_detail

/// `json` with the members of every object reordered into `out` (see the file comment); false
/// when it is not one strict JSON value.
inline bool try_reorder_keys(std::string_view json, key_order o, std::uint64_t seed,
                             std::string& out) {
  json_keys_detail::reorderer r(json, o, seed);
  out.assign(r.lead());
  if (!r.run(out)) return false;
  std::size_t tail = json.size();  // trailing whitespace, as it was
  while (tail > 0 && (json[tail - 1] == ' ' || json[tail - 1] == '\t' || json[tail - 1] == '\n' ||
                      json[tail - 1] == '\r'))
    --tail;
  out.append(json.substr(tail));
  return true;
}

/// `json` with the members of every object reordered; unchanged when it is not strict JSON.
inline std::string reorder_keys(std::string_view json, key_order o, std::uint64_t seed = 1) {
  std::string out;
  return try_reorder_keys(json, o, seed, out) ? out : std::string(json);
}

/// A response body with the keys of all its JSON reordered: the body itself when it is one JSON
/// value, else every line that is (NDJSON) or whose field value is (SSE `data:`, llama.cpp's
/// `error:`).  Lines keep their endings; a document spread over several `data:` lines is kept.
inline std::string reorder_stream_keys(std::string_view body, key_order o, std::uint64_t seed = 1) {
  std::string out;
  if (try_reorder_keys(body, o, seed, out)) return out;
  out.clear();
  out.reserve(body.size());
  std::uint64_t line_no = 0;
  for (std::size_t at = 0; at < body.size();) {
    auto nl = body.find('\n', at);
    const std::size_t stop = nl == std::string_view::npos ? body.size() : nl;
    std::size_t content_end = stop;
    if (content_end > at && body[content_end - 1] == '\r') --content_end;
    const std::string_view line = body.substr(at, content_end - at);
    std::size_t json_at = std::string_view::npos;
    if (line.find('\r') != std::string_view::npos) {
      // A lone CR ends a line too (SSE): a document across it is left as it is, or reordering
      // would move bytes from one line to the other.
    } else if (!line.empty() && (line[0] == '{' || line[0] == '[')) {
      json_at = 0;
    } else if (const auto colon = line.find(':'); colon != std::string_view::npos && colon > 0) {
      const bool name = std::all_of(line.begin(), line.begin() + static_cast<std::ptrdiff_t>(colon),
                                    [](char c) { return (c >= 'a' && c <= 'z') || c == '_'; });
      std::size_t v = colon + 1;
      if (v < line.size() && line[v] == ' ') ++v;
      if (name && v < line.size() && line[v] == '{') json_at = v;
    }
    out.append(line.substr(0, json_at == std::string_view::npos ? line.size() : json_at));
    if (json_at != std::string_view::npos)
      out.append(reorder_keys(line.substr(json_at), o, seed + ++line_no));
    out.append(body.substr(content_end, stop - content_end));
    if (nl != std::string_view::npos) out.push_back('\n');
    at = nl == std::string_view::npos ? body.size() : nl + 1;
  }
  return out;
}

}  // namespace tokentap::test
