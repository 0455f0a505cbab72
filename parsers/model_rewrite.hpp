#pragma once
// A request body sent to another model (a shed rule's `reroute:` with `model:`), written without
// touching the rest of it: every byte outside the top-level `model` value stays as the client
// sent it.  Pure: no I/O, no Boost.
#include <optional>
#include <string>
#include <string_view>

namespace tokentap::parsers {

/// The body with its top-level `model` string replaced by `model` (JSON-escaped), or nothing when
/// the body is not a JSON object or has no top-level `model` string.
std::optional<std::string> with_model(std::string_view body, std::string_view model);

}  // namespace tokentap::parsers
