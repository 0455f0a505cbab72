// Ollama NDJSON lines (/api/chat, /api/generate).
#include "parsers/decoder_impl.hpp"

namespace tokentap::parsers {

bool stream_decoder::impl::decode_ollama(od::value root, std::int64_t t_ns) {
  std::string_view message_content, message_thinking, response, thinking, done_reason, model;
  std::optional<double> load_ms, prompt_eval_ms, eval_ms;  // the final object's (nanoseconds)
  error_views err;
  const bool ok = fields(root, [&](std::string_view k, od::value v) {
    if (k == "message") {
      fields(v, [&](std::string_view mk, od::value mv) {
        if (mk == "content")
          message_content = str(mv);
        else if (mk == "thinking")
          message_thinking = str(mv);
      });
    } else if (k == "response") {
      response = str(v);
    } else if (k == "thinking") {
      thinking = str(v);
    } else if (k == "prompt_eval_count") {
      input = num(v);
    } else if (k == "eval_count") {
      output = num(v);
    } else if (k == "done_reason") {
      done_reason = str(v);
    } else if (k == "error") {
      err = error_of(v);
    } else if (k == "model") {
      model = str(v);
    } else if (k == "load_duration") {
      load_ms = duration_ms(v, 1e-6);
    } else if (k == "prompt_eval_duration") {
      prompt_eval_ms = duration_ms(v, 1e-6);
    } else if (k == "eval_duration") {
      eval_ms = duration_ms(v, 1e-6);
    }
  });
  if (!ok || json_error) return false;
  identify({}, model);
  if (load_ms || prompt_eval_ms || eval_ms) {
    engine_from(engine_account::source_t::ollama);
    engine_duration_into(engine.load_ms, load_ms);
    engine_duration_into(engine.prefill_ms, prompt_eval_ms);
    engine_duration_into(engine.decode_ms, eval_ms);
  }
  token(channel::reasoning, message_thinking, t_ns);
  token(channel::reasoning, thinking, t_ns);
  content(message_content, t_ns);
  content(response, t_ns);
  finish_reason(done_reason);
  report(err, t_ns);
  return true;
}

bool sniff_ollama(const sniffed& s) noexcept {
  return s.has("done");
}

}  // namespace tokentap::parsers
