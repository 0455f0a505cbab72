#include "hooks/export/gen_ai_semconv.hpp"

namespace tokentap::hooks {

std::string_view gen_ai_operation(parsers::provider p, std::string_view path) noexcept {
  using parsers::provider;
  const auto ends = [&](std::string_view s) { return path.ends_with(s); };
  switch (p) {
    case provider::openai_chat:
      return ends("/chat/completions") ? "chat" : "text_completion";
    case provider::ollama:
      return ends("/api/chat") ? "chat" : "text_completion";
    case provider::tgi:
    case provider::llamacpp:
      return "text_completion";
    default:
      return "chat";
  }
}

std::string_view gen_ai_provider(parsers::provider p) noexcept {
  using parsers::provider;
  switch (p) {
    case provider::openai_chat:
    case provider::openai_responses:
      return "openai";
    default:
      return parsers::to_string(p);
  }
}

std::string gen_ai_error_type(const stream_info& s) {
  if (s.status >= 400) return std::to_string(s.status);
  switch (s.outcome) {
    case stream_outcome::ok:
    case stream_outcome::client_disconnect:
    case stream_outcome::rejected:
      return "";
    default:
      return std::string(to_string(s.outcome));
  }
}

server_address server_of(std::string_view endpoint_label) {
  server_address out;
  const auto colon = endpoint_label.rfind(':');
  if (colon == std::string_view::npos) {
    out.address = endpoint_label;
    return out;
  }
  out.address = endpoint_label.substr(0, colon);
  out.port = endpoint_label.substr(colon + 1);
  if (out.address.size() > 2 && out.address.front() == '[')
    out.address = out.address.substr(1, out.address.size() - 2);
  return out;
}

}  // namespace tokentap::hooks
