// JSON output helpers: the word-at-a-time escaper against a byte-at-a-time reference on every
// special byte at every alignment, strict UTF-8 handling, and the printf-free number formatting.
#include "base/json.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <limits>
#include <random>
#include <vector>

namespace tokentap::base::json {
namespace {

// The obvious implementation, one byte at a time (what the fast path must equal).
std::string reference_escape(std::string_view s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == '"')
      out += "\\\"";
    else if (c == '\\')
      out += "\\\\";
    else if (c == '\n')
      out += "\\n";
    else if (c == '\r')
      out += "\\r";
    else if (c == '\t')
      out += "\\t";
    else if (c < 0x20) {
      char b[8];
      std::snprintf(b, sizeof b, "\\u%04x", c);
      out += b;
    } else
      out.push_back(static_cast<char>(c));
  }
  return out;
}

TEST(JsonOut, EscapesEverySpecialByteAtEveryAlignment) {
  // 70 bytes: the 16-byte SIMD blocks (taken while 32 bytes are left), the 8-byte words and the
  // byte-at-a-time tail all see the special byte at each of their positions; 48 and 13 bytes:
  // the short strings' path (words into a buffer on the stack, the last one padded) likewise.
  for (const std::size_t size : {70, 48, 13}) {
    for (int special = 0; special < 0x80; ++special) {
      for (std::size_t pos = 0; pos < size; ++pos) {
        std::string s(size, 'a');
        s[pos] = static_cast<char>(special);
        std::string out = "x";
        append_escaped(out, s);
        ASSERT_EQ(out, "x" + reference_escape(s)) << "byte " << special << " at " << pos;
        std::string strict = "x";
        ASSERT_TRUE(append_escaped_if_utf8(strict, s));
        ASSERT_EQ(strict, out);
      }
    }
  }
}

TEST(JsonOut, RandomAsciiMatchesTheReference) {
  std::mt19937 rng(7);
  for (int round = 0; round < 2000; ++round) {
    std::string s(rng() % 200, ' ');
    for (auto& c : s) c = static_cast<char>(rng() % 0x80);
    std::string out;
    append_escaped(out, s);
    ASSERT_EQ(out, reference_escape(s));
    std::string strict;
    ASSERT_TRUE(append_string_if_utf8(strict, s));
    ASSERT_EQ(strict, "\"" + reference_escape(s) + "\"");
  }
}

// Valid UTF-8 mixed with every kind of ASCII special, dense and sparse, at lengths crossing
// every path (blocks, words, tail); multi-byte characters straddle block boundaries.
TEST(JsonOut, RandomUtf8MixMatchesTheReference) {
  std::mt19937 rng(11);
  const std::string pieces[] = {"\"",
                                "\\",
                                "\n",
                                "\r",
                                "\t",
                                "\x01",
                                "\x1f",
                                "a",
                                "bc",
                                "defgh",
                                "\xC3\xA9",
                                "\xE4\xB8\x80",
                                "\xF0\x9F\x98\x80",
                                "\xE2\x80\xA8",
                                "{\"k\":"};
  for (int round = 0; round < 3000; ++round) {
    std::string s;
    const auto n = rng() % 120;
    const auto dense = rng() % 4;  // 0: mostly specials ... 3: mostly plain runs
    for (std::size_t i = 0; i < n; ++i) {
      const auto& piece = pieces[rng() % (dense == 3 ? 15 : std::size(pieces))];
      s += (dense == 3 && rng() % 4) ? std::string("plainrun") : piece;
    }
    ASSERT_TRUE(valid_utf8(s));
    std::string out = "prefix";
    append_escaped(out, s);
    ASSERT_EQ(out, "prefix" + reference_escape(s));
    std::string strict(rng() % 70000, 'r');  // a long record under construction
    const auto before = strict;
    ASSERT_TRUE(append_string_if_utf8(strict, s));
    ASSERT_EQ(strict, before + "\"" + reference_escape(s) + "\"");
    // One invalid byte anywhere: strict refuses and leaves the output as it was.
    if (!s.empty()) {
      std::string bad = s;
      bad.insert(rng() % bad.size(), 1, '\xFF');
      std::string r = "keep";
      ASSERT_FALSE(append_string_if_utf8(r, bad));
      ASSERT_EQ(r, "keep");
    }
  }
}

