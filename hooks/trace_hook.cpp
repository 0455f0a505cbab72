#include "hooks/trace_hook.hpp"

#include <algorithm>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "parsers/json_out.hpp"
#include "parsers/recycled.hpp"

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
  out.clear();
  out.reserve(n);
  auto put = [&](std::string_view s) {
    const auto len = static_cast<std::uint32_t>(s.size());
    out.append(reinterpret_cast<const char*>(&len), sizeof len);
    out.append(s);
  };
  for (const auto& h : headers) {
    put(h.name);
    put(h.value);
  }
}

// The packed list as a JSON object.
void append_headers(std::string& out, std::string_view packed) {
  auto take = [&] {
    std::uint32_t len = 0;
    std::memcpy(&len, packed.data(), sizeof len);
    const auto s = packed.substr(sizeof len, len);
    packed.remove_prefix(sizeof len + len);
    return s;
  };
  out.push_back('{');
  for (bool first = true; !packed.empty(); first = false) {
    if (!first) out.push_back(',');
    json::append_string(out, take());
    out.push_back(':');
    json::append_string(out, take());
  }
  out.push_back('}');
}

void append_quantiles(std::string& out, const timing_summary::quantiles& q) {
  out += "{\"p50\":";
  json::append_ms(out, q.p50);
  out += ",\"p95\":";
  json::append_ms(out, q.p95);
  out += ",\"p99\":";
  json::append_ms(out, q.p99);
  out += ",\"max\":";
  json::append_ms(out, q.max);
  out += ",\"n\":" + std::to_string(q.count) + "}";
}

// What the trace hook collects for a stream's record as the stream goes.  The request and the
// response head are kept as they came (copies) and rendered as JSON with the record, on the
// writer's thread: escaping a 100 KB conversation at the request's start held up every other
// stream of the I/O thread.
struct record_texts {
  std::string content, reasoning;  // gathered on the writer's thread from the event log's texts
  std::string id, route, model;
  bool has_request = false;
  std::string method, target, body, request_headers, response_headers;  // headers packed
};

// A finished stream, as the trace record is rendered from it (on the writer's thread).
struct finished_stream : record_texts {
  bool bodies = false;
  bool truncated = false;
  stream_summary s;

  // Everything before the events.
  void head(std::string& r) const {
    // Sized for everything below (escaping may grow the texts; ~12 bytes per ITL value) so the
    // head is built without reallocating.
    const auto& itl = s.timing.itl_values_ms;
    r.reserve(target.size() + request_headers.size() + response_headers.size() +
              2 * (body.size() + content.size() + reasoning.size()) +
              12 * std::min<std::size_t>(itl.size(), 4096) + 2048);
    r += "{\"v\":1,\"id\":\"";
    r += id;
    r += "\",\"start\":\"";
    json::append_rfc3339_us(r, s.wall_start_us);
    r += "\",\"route\":";
    json::append_string(r, route);
    r += ",\"provider\":";
    json::append_string(r, parsers::to_string(s.provider));
    r += ",\"model\":";
    json::append_string(r, model);
    r += ",\"request\":";
    if (has_request) {
      r += "{\"method\":";
      json::append_string(r, method);
      r += ",\"path\":";
      json::append_string(r, target);
      r += ",\"headers\":";
      append_headers(r, request_headers);
      r += ",\"body\":";
      if (body.empty())  // not kept (tracing bodies off, too large) or none
        r += "null";
      else
        json::append_string(r, body);
      r += "}";
    } else {
      r += "null";
    }
    // The chain's status is the head's (or the one the proxy answered with; no headers then).
    r += ",\"response\":{\"status\":" + std::to_string(s.status) + ",\"headers\":";
    append_headers(r, response_headers);
    r += "}";
    r += ",\"outcome\":";
    json::append_string(r, to_string(s.outcome));
    r += ",\"error\":";
    if (s.error_type.empty() && s.error_message.empty()) {
      r += "null";
    } else {
      r += "{\"type\":";
      json::append_string(r, s.error_type);
      r += ",\"message\":";
      json::append_string(r, s.error_message);
      r += "}";
    }
    r += ",\"finish_reason\":";
    if (s.finish_reason.empty())
      r += "null";
    else
      json::append_string(r, s.finish_reason);
    const auto& t = s.timing;
    r += ",\"timing\":{\"ttft_ms\":";
    json::append_ms(r, t.ttft_ms);
    r += ",\"ttft_answer_ms\":";
    json::append_ms(r, t.ttft_answer_ms);
    r += ",\"e2e_ms\":";
    json::append_ms(r, t.e2e_ms);
    r += ",\"upstream_headers_ms\":";
    json::append_ms(r, t.upstream_headers_ms);
    r += ",\"decode_ms\":";
    json::append_ms(r, t.decode_ms);
    r += ",\"tpot_ms\":";
    json::append_ms(r, t.tpot_ms);
    r += ",\"tokens_per_s\":";
    json::append_ms(r, t.tokens_per_s);
    r += ",\"itl_ms\":";
    append_quantiles(r, t.itl);
    r += ",\"itl_content_ms\":";
    append_quantiles(r, t.itl_content);
    r += ",\"itl_reasoning_ms\":";
    append_quantiles(r, t.itl_reasoning);
    r += ",\"overhead_ms\":";
    append_quantiles(r, t.overhead);
    r += ",\"stalls\":" + std::to_string(t.stalls);
    // Every inter-token gap (the first 4096), for exports to other load tools.
    r += ",\"itl_values_ms\":[";
    json::append_ms_list(
        r, std::span(t.itl_values_ms.data(), std::min<std::size_t>(t.itl_values_ms.size(), 4096)));
    r += "]}";
    const auto& u = s.usage;
    r += ",\"usage\":{\"input_tokens\":";
    json::append_int(r, u.input_tokens);
    r += ",\"output_tokens\":";
    json::append_int(r, u.output_tokens);
    r += ",\"reasoning_tokens\":";
    json::append_int(r, u.reasoning_tokens);
    r += ",\"cached_input_tokens\":";
    json::append_int(r, u.cached_input_tokens);
    r += ",\"cache_write_tokens\":";
    json::append_int(r, u.cache_write_tokens);
    r += "}";
    r += ",\"text\":";
    if (bodies) {
      r += "{\"content\":";
      json::append_string(r, content);
      r += ",\"reasoning\":";
      json::append_string(r, reasoning);
      r += "}";
    } else {
      r += "null";
    }
    r += ",\"events\":[";
  }

