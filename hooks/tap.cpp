#include "hooks/tap.hpp"

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

}  // namespace tokentap::hooks
