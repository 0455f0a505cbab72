// Text Generation Inference events (/generate_stream) and bodies (/generate): a streamed event's
// `token` is its text; `generated_text` is the whole answer, repeated on the stream's last event
// and alone in a non-streamed /generate body.
#include "parsers/decoder_impl.hpp"

namespace tokentap::parsers {

bool stream_decoder::impl::decode_tgi(od::value root, std::int64_t t_ns) {
  bool has_token = false, special = false;
  std::string_view token_text, generated, finish, error_text, error_type;
  const bool ok = fields(root, [&](std::string_view k, od::value v) {
    if (k == "token") {
      has_token = true;
      fields(v, [&](std::string_view tk, od::value tv) {
        if (tk == "text")
          token_text = str(tv);
        else if (tk == "special" && tv.get_bool().get(special))
          special = false;
      });
    } else if (k == "generated_text") {
      generated = str(v);
    } else if (k == "details") {
      fields(v, [&](std::string_view dk, od::value dv) {
        if (dk == "generated_tokens")
          output = num(dv);
        else if (dk == "input_length")
          input = num(dv);
        else if (dk == "finish_reason")
          finish = str(dv);
      });
    } else if (k == "error") {
      error_text = str(v);
    } else if (k == "error_type") {
      error_type = str(v);
    }
  });
  if (!ok || json_error) return false;
  if (has_token) {
    if (!special) content(token_text, t_ns);
  } else {
    content(generated, t_ns);  // non-streaming /generate
  }
  finish_reason(finish);
  if (!error_text.empty()) h->on_stream_error(error_type, error_text, t_ns);
  return true;
}

bool sniff_tgi(const sniffed& s) noexcept {
  return s.has("token") || s.has("generated_text");
}

}  // namespace tokentap::parsers
