#pragma once
// The access log's line for an exchange that ended (`access_log: true`, at info): who asked for
// what, where it went, how it ended and how long it took.  Values a client chose are printed
// bounded, and the target with its secrets redacted.
#include <string_view>

#include "proxy/exchange.hpp"

namespace tokentap::proxy {

void write_access_log(const exchange& ex, std::string_view peer);

}  // namespace tokentap::proxy
