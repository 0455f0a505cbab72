#include "hooks/export/trace_hook.hpp"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <memory>
#include <random>
#include <string_view>
#include <vector>

#include "base/json.hpp"
#include "hooks/builtin_seams.hpp"
#include "hooks/observe/metrics.hpp"
#include "hooks/registry.hpp"

namespace tokentap::hooks {

namespace {

std::mt19937_64& rng() {
  thread_local std::mt19937_64 r{std::random_device{}()};
  return r;
}

// A header list as the proxy passed it (secrets already redacted), kept until the record is
// rendered: each name and value after its length (4 bytes), in one string.
void pack_headers(std::string& out, std::span<const header_view> headers) {
  std::size_t n = 0;
  for (const auto& h : headers) n += 8 + h.name.size() + h.value.size();
  out.resize(n);  // written in place: one sizing, not four appends a header (I/O thread)
  char* w = out.data();
  const auto put = [&](std::string_view s) {
    const auto len = static_cast<std::uint32_t>(s.size());
    std::memcpy(w, &len, sizeof len);
    if (!s.empty()) std::memcpy(w + sizeof len, s.data(), s.size());  // (an empty one may be null)
    w += sizeof len + s.size();
  };
  for (const auto& h : headers) {
    put(h.name);
    put(h.value);
  }
}

// The next string of a packed list (pack_headers), taken off its front.
std::string_view take_packed(std::string_view& packed) noexcept {
  std::uint32_t len = 0;
  std::memcpy(&len, packed.data(), sizeof len);
  const auto s = packed.substr(sizeof len, len);
  packed.remove_prefix(sizeof len + len);
  return s;
}

// A literal, its length known when compiled (`+=` measures it at run time).
template <std::size_t N>
void lit(std::string& out, const char (&s)[N]) {
  out.append(s, N - 1);
}

// An integer as std::to_string writes it, without the temporary string.
template <class Int>
void num(std::string& out, Int v) {
  char buf[24];
  out.append(buf, std::to_chars(buf, buf + sizeof buf, v).ptr);
}

// The packed list as a JSON object.  Header names and values are nearly always plain ASCII:
// the object's size is then known and it is written in one piece (appended string by string,
// the two header objects took ~40 % of a short record's head).
void append_headers(std::string& out, std::string_view packed) {
  std::size_t strings = 0, bytes = 0;
  bool plain = true;
  for (auto rest = packed; !rest.empty(); ++strings) {
    const auto s = take_packed(rest);
    bytes += s.size();
    plain = plain && base::json::plain(s);
  }
  if (!plain) {
    out.push_back('{');
    for (bool first = true; !packed.empty(); first = false) {
      if (!first) out.push_back(',');
      base::json::append_string(out, take_packed(packed));
      out.push_back(':');
      base::json::append_string(out, take_packed(packed));
    }
    out.push_back('}');
    return;
  }
  // {"name":"value","name":"value"}: two quotes a string, a colon a pair, commas between.
  const std::size_t pairs = strings / 2;
  const std::size_t at = out.size();
  out.resize(at + 2 + bytes + 2 * strings + pairs + (pairs > 0 ? pairs - 1 : 0));
  char* w = out.data() + at;
  *w++ = '{';
  for (std::size_t i = 0; !packed.empty(); ++i) {
    const auto s = take_packed(packed);
    if (i > 0) *w++ = i % 2 == 1 ? ':' : ',';
    *w++ = '"';
    std::memcpy(w, s.data(), s.size());
    w += s.size();
    *w++ = '"';
  }
  *w = '}';
}

void append_quantiles(std::string& out, const timing_summary::quantiles& q) {
  lit(out, "{\"p50\":");
  base::json::append_ms(out, q.p50);
  lit(out, ",\"p95\":");
  base::json::append_ms(out, q.p95);
  lit(out, ",\"p99\":");
  base::json::append_ms(out, q.p99);
  lit(out, ",\"max\":");
  base::json::append_ms(out, q.max);
  lit(out, ",\"n\":");
  num(out, q.count);
  out.push_back('}');
}

// What the trace hook collects for a stream's record as the stream goes.  The request and the
// response head are kept as they came (copies) and rendered as JSON with the record, on the
// writer's thread: escaping a 100 KB conversation at the request's start held up every other
// stream of the I/O thread.
struct record_texts {
  std::string content, reasoning;  // gathered on the writer's thread from the event log's texts
  // Choices past the first (n > 1), by index - 1: content and reasoning.
  std::vector<std::pair<std::string, std::string>> other_choices;
  std::string id, route, model;
  bool has_request = false;
  std::string method, target, body, request_headers, response_headers;  // headers packed
};

// A finished stream, as the trace record is rendered from it (on the writer's thread).
struct finished_stream : record_texts {
  bool bodies = false;
  bool truncated = false;
  stream_info s;

