#pragma once
// Tiny JSON output helpers (escaping, base64, numbers), shared by everything that writes JSON:
// trace records, the proxy's error bodies, the simulator's streams.  Pure, no allocation beyond
// the output string.
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace tokentap::json {

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

}  // namespace tokentap::json
