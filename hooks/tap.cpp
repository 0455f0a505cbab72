#include "hooks/tap.hpp"

#include <algorithm>

namespace tokentap::hooks {

std::string_view to_string(stream_outcome o) noexcept {
  switch (o) {
    case stream_outcome::ok:
      return "ok";
    case stream_outcome::client_disconnect:
      return "client_disconnect";
    case stream_outcome::upstream_error:
      return "upstream_error";
    case stream_outcome::upstream_reset:
      return "upstream_reset";
    case stream_outcome::timeout:
      return "timeout";
    case stream_outcome::stream_error:
      return "stream_error";
    case stream_outcome::rejected:
      return "rejected";
  }
  return "unknown";
}

bool upstream_failed(unsigned status, stream_outcome o) noexcept {
  return status >= 500 || status == 429 || o == stream_outcome::upstream_error ||
         o == stream_outcome::upstream_reset || o == stream_outcome::timeout ||
         o == stream_outcome::stream_error;
}

std::string_view find_header(std::span<const header_view> headers, std::string_view name) noexcept {
  for (const auto& h : headers)
    if (h.name.size() == name.size() &&
        std::equal(h.name.begin(), h.name.end(), name.begin(),
                   [](char a, char b) { return (a >= 'A' && a <= 'Z' ? a | 0x20 : a) == b; }))
      return h.value;
  return {};
}

}  // namespace tokentap::hooks