  // Where the exchange went (DESIGN.md §10): null when no upstream was tried.
  void upstream(std::string& r) const {
    const auto& u = s.upstream;
    lit(r, ",\"upstream\":");
    if (u.attempts.empty()) {
      lit(r, "null");
      return;
    }
    lit(r, "{\"name\":");
    base::json::append_string(r, u.name);
    lit(r, ",\"endpoint\":");
    base::json::append_string(r, u.attempts.back().endpoint);
    lit(r, ",\"attempts\":[");
    for (std::size_t i = 0; i < u.attempts.size(); ++i) {
      if (i > 0) r.push_back(',');
      lit(r, "{\"endpoint\":");
      base::json::append_string(r, u.attempts[i].endpoint);
      lit(r, ",\"error\":");
      if (u.attempts[i].error.empty())
        lit(r, "null");
      else
        base::json::append_string(r, u.attempts[i].error);
      r.push_back('}');
    }
    // Why the endpoint that answered (or failed last) was chosen.
    const auto& last = u.attempts.back();
    lit(r, "],\"decision\":{\"policy\":");
    base::json::append_string(r, u.policy);
    lit(r, ",\"reason\":");
    base::json::append_string(r, last.reason);
    lit(r, ",\"matched_messages\":");
    r += std::to_string(last.matched_messages);
    lit(r, "}}");
  }

