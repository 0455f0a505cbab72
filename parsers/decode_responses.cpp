// OpenAI Responses events: what `delta` and `response` mean depends on `type`.
#include "parsers/decoder_impl.hpp"

namespace tokentap::parsers {

namespace {

// One item of a whole response's `output`: its kind and its texts, whatever the keys' order.
struct output_item {
  std::string_view type;
  std::string_view arguments;  // function_call
  // (channel, text) of each content or summary part, in order.
  std::vector<std::pair<channel, std::string_view>> parts;
};

}  // namespace

bool stream_decoder::impl::decode_responses(od::value root, std::int64_t t_ns) {
  std::string_view type, delta, status, code, message, id, model, object;
  bool has_response = false;
  std::int64_t in = -1, out = -1, in_cached = -1, out_reasoning = -1;
  bool has_in = false, has_out = false, has_cached = false, has_reasoning = false;
  error_views response_error, nested_error;
  std::vector<output_item> output_items;  // a whole (non-streamed) response's `output`
  // Usage as a Responses object states it (an event's `response.usage`, or a whole response's).
  auto read_usage = [&](od::value rv) {
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
  };
  auto read_parts = [&](od::value arr, output_item& item, bool summary) {
    elements(arr, [&](od::value part) {
      std::string_view ptype, text, refusal;
      fields(part, [&](std::string_view pk, od::value pv) {
        if (pk == "type")
          ptype = str(pv);
        else if (pk == "text")
          text = str(pv);
        else if (pk == "refusal")
          refusal = str(pv);
      });
      if (summary || ptype == "reasoning_text" || ptype == "summary_text")
        item.parts.emplace_back(channel::reasoning, text);
      else if (ptype == "refusal")
        item.parts.emplace_back(channel::content, refusal);
      else
        item.parts.emplace_back(channel::content, text);
    });
  };
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
    } else if (k == "object") {  // a whole response: "response"
      object = str(v);
    } else if (k == "status") {
      status = str(v);
    } else if (k == "id") {
      id = str(v);
    } else if (k == "model") {
      model = str(v);
    } else if (k == "usage") {
      read_usage(v);
    } else if (k == "output") {
      elements(v, [&](od::value iv) {
        auto& item = output_items.emplace_back();
        fields(iv, [&](std::string_view ik, od::value x) {
          if (ik == "type")
            item.type = str(x);
          else if (ik == "arguments")
            item.arguments = str(x);
          else if (ik == "content")
            read_parts(x, item, false);
          else if (ik == "summary")
            read_parts(x, item, true);
        });
      });
    } else if (k == "response") {
      has_response = true;
      fields(v, [&](std::string_view rk, od::value rv) {
        if (rk == "usage") {
          read_usage(rv);
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
  if (type.empty() && object == "response") {
    // A whole response (stream: false): its texts in order, its usage and its end.
    identify(id, model);
    for (const auto& item : output_items) {
      if (item.type == "function_call") {
        token(channel::tool, item.arguments, t_ns);
        continue;
      }
      for (const auto& [ch, text] : item.parts)
        token(item.type == "reasoning" ? channel::reasoning : ch, text, t_ns);
    }
    if (has_in) input = in;
    if (has_out) output = out;
    if (has_cached) cached = in_cached, cache_fields = in_cached >= 0;
    if (has_reasoning) reasoning = out_reasoning;
    finish_reason(status);
    report(nested_error, t_ns);
    return true;
  }
  if (type.empty()) {
    // A bare {"error":{…}} event (llama.cpp ends a failed stream so, without response.failed).
    report(nested_error, t_ns);
    return true;
  }
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

bool sniff_responses(const sniffed& s) noexcept {
  return s.sse_type.starts_with("response.") || s.type.starts_with("response.");
}

}  // namespace tokentap::parsers
