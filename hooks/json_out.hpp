#pragma once
// Tiny JSON output helpers for records built once per exchange (not on the per-event path).
#include <cstdint>
#include <string>
#include <string_view>

namespace tokentap::hooks::json {

/// True when `s` is well-formed UTF-8 (JSON strings must be).
bool valid_utf8(std::string_view s) noexcept;

/// Appends `s` as a quoted JSON string.  Invalid UTF-8 bytes become U+FFFD (lossy: callers that
/// need the exact bytes check valid_utf8 first and use base64).
void append_string(std::string& out, std::string_view s);

/// Appends `s` base64-encoded, quoted.
void append_base64(std::string& out, std::string_view s);

/// Appends a number with up to 3 decimals, or `null` when negative (= not applicable).
void append_ms(std::string& out, double v);
void append_int(std::string& out, std::int64_t v);  ///< `null` when negative

}  // namespace tokentap::hooks::json