  // Everything before the events.
  void head(std::string& r) const {
    // Sized for everything below (escaping may grow the texts; ~12 bytes per ITL value) so the
    // head is built without reallocating.
    const auto& itl = s.timing.itl_values_ms;
    r.reserve(target.size() + request_headers.size() + response_headers.size() +
              2 * (body.size() + content.size() + reasoning.size()) +
              12 * std::min<std::size_t>(itl.size(), 4096) + 2048);
    lit(r, "{\"v\":1,\"id\":\"");
    r += id;
    lit(r, "\",\"start\":\"");
    base::json::append_rfc3339_us(r, s.wall_start_us);
    lit(r, "\",\"route\":");
    base::json::append_string(r, route);
    lit(r, ",\"provider\":");
    base::json::append_string(r, parsers::to_string(s.provider));
    lit(r, ",\"model\":");
    base::json::append_string(r, model);
    lit(r, ",\"request\":");
    if (has_request) {
      lit(r, "{\"method\":");
      base::json::append_string(r, method);
      lit(r, ",\"path\":");
      base::json::append_string(r, target);
      lit(r, ",\"headers\":");
      append_headers(r, request_headers);
      lit(r, ",\"body\":");
      if (body.empty())  // not kept (tracing bodies off, too large) or none
        lit(r, "null");
      else
        base::json::append_string(r, body);
      r.push_back('}');
    } else {
      lit(r, "null");
    }
    // The chain's status is the head's (or the one the proxy answered with; no headers then).
    lit(r, ",\"response\":{\"status\":");
    num(r, s.status);
    lit(r, ",\"headers\":");
    append_headers(r, response_headers);
    r.push_back('}');
    upstream(r);
    lit(r, ",\"outcome\":");
    base::json::append_string(r, to_string(s.outcome));
    lit(r, ",\"error\":");
    if (s.error_type.empty() && s.error_message.empty()) {
      lit(r, "null");
    } else {
      lit(r, "{\"type\":");
      base::json::append_string(r, s.error_type);
      lit(r, ",\"message\":");
      base::json::append_string(r, s.error_message);
      r.push_back('}');
    }
    lit(r, ",\"finish_reason\":");
    if (s.finish_reason.empty())
      lit(r, "null");
    else
      base::json::append_string(r, s.finish_reason);
    lit(r, ",\"choices\":");
    num(r, s.choices);
    if (!s.by_choice.empty()) by_choice(r);
    const auto& t = s.timing;
    lit(r, ",\"timing\":{\"ttft_ms\":");
    base::json::append_ms(r, t.ttft_ms);
    lit(r, ",\"ttft_answer_ms\":");
    base::json::append_ms(r, t.ttft_answer_ms);
    lit(r, ",\"e2e_ms\":");
    base::json::append_ms(r, t.e2e_ms);
    lit(r, ",\"upstream_headers_ms\":");
    base::json::append_ms(r, t.upstream_headers_ms);
    lit(r, ",\"decode_ms\":");
    base::json::append_ms(r, t.decode_ms);
    lit(r, ",\"tpot_ms\":");
    base::json::append_ms(r, t.tpot_ms);
    lit(r, ",\"tokens_per_s\":");
    base::json::append_ms(r, t.tokens_per_s);
    lit(r, ",\"itl_ms\":");
    append_quantiles(r, t.itl);
    lit(r, ",\"itl_content_ms\":");
    append_quantiles(r, t.itl_content);
    lit(r, ",\"itl_reasoning_ms\":");
    append_quantiles(r, t.itl_reasoning);
    lit(r, ",\"overhead_ms\":");
    append_quantiles(r, t.overhead);
    lit(r, ",\"stalls\":");
    num(r, t.stalls);
    // Every inter-token gap (the first 4096), for exports to other load tools.
    lit(r, ",\"itl_values_ms\":[");
    base::json::append_ms_list(
        r, std::span(t.itl_values_ms.data(), std::min<std::size_t>(t.itl_values_ms.size(), 4096)));
    lit(r, "]}");
    attribution(r);
    const auto& u = s.usage;
    lit(r, ",\"usage\":{\"input_tokens\":");
    base::json::append_int(r, u.input_tokens);
    lit(r, ",\"output_tokens\":");
    base::json::append_int(r, u.output_tokens);
    lit(r, ",\"reasoning_tokens\":");
    base::json::append_int(r, u.reasoning_tokens);
    lit(r, ",\"cached_input_tokens\":");
    base::json::append_int(r, u.cached_input_tokens);
    lit(r, ",\"cache_write_tokens\":");
    base::json::append_int(r, u.cache_write_tokens);
    lit(r, "},\"text\":");
    if (bodies) {
      lit(r, "{\"content\":");
      base::json::append_string(r, content);
      lit(r, ",\"reasoning\":");
      base::json::append_string(r, reasoning);
      r.push_back('}');
    } else {
      lit(r, "null");
    }
    lit(r, ",\"events\":[");
  }

