// Anthropic Messages events.
#include "parsers/decoder_impl.hpp"

namespace tokentap::parsers {

void stream_decoder::impl::anthropic_usage(od::value u, anthropic_counts& c) {
  fields(u, [&](std::string_view k, od::value v) {
    const auto n = num(v);
    if (n < 0) return;
    if (k == "input_tokens")
      c.input = n;
    else if (k == "output_tokens")
      c.output = n;
    else if (k == "cache_read_input_tokens")
      c.read = n;
    else if (k == "cache_creation_input_tokens")
      c.creation = n;
  });
}

void stream_decoder::impl::apply(const anthropic_counts& c) {
  if (c.input >= 0) anth_input = c.input;
  if (c.output >= 0) output = c.output;  // cumulative in message_delta: the last wins
  if (c.read >= 0) anth_read = c.read, cache_fields = true;
  if (c.creation >= 0) anth_creation = c.creation, cache_fields = true;
}

bool stream_decoder::impl::decode_anthropic(od::value root, std::int64_t t_ns) {
  std::string_view type, text, thinking, partial_json, delta_stop, message_stop, id, model;
  anthropic_counts message_usage, usage;
  error_views err;
  blocks.clear();
  const bool ok = fields(root, [&](std::string_view k, od::value v) {
    if (k == "type") {
      type = str(v);
    } else if (k == "delta") {
      fields(v, [&](std::string_view dk, od::value dv) {
        if (dk == "text")
          text = str(dv);
        else if (dk == "thinking")
          thinking = str(dv);
        else if (dk == "partial_json")
          partial_json = str(dv);
        else if (dk == "stop_reason")
          delta_stop = str(dv);
        // signature_delta, citations_delta: not text
      });
    } else if (k == "usage") {
      anthropic_usage(v, usage);
    } else if (k == "message") {  // message_start
      fields(v, [&](std::string_view mk, od::value mv) {
        if (mk == "usage")
          anthropic_usage(mv, message_usage);
        else if (mk == "id")
          id = str(mv);
        else if (mk == "model")
          model = str(mv);
      });
    } else if (k == "error") {
      err = error_of(v);
    } else if (k == "content") {  // a non-streamed message's blocks
      blocks.clear();
      elements(v, [&](od::value block) {
        std::string_view bt, bthinking;
        fields(block, [&](std::string_view bk, od::value bv) {
          if (bk == "text")
            bt = str(bv);
          else if (bk == "thinking")
            bthinking = str(bv);
        });
        if (!bthinking.empty()) blocks.emplace_back(channel::reasoning, bthinking);
        if (!bt.empty()) blocks.emplace_back(channel::content, bt);
      });
    } else if (k == "stop_reason") {
      message_stop = str(v);
    } else if (k == "id") {  // a non-streamed message
      id = str(v);
    } else if (k == "model") {
      model = str(v);
    }
  });
  if (!ok || json_error) return false;
  identify(id, model);
  apply(message_usage);
  apply(usage);
  token(channel::reasoning, thinking, t_ns);
  token(channel::content, text, t_ns);
  token(channel::tool, partial_json, t_ns);
  finish_reason(delta_stop);
  if (type == "message") {
    for (const auto& [ch, t] : blocks) token(ch, t, t_ns);
    finish_reason(message_stop);
  }
  report(err, t_ns);
  return true;
}

bool sniff_anthropic(const sniffed& s) noexcept {
  return s.sse_type.starts_with("message_") || s.sse_type.starts_with("content_block") ||
         s.type.starts_with("message_") || s.type.starts_with("content_block_");
}

}  // namespace tokentap::parsers
