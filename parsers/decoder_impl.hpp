#pragma once
// The decoder's state and its walk over each provider's JSON, shared by the files that decode one
// provider format each (decode_*.cpp) and the façade (stream_decoder.cpp).  Private to the
// parsers: include only from there.
#include <simdjson.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "parsers/json_scratch.hpp"
#include "parsers/openai_chunk.hpp"
#include "parsers/sse_parser.hpp"
#include "parsers/stream_decoder.hpp"

namespace tokentap::parsers {

namespace od = simdjson::ondemand;

enum class framing : std::uint8_t { sse, ndjson, json };

// Reads a JSON value as a string view ("" when it is not a string).
inline std::string_view str(od::value v) {
  std::string_view s;
  return v.get_string().get(s) ? std::string_view{} : s;
}

// A duration in milliseconds (times `scale`), as openai_chunk_reader reads one: absent for
// null, NaN for a value that is no duration (engine_duration).
// The number's text is read as openai_chunk_reader reads it (engine_number).
inline std::optional<double> duration_ms(od::value v, double scale = 1) {
  constexpr double none = std::numeric_limits<double>::quiet_NaN();
  od::json_type type;
  if (v.type().get(type)) return none;
  if (type == od::json_type::null) return std::nullopt;
  if (type != od::json_type::number) return none;
  std::string_view text = v.raw_json_token();
  while (!text.empty() &&
         (text.back() == ' ' || text.back() == '\t' || text.back() == '\n' || text.back() == '\r'))
    text.remove_suffix(1);
  const double n = engine_number(text);
  if (n < 0) return none;
  const double d = n * scale;
  return engine_duration(d) >= 0 ? d : none;
}

inline std::int64_t num(od::value v) {
  std::int64_t n = -1;
  if (v.get_int64().get(n)) {
    double d;
    // A count written as a float ("12.0"); out-of-range or NaN is "not reported", never UB
    // (found by fuzz_decoder_anthropic: 4.2e24 input tokens).
    if (v.get_double().get(d) || !(d >= 0 && d < 9.0e18)) return -1;
    n = static_cast<std::int64_t>(d);
  }
  return n;
}

// `<think>…</think>` spans inside content are reasoning.  Tags may be split across deltas: a
// possible tag prefix at the end of a delta (at most 7 bytes, "</think") is held back until the
// next one.  Held inline: the decoder reads this at every delta, next to its other per-event
// fields (a string's heap buffer would be one more line to miss) — so the time a held prefix
// arrived, needed only when a stream ends holding one ("a <": text of that time, not of the
// stream's end), is the caller's to keep: feed() says when to take it.
class think_splitter {
 public:
  /// Returns true when it now holds a prefix that came with `text` (the caller keeps `text`'s
  /// time for flush); false when it holds none, or still holds one begun by an earlier delta.
  template <class Emit>
  bool feed(std::string_view text, Emit&& emit) {
    if (held_n_ == 0) {
      feed_from(text, emit);
      return held_n_ != 0;
    }
    std::string joined(held_, held_n_);  // rare: a tag split across deltas
    joined.append(text);
    held_n_ = 0;
    feed_from(joined, emit);
    return held_n_ != 0 && held_n_ != joined.size();
  }
  /// True when feed(text) would emit `text` whole, in the current channel (in_think()): nothing
  /// held from the previous delta and no '<' in it — nearly every delta.
  bool passes_whole(std::string_view text) const noexcept {
    return held_n_ == 0 && text.find('<') == std::string_view::npos;
  }
  bool in_think() const noexcept { return in_think_; }

  template <class Emit>
  void flush(Emit&& emit) {
    if (held_n_ != 0) emit(in_think_, std::string_view(held_, held_n_));
    held_n_ = 0;
  }

 private:
  template <class Emit>
  void feed_from(std::string_view s, Emit& emit) {
    while (!s.empty()) {
      const std::string_view tag = in_think_ ? "</think>" : "<think>";
      const auto lt = s.find('<');
      if (lt == std::string_view::npos) {
        emit(in_think_, s);
        return;
      }
      if (lt > 0) emit(in_think_, s.substr(0, lt));
      s.remove_prefix(lt);
      if (s.size() < tag.size() && tag.starts_with(s)) {  // a partial tag at the end: hold it
        std::memcpy(held_, s.data(), s.size());
        held_n_ = static_cast<std::uint8_t>(s.size());
        return;
      }
      if (s.starts_with(tag)) {
        in_think_ = !in_think_;
        s.remove_prefix(tag.size());
      } else {
        emit(in_think_, s.substr(0, 1));
        s.remove_prefix(1);
      }
    }
  }