// The SSSE3 path (taken on any x86-64 CPU with SSSE3, so on every CI machine) escapes quotes and
// backslashes through a shuffle per 8-byte half chosen by the half's mask: every mask, in both
// halves, at several alignments, mixed with quotes vs backslashes, against the reference.
TEST(JsonOut, EveryQuoteAndBackslashPatternOfABlock) {
  for (unsigned m = 0; m < 65536; m += (m < 512 ? 1 : 257)) {
    for (unsigned shift = 0; shift < 3; ++shift) {
      std::string s(shift, 'x');
      for (int block = 0; block < 3; ++block) {
        for (unsigned i = 0; i < 16; ++i) {
          if (m & (1u << i))
            s += "\\\"\n\r\t"[(i + static_cast<unsigned>(block)) % 5];
          else
            s += static_cast<char>('a' + i);
        }
      }
      s += "tail";
      std::string out = "p";
      append_escaped(out, s);
      ASSERT_EQ(out, "p" + reference_escape(s)) << "mask " << m << " shift " << shift;
      std::string strict;
      ASSERT_TRUE(append_string_if_utf8(strict, s));
      ASSERT_EQ(strict, "\"" + reference_escape(s) + "\"");
    }
  }
}

// Every length (the SSSE3 path escapes the last, partial block through a padded copy) with
// quotes, backslashes, line ends, tabs, other control characters and UTF-8 at random.
TEST(JsonOut, EveryLengthMatchesTheReference) {
  std::mt19937 rng(13);
  const std::string alphabet[] = {"a", "b", "\"", "\\", "\n", "\r", "\t", "\x01", "\xC3\xA9"};
  for (std::size_t len = 0; len <= 70; ++len) {
    for (int round = 0; round < 300; ++round) {
      std::string s;
      const auto plain = rng() % 3;  // 0: specials everywhere ... 2: mostly plain
      while (s.size() < len) {
        const auto& piece = alphabet[plain == 2 && rng() % 8 ? 0 : rng() % std::size(alphabet)];
        if (s.size() + piece.size() > len) break;
        s += piece;
      }
      while (s.size() < len) s += 'z';
      std::string out = "p";
      append_escaped(out, s);
      ASSERT_EQ(out, "p" + reference_escape(s)) << len;
      std::string strict(rng() % 100, 'r');
      const auto before = strict;
      ASSERT_TRUE(append_string_if_utf8(strict, s));
      ASSERT_EQ(strict, before + "\"" + reference_escape(s) + "\"") << len;
    }
  }
}

// append_string quotes plain strings of up to 256 bytes on the stack in one append and sends the
// rest through the escaper: at and around that length, with the byte that needs attention (or
// none) first, last or nowhere, the result is the reference's; `plain` says which strings the
// escaper leaves as they are.
TEST(JsonOut, AppendStringAndPlainAroundTheShortPathsLength) {
  for (const std::size_t len : {0, 1, 7, 8, 9, 255, 256, 257, 300}) {
    for (const char* special : {"", "\"", "\\", "\x1f", "\x7f", "\xC3\xA9"}) {
      for (const bool at_end : {false, true}) {
        std::string s(len, 'k');
        const std::string_view sp(special);
        if (!sp.empty() && len >= sp.size()) s.replace(at_end ? len - sp.size() : 0, sp.size(), sp);
        std::string out = "{\"a\":";
        append_string(out, s);
        ASSERT_EQ(out, "{\"a\":\"" + reference_escape(s) + "\"") << len << " " << special;
        const bool ascii = std::all_of(s.begin(), s.end(),
                                       [](char c) { return static_cast<unsigned char>(c) < 0x80; });
        ASSERT_EQ(plain(s), ascii && reference_escape(s) == s) << len << " " << special;
      }
    }
  }
}

