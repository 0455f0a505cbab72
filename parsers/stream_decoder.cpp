// The decoder's façade: provider names, framing, the end of a stream and usage normalization
// (DESIGN.md §6).  Each provider's JSON is read in its own file (decode_*.cpp).
#include "parsers/stream_decoder.hpp"

#include <charconv>
#include <cmath>
#include <initializer_list>

#include "parsers/decoder_impl.hpp"

namespace tokentap::parsers {

namespace od = simdjson::ondemand;

std::string_view to_string(provider p) noexcept {
  switch (p) {
#define TOKENTAP_PROVIDER(id, label, ...) \
  case provider::id:                      \
    return label;
#include "parsers/providers.def"
    case provider::unknown:
      break;
  }
  return "unknown";
}

std::string_view to_string(channel c) noexcept {
  switch (c) {
    case channel::content:
      return "content";
    case channel::reasoning:
      return "reasoning";
    case channel::tool:
      return "tool";
  }
  return "content";
}

std::string_view to_string(parse_stage s) noexcept {
  switch (s) {
    case parse_stage::framing:
      return "framing";
    case parse_stage::json:
      return "json";
    case parse_stage::oversize:
      return "oversize";
  }
  return "json";
}

provider provider_from_path(std::string_view path) noexcept {
#define TOKENTAP_PROVIDER(id, label, walk, sniff, ...)                                    \
  for (const std::string_view end : std::initializer_list<std::string_view>{__VA_ARGS__}) \
    if (path.ends_with(end)) return provider::id;
#include "parsers/providers.def"
  return provider::unknown;
}

openai_chunk_reader& thread_chunk_reader() {
  static thread_local openai_chunk_reader r;
  return r;
}

stream_decoder::stream_decoder(provider p, std::string_view content_type, std::size_t max)
    : impl_(std::make_unique<impl>(p, content_type, max)) {}
stream_decoder::~stream_decoder() = default;
stream_decoder::stream_decoder(stream_decoder&&) noexcept = default;
stream_decoder& stream_decoder::operator=(stream_decoder&&) noexcept = default;

void stream_decoder::feed(std::string_view bytes, std::int64_t t_ns, decoder_handler& h) {
  auto& d = *impl_;
  d.h = &h;
  d.fit_doc = nullptr;
  d.read_events = 0;
  switch (d.frame) {
    case framing::sse:
      d.sse.feed(bytes, t_ns, d);
      break;
    case framing::ndjson:
      d.ndjson.feed(bytes, t_ns, d);
      break;
    case framing::json:
      if (d.body_oversize) break;
      if (d.body.size() + bytes.size() > d.sse.max_event_bytes()) {
        d.body_oversize = true;
        d.body.clear();
        h.on_parse_error(parse_stage::oversize, t_ns);
        break;
      }
      d.body.append(bytes);
      break;
  }
}

void stream_decoder::finish(std::int64_t t_ns, decoder_handler& h) {
  auto& d = *impl_;
  d.h = &h;
  d.fit_doc = nullptr;
  d.read_events = 0;
  switch (d.frame) {
    case framing::sse:
      if (d.sse.finish()) h.on_parse_error(parse_stage::framing, t_ns);
      break;
    case framing::ndjson:
      d.ndjson.finish(t_ns, d);
      break;
    case framing::json:
      if (!d.body_oversize && !d.body.empty()) d.decode(d.body, {}, t_ns);
      d.body.clear();
      break;
  }
  // A tag prefix held at the end is text, of the time its delta arrived.
  d.think.flush([&](bool in_think, std::string_view part) {
    d.token(in_think ? channel::reasoning : channel::content, part, d.think_held_ns);
  });
  for (std::size_t i = 0; i < d.other_think.size(); ++i) {
    const auto choice = static_cast<std::uint32_t>(i + 1);
    d.other_think[i].flush([&](bool in_think, std::string_view part) {
      d.token(in_think ? channel::reasoning : channel::content, part, d.other_think_held_ns[i],
              choice);
    });
  }
}

usage_counts stream_decoder::usage() const {
  const auto& d = *impl_;
  usage_counts u;
  u.input_tokens = d.input;
  u.output_tokens = d.output;
  u.reasoning_tokens = d.reasoning;
  u.cached_input_tokens = d.cached;
  u.cache_write_tokens = d.cache_write;
  u.cache_fields = d.cache_fields;
  if (d.anth_input >= 0 || d.anth_read >= 0 || d.anth_creation >= 0) {
    // Anthropic's input_tokens excludes cache reads and writes; ours includes them.
    u.input_tokens = std::max<std::int64_t>(0, d.anth_input) +
                     std::max<std::int64_t>(0, d.anth_read) +
                     std::max<std::int64_t>(0, d.anth_creation);
    u.cached_input_tokens = d.anth_read;
    u.cache_write_tokens = d.anth_creation;
  }
  if (d.timings_prompt >= 0 || d.timings_cache >= 0 || d.timings_predicted >= 0) {
    // llama.cpp: the usage block wins where present; timings fill the gaps.
    if (u.input_tokens < 0 && d.timings_prompt >= 0)
      u.input_tokens = d.timings_prompt + std::max<std::int64_t>(0, d.timings_cache);
    if (u.output_tokens < 0) u.output_tokens = d.timings_predicted;
    if (u.cached_input_tokens < 0 && d.timings_cache >= 0) {
      u.cached_input_tokens = d.timings_cache;
      u.cache_fields = true;
    }
  }
  const auto counted_reasoning = static_cast<std::int64_t>(d.tokens[1]);
  if (u.reasoning_tokens < 0) u.reasoning_tokens = counted_reasoning;
  if (u.output_tokens < 0 && (d.tokens[0] + d.tokens[1] + d.tokens[2]) > 0)
    u.output_tokens = static_cast<std::int64_t>(d.tokens[0] + d.tokens[1] + d.tokens[2]);
  return u;
}

provider stream_decoder::detected_provider() const noexcept {
  return impl_->prov;
}

std::string_view stream_decoder::response_id() const noexcept {
  return impl_->response_id;
}

std::string_view stream_decoder::response_model() const noexcept {
  return impl_->response_model;
}

const engine_account& stream_decoder::engine() const noexcept {
  return impl_->engine;
}

std::string_view to_string(engine_account::source_t s) noexcept {
  switch (s) {
    case engine_account::source_t::llamacpp:
      return "llama.cpp";
    case engine_account::source_t::vllm:
      return "vllm";
    case engine_account::source_t::ollama:
      return "ollama";
    case engine_account::source_t::tgi:
      return "tgi";
    case engine_account::source_t::none:
      break;
  }
  return "";
}

double engine_duration(double ms) noexcept {
  return ms >= 0 && ms <= max_engine_ms ? ms : -1;  // (NaN compares false)
}

double engine_number(std::string_view text) noexcept {
  if (text.empty()) return -1;
  double d = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), d);
  if (ec != std::errc() || ptr != text.data() + text.size() || !(d >= 0) || std::isinf(d))
    return -1;
  return d;
}