  bool in_think_ = false;
  std::uint8_t held_n_ = 0;
  char held_[7];  // shorter than "</think>"
};

// What the first payload of a stream whose path named no provider shows of itself: its SSE event
// type, its top-level `type` and its top-level keys (views into the payload, valid during the
// sniff).  Each provider's sniff (providers.def) looks at it.
struct sniffed {
  std::string_view sse_type, type;
  std::span<const std::string_view> keys;
  bool has(std::string_view key) const noexcept {
    return std::find(keys.begin(), keys.end(), key) != keys.end();
  }
};
#define TOKENTAP_PROVIDER(id, label, walk, sniff, ...) bool sniff(const sniffed& s) noexcept;
#include "parsers/providers.def"

// The thread's parser, shared by every decoder on it: a payload is parsed and fully extracted
// inside one decode() call (texts reach the handler as views, valid only during the call).
struct decoder_tag;

// The thread's chat-chunk fast path (its texts are views valid until the next read, which the
// decoder hands out within the same decode() call).
openai_chunk_reader& thread_chunk_reader();

struct alignas(64) stream_decoder::impl : sse_handler, ndjson_handler {
  impl(provider p, std::string_view content_type, std::size_t max)
      : prov(p), sse(max), ndjson(max) {
    if (content_type.find("event-stream") != std::string_view::npos) {
      frame = framing::sse;
    } else if (content_type.find("ndjson") != std::string_view::npos ||
               content_type.find("jsonl") != std::string_view::npos) {
      frame = framing::ndjson;
    } else {
      frame = framing::json;
    }
  }

  // What every event reads or writes, in order: with hundreds of open streams each further
  // line of a stream's state is a miss per event.  After the two vtable pointers, one line of
  // the decoder's own fields, the SSE parser's (its first line: sse_parser::hot_end()), and
  // the last chat chunk's shape (its bytes are elsewhere).  The rest is read by other framings,
  // on slow paths or at the end.
  decoder_handler* h = nullptr;
  provider prov;
  framing frame;
  bool fast_paths = true;
  bool cache_fields = false;
  think_splitter think;
  std::array<std::uint64_t, 3> tokens{};
  sse_parser sse;
  // The bytes around the last chat chunk's text: the next one like it is read by its text.
  openai_chunk_reader::shape chunk_shape;
  // The read being fed: its events so far, and the last one's JSON if it was a chat chunk that
  // fits chunk_shape (last_read_shape).  On the shape's line.
  const char* fit_doc = nullptr;
  std::uint32_t fit_size = 0;
  std::uint32_t read_events = 0;
  ndjson_framer ndjson;
  std::string body;  // whole-JSON framing: the body so far (capped)
  bool body_oversize = false;
  std::string run;  // reused: the text of one channel run of a content delta

  // Usage as reported, before normalization.
  std::int64_t input = -1, output = -1, reasoning = -1, cached = -1, cache_write = -1;
  std::int64_t chunk_output = -1;  // the chat chunk being walked: its completion_tokens
  std::int64_t anth_input = -1, anth_read = -1, anth_creation = -1;
  std::int64_t timings_prompt = -1, timings_cache = -1, timings_predicted = -1;
  // The engine's account of its time (stream_decoder::engine).
  engine_account engine;

  // One engine duration read into `slot` (ms): absent leaves it; one that is no duration (NaN)
  // leaves it too, and is counted.
  void engine_duration_into(double& slot, const std::optional<double>& ms) noexcept {
    if (!ms) return;
    if (*ms >= 0) {
      slot = *ms;
    } else {
      ++engine.invalid;
    }
  }
  void engine_from(engine_account::source_t s) noexcept { engine.source = s; }
  // The response's id and model as the stream first names them (stream_decoder::response_id).
  std::string response_id, response_model;

  // Keeps the first non-empty id and model the stream names (they repeat in every chunk).
  void identify(std::string_view id, std::string_view model) {
    if (response_id.empty() && !id.empty()) response_id.assign(id.substr(0, max_identity_bytes));
    if (response_model.empty() && !model.empty())
      response_model.assign(model.substr(0, max_identity_bytes));
  }

  // ------------------------------------------------------------------ framing callbacks