TEST(JsonOut, Utf8IsKeptInvalidIsReplacedOrRefused) {
  const std::string ok = "caf\xC3\xA9 \xE4\xB8\x80 \xF0\x9F\x98\x80 \xE2\x80\xA8 end";
  std::string out;
  append_escaped(out, ok);
  EXPECT_EQ(out, ok);
  EXPECT_TRUE(valid_utf8(ok));
  const std::string bad = "abcdefgh\xC3(split\xE4\xB8";  // a lone lead byte, a cut sequence
  EXPECT_FALSE(valid_utf8(bad));
  out.clear();
  append_escaped(out, bad);
  EXPECT_EQ(out, "abcdefgh\xEF\xBF\xBD(split\xEF\xBF\xBD\xEF\xBF\xBD");
  std::string strict = "prefix";
  EXPECT_FALSE(append_string_if_utf8(strict, bad));
  EXPECT_EQ(strict, "prefix") << "a refused string leaves the output untouched";
  for (const char* invalid : {"\xC0\x80", "\xED\xA0\x80", "\xF4\x90\x80\x80", "\x80", "\xFF"}) {
    EXPECT_FALSE(valid_utf8(invalid)) << invalid;
    std::string s;
    EXPECT_FALSE(append_string_if_utf8(s, invalid));
  }
}

TEST(JsonOut, LongInputsGrowTheBuffer) {
  std::string s(100000, '\x01');  // every byte becomes six
  std::string out;
  append_escaped(out, s);
  EXPECT_EQ(out.size(), 600000u);
  EXPECT_EQ(out.substr(0, 12), "\\u0001\\u0001");
}

TEST(JsonOut, NumbersWithoutPrintf) {
  const auto ms = [](double v) {
    std::string s;
    append_ms(s, v);
    return s;
  };
  EXPECT_EQ(ms(0), "0.000");
  EXPECT_EQ(ms(12.3456), "12.346");
  EXPECT_EQ(ms(0.0004), "0.000");
  EXPECT_EQ(ms(1.9999), "2.000");
  EXPECT_EQ(ms(123456789.125), "123456789.125");
  EXPECT_EQ(ms(-1), "null");
  EXPECT_EQ(ms(1e20), "100000000000000000000.000");
  // Not numbers in JSON: null, like "not applicable".  The largest double in full.
  EXPECT_EQ(ms(std::numeric_limits<double>::quiet_NaN()), "null");
  EXPECT_EQ(ms(std::numeric_limits<double>::infinity()), "null");
  EXPECT_EQ(ms(std::numeric_limits<double>::max()).size(), 309u + 4u);
  std::mt19937 rng(3);
  for (int i = 0; i < 10000; ++i) {
    const double v = static_cast<double>(rng() % 100000000) / 997.0;
    char b[64];
    std::snprintf(b, sizeof b, "%.3f", v);
    ASSERT_EQ(ms(v), b) << v;
  }
  // A list is each value as append_ms writes it, comma-separated, whatever values it mixes.
  const double odd[] = {-1, std::numeric_limits<double>::quiet_NaN(), 1e20, 999999999999999.9994};
  for (int round = 0; round < 500; ++round) {
    std::vector<double> values(rng() % 40);
    for (auto& v : values)
      v = rng() % 8 == 0 ? odd[rng() % std::size(odd)]
                         : static_cast<double>(rng() % 100000000) / 997.0;
    std::string want = "[";
    for (std::size_t i = 0; i < values.size(); ++i) want += (i ? "," : "") + ms(values[i]);
    std::string got = "[";
    append_ms_list(got, values);
    ASSERT_EQ(got, want) << round;
  }
  std::string s;
  append_int(s, 0);
  append_int(s, -5);
  append_int(s, 9223372036854775807);
  EXPECT_EQ(s, "0null9223372036854775807");
}