  // Where the time went (DESIGN.md §13): milliseconds, null where not known.
  void attribution(std::string& r) const {
    const auto& a = s.attributed;
    const auto ms = [&](std::optional<double> v) {
      if (!v) {
        lit(r, "null");
        return;
      }
      if (*v < 0) r.push_back('-');  // (unexplained_ms: the engine claims more than we saw)
      base::json::append_ms(r, *v < 0 ? -*v : *v);
    };
    const auto engine_ms = [&](double v) { ms(v >= 0 ? std::optional<double>(v) : std::nullopt); };
    lit(r, ",\"attribution\":{");
    for (std::size_t i = 0; i < hooks::phase_count; ++i) {
      if (i) r.push_back(',');
      r.push_back('"');
      r.append(to_string(static_cast<hooks::phase>(i)));
      lit(r, "_ms\":");
      ms(a.phases[i]);
    }
    lit(r, ",\"client_wait_ms\":");
    ms(a.client_wait_ms);
    lit(r, ",\"engine\":");
    if (!a.engine.reported()) {
      lit(r, "null");
    } else {
      lit(r, "{\"source\":");
      base::json::append_string(r, parsers::to_string(a.engine.source));
      lit(r, ",\"queue_ms\":");
      engine_ms(a.engine.queue_ms);
      lit(r, ",\"prefill_ms\":");
      engine_ms(a.engine.prefill_ms);
      lit(r, ",\"decode_ms\":");
      engine_ms(a.engine.decode_ms);
      if (a.engine.load_ms >= 0) {
        lit(r, ",\"load_ms\":");
        engine_ms(a.engine.load_ms);
      }
      if (a.engine.inference_ms >= 0) {
        lit(r, ",\"inference_ms\":");
        engine_ms(a.engine.inference_ms);
      }
      lit(r, ",\"prompt_tokens\":");
      base::json::append_int(r, a.engine_prompt_tokens);
      lit(r, ",\"cached_tokens\":");
      base::json::append_int(r, a.engine_cached_tokens);
      r.push_back('}');
    }
    lit(r, ",\"unexplained_ms\":");
    ms(a.unexplained_ms);
    r.push_back('}');
    // A fault injected on purpose: only in the records of the exchanges that had one.
    if (!s.fault.rule.empty()) {
      lit(r, ",\"fault\":{\"rule\":");
      base::json::append_string(r, s.fault.rule);
      lit(r, ",\"kind\":");
      base::json::append_string(r, s.fault.kind);
      lit(r, ",\"value\":");
      num(r, s.fault.value);
      r.push_back('}');
    }
  }

  // Several choices (n > 1): each one's token count, finish reason and (with bodies) text; the
  // record's `text` is the first choice's.
  void by_choice(std::string& r) const {
    lit(r, ",\"by_choice\":[");
    for (std::size_t i = 0; i < s.by_choice.size(); ++i) {
      const auto& c = s.by_choice[i];
      if (i) r.push_back(',');
      lit(r, "{\"index\":");
      num(r, c.index);
      lit(r, ",\"token_events\":");
      num(r, c.token_events);
      lit(r, ",\"finish_reason\":");
      if (c.finish_reason.empty())
        lit(r, "null");
      else
        base::json::append_string(r, c.finish_reason);
      if (bodies) {
        static const std::string none;
        const std::string* text = &content;
        const std::string* thought = &reasoning;
        if (c.index != 0) {
          const bool kept = c.index <= other_choices.size();
          text = kept ? &other_choices[c.index - 1].first : &none;
          thought = kept ? &other_choices[c.index - 1].second : &none;
        }
        lit(r, ",\"content\":");
        base::json::append_string(r, *text);
        lit(r, ",\"reasoning\":");
        base::json::append_string(r, *thought);
      }
      r.push_back('}');
    }
    r.push_back(']');
  }