  void on_event(const sse_event& e) noexcept override {
    ++read_events;
    if (e.data == "[DONE]") return;
    decode(e.data, e.type, e.t_ns);
  }
  void on_oversize(std::size_t, std::int64_t t_ns) noexcept override {
    h->on_parse_error(parse_stage::oversize, t_ns);
  }
  void on_unknown_field(std::string_view field, std::string_view value,
                        std::int64_t t_ns) noexcept override {
    // llama.cpp before PR #16109 sent errors as a non-standard `error:` field.
    if (field == "error") decode_error_object(value, t_ns);
  }
  void on_line(std::string_view line, std::int64_t t_ns) noexcept override {
    ++read_events;
    decode(line, {}, t_ns);
  }

  // ------------------------------------------------------------------ JSON walking

  // Set by fields()/elements() on any error, however deep: a truncated document can fail inside
  // a nested loop while the outer loops simply end.
  bool json_error = false;

  // Calls f(key, value) for each field of an object value; false if it is not an object.
  template <class F>
  bool fields(od::value v, F&& f) {
    od::object o;
    if (v.get_object().get(o)) return false;
    for (auto field : o) {
      od::field fd;
      std::string_view key;
      if (std::move(field).get(fd) || !key_of(fd, key)) {
        json_error = true;
        return false;
      }
      f(key, std::move(fd).value());
    }
    return true;
  }

  // A key as written when it has no escapes (every key we look for, and nearly every key there
  // is), unescaped otherwise — unescaping copied every key into the parser's string buffer.
  // Stage 1 validated the document, so the key's closing quote is there, and the parser's input
  // is padded (SIMDJSON_PADDING) past the document's end: eight bytes at a time, a word with
  // the first quote or backslash found by the has-zero-byte trick (exact for the lowest match).
  static bool key_of(od::field& fd, std::string_view& key) {
    static_assert(std::endian::native == std::endian::little, "the lowest match is the first");
    constexpr std::uint64_t ones = 0x0101010101010101u, highs = 0x8080808080808080u;
    constexpr auto zero_bytes = [](std::uint64_t x) { return (x - ones) & ~x & highs; };
    const char* const k = fd.key().raw();
    for (const char* p = k;; p += 8) {
      std::uint64_t w;
      std::memcpy(&w, p, 8);
      const auto m = zero_bytes(w ^ (ones * '"')) | zero_bytes(w ^ (ones * '\\'));
      if (m == 0) continue;
      const char* const q = p + std::countr_zero(m) / 8;
      if (*q == '\\') break;
      key = std::string_view(k, static_cast<std::size_t>(q - k));
      return true;
    }
    return !fd.unescaped_key().get(key);
  }

  template <class F>
  void elements(od::value v, F&& f) {
    od::array a;
    if (v.get_array().get(a)) return;
    for (auto item : a) {
      od::value val;
      if (item.get(val)) {
        json_error = true;
        return;
      }
      f(val);
    }
  }

  // ------------------------------------------------------------------ payloads
  //
  // Every decode_* reads the payload's object whole into views (valid until the next parse)
  // and only then reports, in the order decoder_handler documents: no key's meaning depends on
  // having met another key first.

  // Choices past the first have their own `<think>` splitter (the first's is on the hot line).
  // When a splitter holds a tag prefix: the time its delta arrived (per choice, the first's
  // here, off the hot line).
  std::vector<think_splitter> other_think;
  std::int64_t think_held_ns = 0;
  std::vector<std::int64_t> other_think_held_ns;

  think_splitter& think_of(std::uint32_t choice) {
    if (choice == 0) return think;
    const std::size_t i = std::min(choice, tracked_choices - 1) - 1;
    if (other_think.size() <= i) {
      other_think.resize(i + 1);
      other_think_held_ns.resize(i + 1);
    }
    return other_think[i];
  }
  std::int64_t& think_held_ns_of(std::uint32_t choice) {
    return choice == 0 ? think_held_ns
                       : other_think_held_ns[std::min(choice, tracked_choices - 1) - 1];
  }

  void token(channel ch, std::string_view text, std::int64_t t_ns, std::uint32_t choice = 0) {
    if (text.empty()) return;
    ++tokens[static_cast<std::size_t>(ch)];
    h->on_token(ch, text, t_ns, choice);
  }