double engine_header_ms(std::string_view value) noexcept {
  while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
  while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) value.remove_suffix(1);
  const double d = engine_number(value);
  return d >= 0 ? engine_duration(d) : -1;
}

std::uint64_t stream_decoder::token_events(channel c) const noexcept {
  return impl_->tokens[static_cast<std::size_t>(c)];
}

void stream_decoder::set_fast_paths(bool on) noexcept {
  impl_->fast_paths = on;
}

bool stream_decoder::last_read_shape(std::string_view read, read_shape& out) const noexcept {
  const auto& d = *impl_;
  if (d.read_events != 1 || d.fit_doc == nullptr) return false;
  // The chunk's JSON must be the read's own bytes (not a copy of an event split across reads).
  const auto at = reinterpret_cast<std::uintptr_t>(d.fit_doc);
  const auto begin = reinterpret_cast<std::uintptr_t>(read.data());
  if (at < begin || at - begin > read.size() || read.size() - (at - begin) < d.fit_size)
    return false;
  out.shape = d.chunk_shape.bytes();
  out.prefix = d.chunk_shape.prefix();
  out.version = d.chunk_shape.version();
  out.doc_at = at - begin;
  out.doc_size = d.fit_size;
  return true;
}

void stream_decoder::add_hot_lines(hot_lines& l) const noexcept {
  const auto& d = *impl_;
  // The decoder's per-event fields through the SSE parser's, the chat chunk's shape and its
  // bytes (impl's layout).
  l.add_range(&d, d.sse.hot_end());
  l.add_range(&d.chunk_shape, &d.read_events + 1);
  d.chunk_shape.add_hot_lines(l);
}

}  // namespace tokentap::parsers
