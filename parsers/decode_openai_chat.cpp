// OpenAI chat completions chunks (and llama.cpp, whose native /completion shares the walk).
// The product reads them with the one-pass reader (openai_chunk.hpp, chat_chunk); the simdjson
// walk below (decode_openai), the same fields with the same meaning, runs only with
// set_fast_paths(false): the oracle the tests hold the reader to.
#include "parsers/decoder_impl.hpp"

namespace tokentap::parsers {

bool stream_decoder::impl::chat_chunk(std::string_view payload, std::int64_t t_ns) {
  auto& reader = thread_chunk_reader();
  if (!reader.read(payload, &chunk_shape)) return false;
  if (chunk_shape.fits_last()) {
    fit_doc = payload.data();
    fit_size = static_cast<std::uint32_t>(payload.size());  // <= the decoder's max event bytes
  }
  if (reader.has_facts()) chunk_facts(reader.chunk_facts());
  identify(reader.id(), reader.model());
  using field = openai_chunk_reader::field;
  for (const auto& part : reader.parts()) {
    switch (part.what) {
      case field::content:
        content(part.text, t_ns, part.choice);
        break;
      case field::reasoning:
        token(channel::reasoning, part.text, t_ns, part.choice);
        break;
      case field::tool_arguments:
        token(channel::tool, part.text, t_ns, part.choice);
        break;
      case field::finish_reason:
        h->on_finish_reason(part.text, part.choice);
        break;
    }
  }
  if (reader.has_facts()) {
    const auto& f = reader.chunk_facts();
    if (prov == provider::llamacpp) {
      content(f.top_content, t_ns);
      if (f.stop_type != "none") finish_reason(f.stop_type);
    }
    if (f.usage.completion && *f.usage.completion >= 0)
      h->on_output_count(*f.usage.completion, t_ns);
    if (f.error) h->on_stream_error(f.error_type, f.error_message, t_ns);
  }
  return true;
}

// What a chunk reports besides texts, into the decoder's state (as openai_usage,
// llamacpp_timings and decode_openai do).
void stream_decoder::impl::chunk_facts(const openai_chunk_reader::facts& f) {
  if (f.usage.prompt) input = *f.usage.prompt;
  if (f.usage.completion) output = *f.usage.completion;
  if (f.usage.reasoning) reasoning = *f.usage.reasoning;
  if (f.usage.cached) {
    cached = *f.usage.cached;
    cache_fields = true;
  }
  if (f.timings) {
    if (f.prompt_n) timings_prompt = *f.prompt_n;
    if (f.cache_n) timings_cache = *f.cache_n;
    if (f.predicted_n) timings_predicted = *f.predicted_n;
    if (prov == provider::openai_chat) prov = provider::llamacpp;
  }
  if (f.tokens_cached.value_or(-1) >= 0 && timings_cache < 0) timings_cache = *f.tokens_cached;
  if (f.prompt_ms || f.predicted_ms) llamacpp_durations(f.prompt_ms, f.predicted_ms);
  if (f.metrics) vllm_durations(f.queue_time_ms, f.time_to_first_token_ms, f.generation_time_ms);
}

void stream_decoder::impl::llamacpp_durations(const std::optional<double>& prompt_ms,
                                              const std::optional<double>& predicted_ms) {
  engine_from(engine_account::source_t::llamacpp);
  engine_duration_into(engine.prefill_ms, prompt_ms);
  engine_duration_into(engine.decode_ms, predicted_ms);
}

void stream_decoder::impl::vllm_durations(const std::optional<double>& queue,
                                          const std::optional<double>& ttft,
                                          const std::optional<double>& generation) {
  engine_from(engine_account::source_t::vllm);
  engine_duration_into(engine.queue_ms, queue);
  engine_duration_into(engine.prefill_ms, ttft);  // from scheduling: prefill, not TTFT
  engine_duration_into(engine.decode_ms, generation);
}

std::uint32_t stream_decoder::impl::choice_index(od::value v) {
  std::int64_t i = 0;
  if (v.get_int64().get(i) || i < 0 || i > 0x7fffffff) return 0;
  return static_cast<std::uint32_t>(i);
}

void stream_decoder::impl::read_delta(od::value v, choice_parts& c, int source) {
  fields(v, [&](std::string_view k, od::value dv) {
    if (k == "content") {
      c.content[source] = str(dv);
    } else if (k == "reasoning_content") {
      c.reasoning_content[source] = str(dv);
    } else if (k == "reasoning") {
      c.reasoning[source] = str(dv);
    } else if (k == "tool_calls") {
      auto& range = c.tools[source];
      range[0] = static_cast<std::uint32_t>(tool_texts.size());
      elements(dv, [&](od::value call) {
        fields(call, [&](std::string_view fk, od::value fv) {
          if (fk == "function") {
            fields(fv, [&](std::string_view ak, od::value av) {
              if (ak == "arguments") tool_texts.push_back(str(av));
            });
          }
        });
      });
      range[1] = static_cast<std::uint32_t>(tool_texts.size());
    }
  });
}

void stream_decoder::impl::emit_choice(const choice_parts& c, std::int64_t t_ns) {
  const auto i = c.index;
  for (int source = 0; source < 2; ++source) {
    const auto r = c.reasoning_content[source];
    token(channel::reasoning, r.empty() ? c.reasoning[source] : r, t_ns, i);
  }
  for (const auto text : c.content) content(text, t_ns, i);
  for (const auto& range : c.tools)
    for (auto j = range[0]; j < range[1]; ++j) token(channel::tool, tool_texts[j], t_ns, i);
  finish_reason(c.finish, i);
}

void stream_decoder::impl::openai_usage(od::value u) {
  std::int64_t details_cached = -1, hit = -1;
  fields(u, [&](std::string_view k, od::value v) {
    if (k == "prompt_tokens")
      input = num(v);
    else if (k == "completion_tokens")
      chunk_output = output = num(v);
    else if (k == "prompt_tokens_details") {
      fields(v, [&](std::string_view k2, od::value v2) {
        if (k2 == "cached_tokens") details_cached = num(v2);
      });
    } else if (k == "completion_tokens_details") {
      fields(v, [&](std::string_view k2, od::value v2) {
        if (k2 == "reasoning_tokens") reasoning = num(v2);
      });
    } else if (k == "prompt_cache_hit_tokens") {  // DeepSeek (which sends both)
      hit = num(v);
    }
  });
  const auto n = details_cached >= 0 ? details_cached : hit;
  if (n >= 0) {
    cached = n;
    cache_fields = true;
  }
}

void stream_decoder::impl::llamacpp_timings(od::value t, engine_fields& e) {
  fields(t, [&](std::string_view k, od::value v) {
    if (k == "prompt_n")
      timings_prompt = num(v);
    else if (k == "cache_n")
      timings_cache = num(v);
    else if (k == "predicted_n")
      timings_predicted = num(v);
    else if (k == "prompt_ms")
      e.prompt_ms = duration_ms(v);
    else if (k == "predicted_ms")
      e.predicted_ms = duration_ms(v);
  });
  if (prov == provider::openai_chat) prov = provider::llamacpp;
}

void stream_decoder::impl::vllm_metrics(od::value m, engine_fields& e) {
  od::json_type type;
  if (m.type().get(type) || type != od::json_type::object) return;
  e.metrics = true;
  fields(m, [&](std::string_view k, od::value v) {
    if (k == "queue_time_ms")
      e.queue_ms = duration_ms(v);
    else if (k == "time_to_first_token_ms")
      e.ttft_ms = duration_ms(v);
    else if (k == "generation_time_ms")
      e.generation_ms = duration_ms(v);
  });
}

bool stream_decoder::impl::decode_openai(od::value root, std::int64_t t_ns) {
  choice_list.clear();
  tool_texts.clear();
  chunk_output = -1;
  std::string_view top_content, stop_type, id, model;
  engine_fields engine_seen;
  std::int64_t tokens_cached = -1;
  error_views err;
  const bool ok = fields(root, [&](std::string_view k, od::value v) {
    if (k == "choices") {
      choice_list.clear();
      tool_texts.clear();
      elements(v, [&](od::value choice) {
        auto& c = choice_list.emplace_back();
        fields(choice, [&](std::string_view ck, od::value cv) {
          if (ck == "delta")
            read_delta(cv, c, 0);
          else if (ck == "message")
            read_delta(cv, c, 1);
          else if (ck == "text")
            c.content[2] = str(cv);
          else if (ck == "finish_reason")
            c.finish = str(cv);
          else if (ck == "index")
            c.index = choice_index(cv);
        });
      });
    } else if (k == "usage") {
      openai_usage(v);
    } else if (k == "error") {
      err = error_of(v);
    } else if (k == "timings") {
      llamacpp_timings(v, engine_seen);
    } else if (k == "metrics") {
      vllm_metrics(v, engine_seen);
    } else if (k == "tokens_cached") {
      tokens_cached = num(v);
    } else if (k == "content") {  // native /completion (llama.cpp)
      top_content = str(v);
    } else if (k == "stop_type") {
      stop_type = str(v);
    } else if (k == "id") {
      id = str(v);
    } else if (k == "model") {
      model = str(v);
    }
  });
  if (!ok || json_error) return false;
  identify(id, model);
  if (tokens_cached >= 0 && timings_cache < 0) timings_cache = tokens_cached;
  if (engine_seen.prompt_ms || engine_seen.predicted_ms)
    llamacpp_durations(engine_seen.prompt_ms, engine_seen.predicted_ms);
  if (engine_seen.metrics)
    vllm_durations(engine_seen.queue_ms, engine_seen.ttft_ms, engine_seen.generation_ms);
  for (const auto& c : choice_list) emit_choice(c, t_ns);
  if (prov == provider::llamacpp) {
    content(top_content, t_ns);
    if (stop_type != "none") finish_reason(stop_type);
  }
  if (chunk_output >= 0) h->on_output_count(chunk_output, t_ns);
  report(err, t_ns);
  return true;
}

// llama.cpp's native /completion events share the chat walk (`content`, `stop`, `timings`).
bool stream_decoder::impl::decode_llamacpp(od::value root, std::int64_t t_ns) {
  return decode_openai(root, t_ns);
}

bool sniff_openai_chat(const sniffed& s) noexcept {
  return s.has("choices");
}

bool sniff_llamacpp(const sniffed& s) noexcept {
  return s.has("stop") && s.has("content");
}

}  // namespace tokentap::parsers