  // Content may carry <think> spans: one token event per channel run within a delta.
  void content(std::string_view text, std::int64_t t_ns, std::uint32_t choice = 0) {
    if (text.empty()) return;
    auto& th = think_of(choice);
    if (th.passes_whole(text)) {  // no tag to cut out: the delta is the token, not copied
      token(th.in_think() ? channel::reasoning : channel::content, text, t_ns, choice);
      return;
    }
    run.clear();
    bool run_in_think = false;
    const bool held = th.feed(text, [&](bool in_think, std::string_view part) {
      if (!run.empty() && in_think != run_in_think) {
        token(run_in_think ? channel::reasoning : channel::content, run, t_ns, choice);
        run.clear();
      }
      run_in_think = in_think;
      run.append(part);
    });
    if (held) think_held_ns_of(choice) = t_ns;
    token(run_in_think ? channel::reasoning : channel::content, run, t_ns, choice);
  }

  void finish_reason(std::string_view r, std::uint32_t choice = 0) {
    if (!r.empty()) h->on_finish_reason(r, choice);
  }

  // A provider error: an object with `type` (else `code`) and `message`, or a bare string
  // (TGI, Ollama).  null and other values are no error.
  struct error_views {
    std::string_view type, message;
    bool present = false;
  };
  error_views error_of(od::value err) {
    error_views e;
    od::json_type jt;
    if (err.type().get(jt)) return e;
    if (jt == od::json_type::string) {
      e.message = str(err);
      e.present = true;
      return e;
    }
    if (jt != od::json_type::object) return e;
    std::string_view type, code;
    e.present = fields(err, [&](std::string_view k, od::value v) {
      if (k == "type")
        type = str(v);
      else if (k == "code")
        code = str(v);
      else if (k == "message")
        e.message = str(v);
    });
    e.type = type.empty() ? code : type;
    return e;
  }
  void report(const error_views& e, std::int64_t t_ns) {
    if (e.present) h->on_stream_error(e.type, e.message, t_ns);
  }

  // A bare error object (llama.cpp's legacy `error:` field).
  void decode_error_object(std::string_view payload, std::int64_t t_ns) {
    od::document doc;
    od::value root;
    if (!parse(payload, doc, root)) {
      h->on_parse_error(parse_stage::json, t_ns);
      return;
    }
    json_error = false;
    const auto e = error_of(root);
    if (json_error) {
      h->on_parse_error(parse_stage::json, t_ns);
      return;
    }
    h->on_stream_error(e.type, e.message, t_ns);
  }

  // Parses one payload with the thread's parser; false (nothing to decode) on any error.
  bool parse(std::string_view payload, od::document& doc, od::value& root) {
    if (payload.size() > sse.max_event_bytes()) return false;
    // iterate() runs stage 1, which validates the whole payload's UTF-8 (strings we skip too).
    auto& scratch = detail::thread_json_scratch<decoder_tag>();
    return !scratch.parser.iterate(scratch.pad(payload)).get(doc) && !doc.get_value().get(root);
  }

  void decode(std::string_view payload, std::string_view sse_type, std::int64_t t_ns) {
    // Skip leading whitespace; non-JSON payloads (keep-alive text) are not errors of ours.
    const auto first = payload.find_first_not_of(" \t\r\n");
    if (first == std::string_view::npos) return;
    if (payload[first] != '{') {
      h->on_parse_error(parse_stage::json, t_ns);
      return;
    }
    if (prov == provider::openai_chat || prov == provider::llamacpp) {
      if (fast_paths) {
        if (payload.size() > sse.max_event_bytes() || !chat_chunk(payload, t_ns))
          h->on_parse_error(parse_stage::json, t_ns);
        return;
      }
      // The oracle (fast paths off): the documents the reader takes for valid JSON, walked by
      // simdjson (decode_openai) — what they mean is simdjson's, which JSON is valid the
      // reader's strict grammar (simdjson's on-demand walk does not look at what it skips).
      if (!thread_chunk_reader().read(payload)) {
        h->on_parse_error(parse_stage::json, t_ns);
        return;
      }
    }
    od::document doc;
    od::value root;
    if (!parse(payload, doc, root)) {
      h->on_parse_error(parse_stage::json, t_ns);
      return;
    }
    json_error = false;
    bool ok = true;
    switch (prov) {
#define TOKENTAP_PROVIDER(id, label, walk, ...) \
  case provider::id:                            \
    ok = walk(root, t_ns);                      \
    break;
#include "parsers/providers.def"
      case provider::unknown:
        ok = sniff_and_decode(payload, root, sse_type, t_ns);
        break;
    }
    if (!ok) h->on_parse_error(parse_stage::json, t_ns);
  }

