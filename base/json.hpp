#pragma once
// Tiny JSON output helpers (escaping, base64, numbers), shared by everything that writes JSON:
// trace records, the proxy's error bodies, the simulator's streams; and `writer`, which keeps the
// separators and the nesting of a document written a value at a time (/api/stats).  Pure, no
// allocation beyond the output string.
#include <charconv>
#include <concepts>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>

namespace tokentap::base::json {

/// True when `s` is well-formed UTF-8 (JSON strings must be).
bool valid_utf8(std::string_view s) noexcept;

/// Appends `s` escaped for use between JSON quotes.  Invalid UTF-8 bytes become U+FFFD (lossy:
/// callers that need the exact bytes check valid_utf8 first and use base64).
void append_escaped(std::string& out, std::string_view s);

/// `s` escaped, as a new string (for building JSON by concatenation).
std::string escaped(std::string_view s);

/// True when `s` goes between JSON quotes as it is: printable ASCII other than `"` and `\`
/// (what append_escaped copies unchanged).  Eight bytes at a time.
bool plain(std::string_view s) noexcept;

/// Appends `s` as a quoted JSON string.
void append_string(std::string& out, std::string_view s);

/// Appends `s` as a quoted JSON string when it is valid UTF-8 (one pass); otherwise appends
/// nothing and returns false (the caller falls back to base64).
bool append_string_if_utf8(std::string& out, std::string_view s);

/// Appends `s` escaped (no quotes) when it is valid UTF-8; otherwise appends nothing and returns
/// false.  Escaping works byte by byte, so valid pieces escaped one after another give what their
/// concatenation would (the trace writer escapes a read's shape once per stream this way).
bool append_escaped_if_utf8(std::string& out, std::string_view s);

/// Appends `s` base64-encoded, quoted.
void append_base64(std::string& out, std::string_view s);

/// Decodes base64 (characters outside the alphabet, like padding, are skipped).
std::string base64_decode(std::string_view s);

/// Appends a number with 3 decimals, or `null` when negative (= not applicable) or not finite.
void append_ms(std::string& out, double v);
/// The values as append_ms writes them, separated by commas.
void append_ms_list(std::string& out, std::span<const double> values);
void append_int(std::string& out, std::int64_t v);  ///< `null` when negative
/// A Unix time in microseconds as RFC 3339 UTC: `YYYY-MM-DDTHH:MM:SS.ffffffZ` (the digits only,
/// no quotes) — what gmtime_r and "%04d-%02d-%02dT%02d:%02d:%02d.%06lldZ" give, without them.
void append_rfc3339_us(std::string& out, std::int64_t us);

/// Writes one JSON document into a string, a value at a time: the commas, the colons and the
/// closing brackets are its job.  Keys and strings are escaped (append_escaped).  At most 63
/// levels deep.
///
///   json::writer w(out);
///   w.begin_object().field("requests", n).key("ttft_ms").ms(v).end();
class writer {
 public:
  explicit writer(std::string& out) noexcept : out_(out) {}

  writer& begin_object() { return open('{', false); }
  writer& begin_array() { return open('[', true); }
  /// Ends the innermost object or array.
  writer& end();

  /// The next value's key, inside an object.
  writer& key(std::string_view k);

  writer& string(std::string_view s);
  /// A string, or null when it is empty.
  writer& string_or_null(std::string_view s);
  writer& boolean(bool b);
  writer& null();
  template <std::integral T>
  writer& integer(T v) {
    before_value();
    if constexpr (std::is_same_v<T, bool>) {
      out_ += v ? "true" : "false";
    } else {
      char buf[24];
      out_.append(buf, std::to_chars(buf, buf + sizeof buf, v).ptr);
    }
    return *this;
  }
  /// An integer, or null when it is negative (not known).
  writer& integer_or_null(std::int64_t v) { return v < 0 ? null() : integer(v); }
  /// `v` with `decimals` digits after the point (printf's %.Nf); null when not finite.
  writer& number(double v, int decimals);
  /// `v` with `digits` significant digits (printf's %.Ng); null when not finite.
  writer& significant(double v, int digits);
  /// Milliseconds as append_ms writes them: 3 decimals, null when negative.
  writer& ms(double v);
  /// A value written elsewhere, as JSON.
  writer& raw(std::string_view json);

  /// key(k) and the value, for strings, integers and booleans.
  writer& field(std::string_view k, std::string_view v) { return key(k).string(v); }
  writer& field(std::string_view k, const char* v) { return key(k).string(v); }
  writer& field(std::string_view k, const std::string& v) { return key(k).string(v); }
  template <std::integral T>
  writer& field(std::string_view k, T v) {
    return key(k).integer(v);
  }

 private:
  writer& open(char bracket, bool array);
  void before_value();

  std::string& out_;
  std::uint64_t arrays_ = 0;     // bit d: level d is an array
  std::uint64_t has_value_ = 0;  // bit d: level d holds a value (the next one needs a comma)
  unsigned depth_ = 0;
  bool after_key_ = false;
};

}  // namespace tokentap::base::json