  // Everything after the events.
  void tail(std::string& r) const {
    r.reserve(256 + 160 * s.steps.size() + 64 * s.cache_events.size());
    lit(r, "],\"truncated\":");
    r.append(truncated ? std::string_view("true") : std::string_view("false"));
    lit(r, ",\"parse_errors\":{\"framing\":");
    num(r, s.parse_errors[0]);
    lit(r, ",\"json\":");
    num(r, s.parse_errors[1]);
    lit(r, ",\"oversize\":");
    num(r, s.parse_errors[2]);
    r.push_back('}');
    lit(r, ",\"steps\":[");
    for (std::size_t i = 0; i < s.steps.size(); ++i) {
      const auto& st = s.steps[i];
      if (i) r.push_back(',');
      lit(r, "{\"offset\":");
      num(r, st.offset);
      lit(r, ",\"channel\":\"");
      r += parsers::to_string(s.steps_channel);
      lit(r, "\",\"kind\":\"");
      r += parsers::to_string(st.kind);
      lit(r, "\",\"t_us\":");
      num(r, (st.t_ns - s.start_ns) / 1000);
      lit(r, ",\"duration_us\":");
      num(r, (s.step_end_ns[i] - st.t_ns) / 1000);
      lit(r, ",\"tokens\":");
      num(r, st.tokens);
      r.append(st.redundant ? std::string_view(",\"redundant\":true}")
                            : std::string_view(",\"redundant\":false}"));
    }
    lit(r, "],\"redundant_tokens\":");
    num(r, s.redundant_tokens);
    lit(r, ",\"cache\":[");
    for (std::size_t i = 0; i < s.cache_events.size(); ++i) {
      if (i) r.push_back(',');
      r += s.cache_events[i].second;  // {"event":…, evidence…}
    }
    lit(r, "]}");
  }
};

// The response text's tokens, logged with the reads (event_log::append_text): tag 1 + 2 * choice
// for content, 2 + 2 * choice for reasoning (choices past parsers::tracked_choices share the
// last; tags stay below 256).
constexpr unsigned text_tag(parsers::channel ch, std::uint32_t choice) {
  return 1 + 2 * std::min(choice, parsers::tracked_choices - 1) +
         (ch == parsers::channel::reasoning ? 1 : 0);
}
static_assert(text_tag(parsers::channel::reasoning, ~0u) < 256);

class alignas(64) trace_hook final : public hook, public hot_state, public shaped_reads {
 public:
  trace_hook(const config::trace_config& cfg, std::shared_ptr<trace_writer> w)
      : budget_(static_cast<std::uint32_t>(  // 4 GiB at most: a record is one JSON line
            std::min<std::size_t>(cfg.max_record_bytes, std::uint32_t{0xffffffff}))),
        bodies_(cfg.bodies),
        cfg_(cfg),
        writer_(std::move(w)) {
    // 16 hex digits ("%016llx" without printf: ~1 k instructions a stream on the I/O thread).
    char id[16];
    auto v = rng()();
    for (int i = 15; i >= 0; --i, v >>= 4) id[i] = "0123456789abcdef"[v & 15];
    t_.id.assign(id, sizeof id);
  }

  void on_request(const request_view& r) override {
    t_.route = r.route;
    t_.model = r.model;
    start_ns_ = r.start_ns;
    t_.has_request = true;
    t_.method = r.method;
    t_.target = r.target;
    pack_headers(t_.request_headers, r.headers);
    if (cfg_.bodies && !r.body.empty() && r.body.size() <= cfg_.max_record_bytes / 2) {
      t_.body = r.body;
      budget_ -= static_cast<std::uint32_t>(std::min<std::size_t>(budget_, r.body.size()));
    } else if (cfg_.bodies && !r.body.empty()) {
      events_truncated_ = true;  // too large to keep
    }
  }

  void on_response_head(const response_view& r) override {
    pack_headers(t_.response_headers, r.headers);
  }

  // The bytes as they are, at their arrival (what `replay serve` reproduces: the upstream's
  // timing, not the proxy's); the writer escapes them (trace_writer::record).
  void on_body(std::string_view bytes, const body_times& t) override {
    if (!fits(bytes)) return;
    events_.append((t.arrived - start_ns_) / 1000, bytes);
  }
  void on_shaped_body(std::string_view bytes, const body_times& t,
                      const parsers::read_shape& shape) override {
    if (!fits(bytes)) return;
    events_.append_shaped((t.arrived - start_ns_) / 1000, bytes, shape);
  }

  // The text goes to the event log too (the writer gathers it): the log's end is where this
  // event's read was just written, where a string of its own per stream was one more cache miss
  // per token.
  void on_token(const token_event& e) override {
    if (!bodies_ || e.channel == parsers::channel::tool) return;
    const std::size_t cost = event_log::entry_bytes(e.text.size());  // what it takes in the log
    if (cost > budget_) {
      text_truncated_ = true;
      return;
    }
    events_.append_text(text_tag(e.channel, e.choice), e.text);
    budget_ -= static_cast<std::uint32_t>(cost);
  }

  // What the next read touches: this object's first line, the log's copy of the last read
  // (compared with it; none after a shaped read) and the log's next line (an entry's header and
  // a token's difference).
  void add_hot_lines(parsers::hot_lines& l) const noexcept override {
    l.add(this);
    const auto last = events_.last_read();
    l.add(last.data(), last.size());
    l.add(events_.tail(), 2 * event_log::align);
  }