  // A chat completion chunk (or llama.cpp's), read by the one-pass reader (openai_chunk.hpp);
  // false: not valid JSON, nothing was emitted.  Emits what decode_openai (the simdjson walk,
  // the tests' oracle) does for the same document, in the same order.
  bool chat_chunk(std::string_view payload, std::int64_t t_ns);
  void chunk_facts(const openai_chunk_reader::facts& f);

  // The path did not say: recognize the provider from the first payload's top-level keys and
  // its `type` (the first line of providers.def whose sniff holds), then decode it.
  std::vector<std::string_view> sniffed_keys;  // reused
  bool sniff_and_decode(std::string_view payload, od::value root, std::string_view sse_type,
                        std::int64_t t_ns) {
    sniffed s{sse_type, {}, {}};
    sniffed_keys.clear();
    const bool ok = fields(root, [&](std::string_view k, od::value v) {
      sniffed_keys.push_back(k);
      if (k == "type") s.type = str(v);
    });
    if (!ok || json_error) return false;
    s.keys = sniffed_keys;
    const auto first = [&]() noexcept {
#define TOKENTAP_PROVIDER(id, label, walk, sniff, ...) \
  if (sniff(s)) return provider::id;
#include "parsers/providers.def"
      return provider::unknown;
    };
    prov = first();
    // Nothing we know yet (e.g. an error object): the next payload is sniffed again.
    if (prov == provider::unknown) return true;
    decode(payload, sse_type, t_ns);  // re-parse with the provider known (once per stream)
    return true;
  }

  // Each provider's walk over one payload's JSON (decode_*.cpp): false when it is not one.
#define TOKENTAP_PROVIDER(id, label, walk, ...) bool walk(od::value root, std::int64_t t_ns);
#include "parsers/providers.def"

  // ---- OpenAI chat completions (and llama.cpp, whose native /completion shares the walk)

  // One choice of a chunk, read whole: `index` may come after its delta.
  struct choice_parts {
    std::uint32_t index = 0;
    std::string_view reasoning_content[2], reasoning[2];  // delta's, message's
    std::string_view content[3];  // delta.content, message.content, text (legacy completions)
    std::string_view finish;
    std::uint32_t tools[2][2] = {{0, 0}, {0, 0}};  // delta's, message's: [begin, end) of tool_texts
  };
  std::vector<choice_parts> choice_list;     // reused: the chunk's choices, in array order
  std::vector<std::string_view> tool_texts;  // reused: their tool call arguments

  // `choices[].index`: a JSON integer 0 .. 2^31-1; anything else is choice 0.
  static std::uint32_t choice_index(od::value v);

  void read_delta(od::value v, choice_parts& c, int source);

  // A choice's texts: reasoning (`reasoning_content`, else vLLM's `reasoning`: servers that
  // send both send the same text), content, tool arguments, then its finish reason.
  void emit_choice(const choice_parts& c, std::int64_t t_ns);

  void openai_usage(od::value u);

  // A chunk's engine durations, as its walk meets them (a key met twice: the last one wins, as
  // in openai_chunk_reader::facts); applied once the chunk is read.
  struct engine_fields {
    std::optional<double> prompt_ms, predicted_ms;  // llama.cpp `timings`
    bool metrics = false;                           // vLLM: a `metrics` object
    std::optional<double> queue_ms, ttft_ms, generation_ms;
  };
  void llamacpp_timings(od::value t, engine_fields& e);
  void vllm_metrics(od::value m, engine_fields& e);
  // llama.cpp's `timings` durations and vLLM's `metrics`, into `engine` (as both walks read them).
  void llamacpp_durations(const std::optional<double>& prompt_ms,
                          const std::optional<double>& predicted_ms);
  void vllm_durations(const std::optional<double>& queue, const std::optional<double>& ttft,
                      const std::optional<double>& generation);

  // ---- Anthropic Messages: `content` and `stop_reason` at the top are a whole message's

  struct anthropic_counts {
    std::int64_t input = -1, output = -1, read = -1, creation = -1;
  };

  void anthropic_usage(od::value u, anthropic_counts& c);

  void apply(const anthropic_counts& c);

  // Texts of a whole message's content blocks, in array order (reused).
  std::vector<std::pair<channel, std::string_view>> blocks;
};

}  // namespace tokentap::parsers