  // Everything after the events.
  void tail(std::string& r) const {
    r.reserve(256 + 160 * s.steps.size() + 64 * s.cache_events.size());
    r += "]";
    r += ",\"truncated\":";
    r += truncated ? "true" : "false";
    r += ",\"parse_errors\":{\"framing\":" + std::to_string(s.parse_errors[0]) +
         ",\"json\":" + std::to_string(s.parse_errors[1]) +
         ",\"oversize\":" + std::to_string(s.parse_errors[2]) + "}";
    r += ",\"steps\":[";
    for (std::size_t i = 0; i < s.steps.size(); ++i) {
      const auto& st = s.steps[i];
      if (i) r += ",";
      r += "{\"offset\":" + std::to_string(st.offset) + ",\"channel\":\"";
      r += parsers::to_string(s.steps_channel);
      r += "\",\"kind\":\"";
      r += parsers::to_string(st.kind);
      r += "\",\"t_us\":" + std::to_string((st.t_ns - s.start_ns) / 1000) +
           ",\"duration_us\":" + std::to_string((s.step_end_ns[i] - st.t_ns) / 1000) +
           ",\"tokens\":" + std::to_string(st.tokens) +
           ",\"redundant\":" + (st.redundant ? "true" : "false") + "}";
    }
    r += "],\"redundant_tokens\":" + std::to_string(s.redundant_tokens);
    r += ",\"cache\":[";
    for (std::size_t i = 0; i < s.cache_events.size(); ++i) {
      if (i) r += ",";
      r += s.cache_events[i].second;  // {"event":…, evidence…}
    }
    r += "]}";
  }
};

// The response text's tokens, logged with the reads (event_log::append_text).
constexpr unsigned content_tag = 1, reasoning_tag = 2;

class alignas(64) trace_hook final : public hook, public parsers::recycled<trace_hook> {
 public:
  trace_hook(const config::trace_config& cfg, std::shared_ptr<trace_writer> w)
      : budget_(static_cast<std::uint32_t>(  // 4 GiB at most: a record is one JSON line
            std::min<std::size_t>(cfg.max_record_bytes, std::uint32_t{0xffffffff}))),
        bodies_(cfg.bodies),
        cfg_(cfg),
        writer_(std::move(w)) {
    char id[20];
    std::snprintf(id, sizeof id, "%016llx", static_cast<unsigned long long>(rng()()));
    t_.id = id;
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

  void on_body(std::string_view bytes, const body_times& t) override {
    if (bytes.size() + 64 > budget_) {
      events_truncated_ = true;
      return;
    }
    // The bytes as they are, at their arrival (what `replay serve` reproduces: the upstream's
    // timing, not the proxy's); the writer escapes them (trace_writer::record).
    const auto t_us = (t.arrived - start_ns_) / 1000;
    if (t.shape != nullptr)
      events_.append_shaped(t_us, bytes, *t.shape);
    else
      events_.append(t_us, bytes);
    budget_ -= static_cast<std::uint32_t>(bytes.size() + 32);
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
    events_.append_text(e.channel == parsers::channel::reasoning ? reasoning_tag : content_tag,
                        e.text);
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
  // instructions per stream that the I/O thread no longer spends while other streams wait.  The
  // summary is copied — hooks after this one still read it.
  void on_stream_end(stream_summary& s) override {
    events_.seal();
    auto f = std::make_shared<finished_stream>(
        finished_stream{std::move(t_), cfg_.bodies, events_truncated_ || text_truncated_, s});
    trace_writer::record rec;
    rec.events = std::move(events_);
    rec.render = [f = std::move(f)](std::string& head, std::string& tail, const event_log& log) {
      if (f->bodies)
        log.for_each_text([&](unsigned tag, std::string_view t) {
          (tag == reasoning_tag ? f->reasoning : f->content) += t;
        });
      f->head(head);
      f->tail(tail);
    };
    writer_->submit(std::move(rec));
  }

 private:
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

}  // namespace tokentap::hooks
