// OpenAI Responses events: what `delta` and `response` mean depends on `type`.
#include "parsers/decoder_impl.hpp"

namespace tokentap::parsers {

bool stream_decoder::impl::decode_responses(od::value root, std::int64_t t_ns) {
  std::string_view type, delta, status, code, message, id, model;
  bool has_response = false;
  std::int64_t in = -1, out = -1, in_cached = -1, out_reasoning = -1;
  bool has_in = false, has_out = false, has_cached = false, has_reasoning = false;
  error_views response_error, nested_error;
  const bool ok = fields(root, [&](std::string_view k, od::value v) {
    if (k == "type") {
      type = str(v);
    } else if (k == "delta") {
      delta = str(v);
    } else if (k == "code") {
      code = str(v);
    } else if (k == "message") {
      message = str(v);
    } else if (k == "error") {
      nested_error = error_of(v);
    } else if (k == "response") {
      has_response = true;
      fields(v, [&](std::string_view rk, od::value rv) {
        if (rk == "usage") {
          fields(rv, [&](std::string_view uk, od::value uv) {
            if (uk == "input_tokens") {
              in = num(uv), has_in = true;
            } else if (uk == "output_tokens") {
              out = num(uv), has_out = true;
            } else if (uk == "input_tokens_details") {
              fields(uv, [&](std::string_view dk, od::value dv) {
                if (dk == "cached_tokens") in_cached = num(dv), has_cached = true;
              });
            } else if (uk == "output_tokens_details") {
              fields(uv, [&](std::string_view dk, od::value dv) {
                if (dk == "reasoning_tokens") out_reasoning = num(dv), has_reasoning = true;
              });
            }
          });
        } else if (rk == "error") {
          response_error = error_of(rv);
        } else if (rk == "status") {
          status = str(rv);
        } else if (rk == "id") {
          id = str(rv);
        } else if (rk == "model") {
          model = str(rv);
        }
      });
    }
  });
  if (!ok || json_error) return false;
  identify(id, model);
  if (type == "response.output_text.delta" || type == "response.refusal.delta")
    token(channel::content, delta, t_ns);
  else if (type == "response.reasoning_summary_text.delta" ||
           type == "response.reasoning_text.delta")
    token(channel::reasoning, delta, t_ns);
  else if (type == "response.function_call_arguments.delta")
    token(channel::tool, delta, t_ns);
  const bool final =
      type == "response.completed" || type == "response.failed" || type == "response.incomplete";
  if (final && has_response) {
    if (has_in) input = in;
    if (has_out) output = out;
    if (has_cached) cached = in_cached, cache_fields = in_cached >= 0;
    if (has_reasoning) reasoning = out_reasoning;
    if (type == "response.completed")
      finish_reason("completed");
    else
      finish_reason(status);
    if (type == "response.failed") report(response_error, t_ns);
  }
  if (type == "error") {
    // {"type":"error","code":…,"message":…}; some servers nest it under "error".
    if (nested_error.present && code.empty() && message.empty())
      h->on_stream_error(nested_error.type.empty() ? "error" : nested_error.type,
                         nested_error.message, t_ns);
    else
      h->on_stream_error(code.empty() ? "error" : code, message, t_ns);
  }
  return true;
}

}  // namespace tokentap::parsers
