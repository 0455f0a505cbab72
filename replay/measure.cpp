#include "replay/measure.hpp"

// g++ 12 false positive on coroutines of asio's awaitable<T, io_context::executor_type>: the
// frame's own operator new/delete pair (thread-local recycling) is reported as mismatched once
// inlined.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif

#include <algorithm>

#include <boost/beast/http.hpp>

#include "base/clock.hpp"
#include "config/config.hpp"
#include "hooks/hook_chain.hpp"
#include "hooks/registry.hpp"
#include "net/http_client.hpp"
#include "parsers/request_inspector.hpp"
#include "parsers/step_tagger.hpp"

namespace tokentap::replay {

namespace http = beast::http;

namespace {

// Copies what the chain and the timing hook found, and the answer's text, into a measurement.
class capture_factory final : public hooks::hook_factory {
 public:
  capture_factory(measurement& m, std::size_t max_text, std::size_t max_gaps)
      : m_(m), max_text_(max_text), max_gaps_(max_gaps) {}
  std::unique_ptr<hooks::hook> create() override {
    return std::make_unique<capture>(m_, max_text_, max_gaps_);
  }

 private:
  struct capture final : hooks::hook {
    capture(measurement& m, std::size_t max_text, std::size_t max_gaps)
        : m_(m), max_text_(max_text), max_gaps_(max_gaps) {}
    void on_token(const hooks::token_event& e) override {
      if (e.choice != 0) return;
      if (e.streamed) {
        group_end_ns_ = e.t_ns;
        ++group_events_;
      }
      if (e.channel == parsers::channel::tool) return;
      auto& text = e.channel == parsers::channel::content ? m_.content : reasoning_;
      const auto room = max_text_ - std::min(max_text_, text.size());
      text.append(e.text.substr(0, room));
    }
    // Per-token gaps, when the server counts its output per chunk: the token event since the
    // last count carried (this count - the last) tokens, so the gap from the previous event to
    // it is that many gaps of equal length.  (The first event has no gap before it; its tokens
    // past the first arrived with it.)  A count after several events (usage only at the end,
    // or a chunk split into reasoning and content) leaves ITL to the per-event gaps.
    void on_output_count(std::int64_t n, hooks::mono_ns) override {
      if (group_events_ == 0) {  // a count without new tokens (the role chunk, the finish)
        counts_consistent_ = counts_consistent_ && n == last_count_;
        return;
      }
      const auto tokens = n - last_count_;
      // One count for several events (a usage only at the end) says nothing per chunk.
      if (tokens <= 0 || group_events_ > 1) {
        counts_consistent_ = false;
      } else if (previous_end_ns_ >= 0) {
        const double gap = static_cast<double>(group_end_ns_ - previous_end_ns_) / 1e6 /
                           static_cast<double>(tokens);
        for (std::int64_t i = 0; i < tokens && token_gaps_.size() < max_gaps_; ++i)
          token_gaps_.push_back(gap);
      }
      previous_end_ns_ = group_end_ns_;
      last_count_ = n;
      group_events_ = 0;
      ++counted_groups_;
    }
    void on_stream_end(const hooks::stream_info& s) override {
      m_.ttft_ms = s.timing.ttft_ms;
      m_.ttfo_ms = s.timing.ttft_answer_ms;
      m_.e2e_ms = s.timing.e2e_ms;
      m_.tpot_ms = s.timing.tpot_ms;
      m_.itl_median_ms = s.timing.itl.p50;
      m_.tokens_per_s = s.timing.tokens_per_s;
      m_.event_gaps_ms = s.timing.itl_values_ms;
      m_.token_events = s.token_events;
      m_.usage = s.usage;
      m_.steps = static_cast<std::uint32_t>(s.steps.size());
      m_.backtracks = static_cast<std::uint32_t>(std::count_if(
          s.steps.begin(), s.steps.end(),
          [](const parsers::step& x) { return x.kind == parsers::step_kind::backtrack; }));
      for (const auto& [name, evidence] : s.cache_events) m_.cache_events.push_back(name);
      // The last conclusion step: from its offset in its channel's text to the next step's.
      const auto& text =
          s.steps_channel == parsers::channel::content ? m_.content : std::string_view(reasoning_);
      for (std::size_t i = s.steps.size(); i-- > 0;) {
        if (s.steps[i].kind != parsers::step_kind::conclusion) continue;
        const auto from = s.steps[i].offset;
        const auto to = i + 1 < s.steps.size() ? s.steps[i + 1].offset : text.size();
        if (from < text.size() && to > from) m_.conclusion.assign(text.substr(from, to - from));
        break;
      }
      const auto& a = s.attributed;
      const auto ms = [](std::optional<double> v) { return v.value_or(-1); };
      m_.upstream_head_ms = ms(a[hooks::phase::upstream_head]);
      m_.first_token_ms = ms(a[hooks::phase::first_token]);
      m_.decode_ms = ms(a[hooks::phase::decode]);
      m_.engine = a.engine;
      m_.unexplained_ms = ms(a.unexplained_ms);
      m_.cache_outcome = std::string(s.cache_outcome);
      m_.trace_record_id = s.trace_record_id;
      // Per token only when every token event was counted.
      m_.per_token_gaps = counted_groups_ > 0 && group_events_ == 0 && counts_consistent_;
      if (m_.per_token_gaps) m_.token_gaps_ms = std::move(token_gaps_);
      m_.outcome = hooks::to_string(s.outcome);  // a 2xx stream with an error event: stream_error
    }
    unsigned per_event() const noexcept override { return token_calls; }
    measurement& m_;
    std::size_t max_text_, max_gaps_;
    std::string reasoning_;  // its text (the first max_text bytes), for the conclusion
    // Per-token gaps: the current group of token events (since the last output count).
    hooks::mono_ns group_end_ns_ = -1, previous_end_ns_ = -1;
    std::size_t group_events_ = 0, counted_groups_ = 0;
    std::int64_t last_count_ = 0;
    bool counts_consistent_ = true;
    std::vector<double> token_gaps_;
  };
  measurement& m_;
  std::size_t max_text_, max_gaps_;
};

}  // namespace

measurer::measurer(options o) : o_(std::move(o)) {
  cfg_.hooks = {"timing"};
  if (o_.analyze) cfg_.hooks.insert(cfg_.hooks.end(), {"steps", "cache"});
  if (!o_.trace_dir.empty()) {
    cfg_.trace.dir = o_.trace_dir;
    cfg_.hooks.push_back("trace");
  }
  config::set_hook_sections(cfg_, "timing: {exact_samples: " + std::to_string(o_.max_gaps) + "}");
  hooks_ = hooks::builtin_hooks().build(cfg_);
}

measurer::~measurer() = default;

awaitable<void> measurer::measure(const outgoing& out, measurement& m) const {
  m = measurement{};
  net::http_client client(co_await asio::this_coro::executor);
  const auto connecting = base::mono_now_ns();
  auto ec = co_await client.connect(o_.host, o_.port, std::chrono::seconds(10));
  if (ec) {
    m.error = "connect: " + ec.message();
    co_return;
  }
  const double connect_ms = static_cast<double>(base::mono_now_ns() - connecting) / 1e6;
  http::request<http::string_body> req;
  req.method_string(out.method);
  req.target(out.target);
  req.version(11);
  for (const auto& [k, v] : out.headers) req.set(k, v);
  req.set(http::field::host, o_.host);
  req.body() = out.body;
  req.prepare_payload();

  auto factories = hooks_;
  factories.push_back(std::make_shared<capture_factory>(m, o_.max_text, o_.max_gaps));
  hooks::hook_chain_factory chain(cfg_, std::move(factories));
  auto tap = chain.create();
  // What the proxy's request phase knows of a request: its model and conversation (the cache
  // hook compares conversations).
  parsers::request_inspector inspector;
  const auto info = inspector.inspect(out.body, {.digests = o_.analyze});
  std::vector<hooks::header_view> headers;
  for (const auto& [k, v] : out.headers) headers.push_back({k, v});
  hooks::request_view view;
  view.method = out.method;
  view.target = out.target;
  view.model = info.model;
  view.stream = info.stream;
  view.body = out.body;
  view.headers = headers;
  view.conversation = info.digests;
  view.prompt_chars = info.prompt_chars;
  view.max_tokens = info.max_tokens;
  view.start_ns = m.sent_ns = base::mono_now_ns();
  view.wall_start_us = base::wall_now_us();  // the trace record's `start`
  tap->on_request(view);

  // No proxy stands between: the request is forwarded from its start, on a connection ready
  // then, so the tap's phases are the server's (upstream_head, first_token, decode).
  tap->on_phase_marks(
      {.routed = view.start_ns, .attempt = view.start_ns, .connected = view.start_ns});
  ec = co_await client.send(req, o_.timeout);
  if (ec) {
    m.error = "request: " + ec.message();
    tap->on_stream_end(hooks::stream_outcome::upstream_error, base::mono_now_ns());
    m.outcome = "no_response";
    co_return;
  }
  m.status = static_cast<int>(client.status());
  tap->on_response_head({client.status(),
                         client.header("content-type"),
                         client.header("content-encoding"),
                         base::mono_now_ns(),
                         {}});
  std::vector<char> chunk(16384);
  std::int64_t last_byte_ns = -1;
  while (!client.done()) {
    const auto piece = co_await client.read_some(chunk, ec);
    if (piece.size > 0) {
      tap->on_body({chunk.data(), piece.size}, {piece.arrived_ns, piece.read_ns, piece.read_ns});
      last_byte_ns = piece.arrived_ns;
    }
    if (ec) break;
  }
  if (last_byte_ns >= view.start_ns)
    m.last_byte_ms = static_cast<double>(last_byte_ns - view.start_ns) / 1e6;
  tap->on_stream_end(ec ? hooks::stream_outcome::upstream_reset : hooks::stream_outcome::ok,
                     base::mono_now_ns());
  m.ok = !ec && m.status < 400 && m.outcome == "ok";
  m.connect_ms = connect_ms;
  if (ec) m.error = "response: " + ec.message();
}

}  // namespace tokentap::replay