  // The record is rendered on the writer's thread (trace_writer::record::render): ~40 k
  // instructions per stream that the I/O thread no longer spends while other streams wait.
  void fill(stream_info& s) override { s.trace_record_id = t_.id; }
  void on_stream_end(const stream_info& s) override { finish(s); }

 private:
  // Whether a read fits the record's budget (and takes its share of it); past it the record is
  // marked truncated.
  bool fits(std::string_view bytes) {
    if (bytes.size() + 64 > budget_) {
      events_truncated_ = true;
      return false;
    }
    budget_ -= static_cast<std::uint32_t>(bytes.size() + 32);
    return true;
  }

  void finish(const stream_info& s) {
    events_.seal();
    // A request that names no model (llama.cpp's native /completion) is the answer's model's.
    if (t_.model.empty()) t_.model = s.response_model;
    auto f = std::make_shared<finished_stream>(
        finished_stream{std::move(t_), cfg_.bodies, events_truncated_ || text_truncated_, s});
    trace_writer::record rec;
    rec.events = std::move(events_);
    rec.render = [f = std::move(f)](std::string& head, std::string& tail, const event_log& log) {
      if (f->bodies)
        log.for_each_text([&](unsigned tag, std::string_view t) {
          const unsigned choice = (tag - 1) / 2;
          const bool reasoning = (tag - 1) % 2 == 1;
          if (choice == 0) {
            (reasoning ? f->reasoning : f->content) += t;
            return;
          }
          if (f->other_choices.size() < choice) f->other_choices.resize(choice);
          auto& c = f->other_choices[choice - 1];
          (reasoning ? c.second : c.first) += t;
        });
      f->head(head);
      f->tail(tail);
    };
    writer_->submit(std::move(rec));
  }

  // What a read and a token touch is on the first cache line, after the vtable pointer: with
  // hundreds of open streams each further line is a cache miss per event.  The log last: its
  // per-append fields come first in it, its chunk list (touched per chunk) crosses the line.
  std::uint32_t budget_;  // bytes of events and texts this record may still take
  bool bodies_;           // cfg_.bodies
  bool events_truncated_ = false, text_truncated_ = false;
  mono_ns start_ns_ = 0;
  event_log events_;  // the reads and the response text, for the writer to render
  record_texts t_;    // moved into the record at the end
  const config::trace_config& cfg_;
  std::shared_ptr<trace_writer> writer_;
};

}  // namespace

trace_hook_factory::trace_hook_factory(const config::trace_config& cfg)
    : cfg_(cfg), writer_(std::make_shared<trace_writer>(cfg)) {}

std::unique_ptr<hook> trace_hook_factory::create() {
  if (cfg_.sample_rate < 1.0) {
    std::uniform_real_distribution<double> d(0.0, 1.0);
    if (d(rng()) >= cfg_.sample_rate) return nullptr;
  }
  return std::make_unique<trace_hook>(cfg_, writer_);
}

void register_trace(hook_registry& r, std::shared_ptr<metrics_registry> metrics) {
  struct writer_of_registry {
    config::trace_config cfg;
    std::shared_ptr<trace_hook_factory> factory;
  };
  r.add(
      "trace",
      [metrics, last = std::make_shared<writer_of_registry>()](
          const config::config& cfg) -> std::shared_ptr<hook_factory> {
        if (cfg.trace.dir.empty()) return nullptr;  // no --trace-dir: tracing off
        if (last->factory && last->cfg == cfg.trace) return last->factory;
        auto f = std::make_shared<trace_hook_factory>(cfg.trace);
        if (metrics) {
          metrics->add_counter_source("tokentap_trace_records_total", "Trace records written",
                                      [w = f->writer_ptr()] { return w->stats().records.load(); });
          metrics->add_counter_source("tokentap_trace_dropped_total",
                                      "Trace records dropped (queue full or disk error)",
                                      [w = f->writer_ptr()] { return w->stats().dropped.load(); });
        }
        *last = {cfg.trace, f};
        return f;
      },
      {.provides = {"trace_record"}, .needs = {"timing"}, .reads = {"steps", "cache_events"}});
}

}  // namespace tokentap::hooks