// RFC 3339 from the time's own arithmetic is what gmtime_r and printf give: the epoch, leap days,
// centuries (1900 and 2100 are not leap years, 2000 is), the last microsecond of a day and of a
// year, times before 1970 (floored: the day before at 23:59:59.999999), and a spread of random
// times up to year 9999.
std::string reference_rfc3339(std::int64_t us) {
  std::int64_t secs = us / 1000000, frac = us % 1000000;
  if (frac < 0) {
    frac += 1000000;
    --secs;
  }
  const auto t = static_cast<std::time_t>(secs);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[80];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%06lldZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                static_cast<long long>(frac));
  return buf;
}

TEST(JsonOut, Rfc3339IsWhatGmtimeAndPrintfGive) {
  const std::int64_t day = 86'400'000'000;
  std::vector<std::int64_t> times = {0,
                                     1,
                                     day - 1,
                                     day,
                                     -1,
                                     -day,
                                     -day - 1,
                                     951'782'400'000'000,     // 2000-02-29
                                     951'868'799'999'999,     // its last microsecond
                                     4'107'542'400'000'000,   // 2100-03-01 (no 2100-02-29)
                                     -2'203'891'200'000'000,  // 1900-03-01
                                     1'798'761'599'999'999,   // 2026-12-31T23:59:59.999999
                                     1'780'000'000'123'456,
                                     253'402'300'799'999'999};  // 9999-12-31T23:59:59.999999
  std::mt19937_64 rng(3339);
  std::uniform_int_distribution<std::int64_t> any(-2'208'988'800'000'000, 253'402'300'799'999'999);
  for (int i = 0; i < 20000; ++i) times.push_back(any(rng));
  for (const auto us : times) {
    std::string s = "x";  // appended to
    append_rfc3339_us(s, us);
    ASSERT_EQ(s, "x" + reference_rfc3339(us)) << us;
  }
  std::string s;
  append_rfc3339_us(s, 1'780'000'000'123'456);
  EXPECT_EQ(s, "2026-05-28T20:26:40.123456Z");
}

TEST(JsonWriter, SeparatorsAndNestingAreItsJob) {
  std::string out;
  writer w(out);
  w.begin_object()
      .field("name", "a\"b")
      .field("n", 3)
      .field("big", std::uint64_t{18446744073709551615u})
      .field("neg", -2)
      .field("on", true)
      .key("none")
      .null()
      .key("list")
      .begin_array();
  for (int i = 0; i < 3; ++i) w.begin_object().field("i", i).end();
  w.begin_array().end().begin_object().end().end();  // list
  w.key("empty").begin_array().end();
  w.key("raw").raw(R"({"x":1})");
  w.key("s").string_or_null("").key("t").string_or_null("v");
  w.field("k\"\n", "\x01");
  w.end();
  EXPECT_EQ(out,
            R"({"name":"a\"b","n":3,"big":18446744073709551615,"neg":-2,"on":true,"none":null,)"
            R"("list":[{"i":0},{"i":1},{"i":2},[],{}],"empty":[],"raw":{"x":1},"s":null,)"
            R"("t":"v","k\"\n":"\u0001"})");
}

TEST(JsonWriter, NumbersAreWhatPrintfWritesAndNullWhenNotFinite) {
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> any(-1e6, 1e9);
  const std::vector<double> edges = {0,     -0.0,  0.5,      1.0005,    2.5e-7,
                                     1e300, -3.25, 999.9995, 0.0001234, 123456789.0};
  for (std::size_t i = 0; i < 20000; ++i) {
    const double v = i < edges.size() ? edges[i] : any(rng);
    for (const int d : {0, 1, 3, 4, 6}) {
      std::string out;
      writer(out).number(v, d);
      char buf[400];
      std::snprintf(buf, sizeof buf, "%.*f", d, v);
      ASSERT_EQ(out, buf) << v << " " << d;
    }
    std::string g;
    writer(g).significant(v, 4);
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.4g", v);
    ASSERT_EQ(g, buf) << v;
  }
  std::string out;
  writer w(out);
  w.begin_array()
      .number(std::numeric_limits<double>::infinity(), 3)
      .significant(std::nan(""), 4)
      .ms(-1)
      .ms(1.5)
      .end();
  EXPECT_EQ(out, "[null,null,null,1.500]");
}

}  // namespace
}  // namespace tokentap::base::json
