#include "hooks/hook_chain.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cctype>
#include <memory>
#include <optional>

#include "base/log.hpp"
#include "hooks/builtin_seams.hpp"

namespace tokentap::hooks {

namespace {

// Fields a hook may not set on the upstream request: the proxy owns the connection, the framing
// and the Host.
bool proxy_owned_field(std::string_view name) noexcept {
  static constexpr std::string_view owned[] = {
      "connection",         "keep-alive", "proxy-connection", "te",   "trailer",
      "transfer-encoding",  "upgrade",    "content-length",   "host", "proxy-authenticate",
      "proxy-authorization"};
  for (auto o : owned) {
    if (o.size() != name.size()) continue;
    bool same = true;
    for (std::size_t i = 0; i < o.size() && same; ++i)
      same = (name[i] >= 'A' && name[i] <= 'Z' ? name[i] + ('a' - 'A') : name[i]) == o[i];
    if (same) return true;
  }
  return false;
}

// RFC 9110 field names are tokens; values carry no CR, LF or NUL (no header injection).
bool valid_field(std::string_view name, std::string_view value) noexcept {
  if (name.empty()) return false;
  for (unsigned char c : name) {
    const bool tchar =
        (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
        std::string_view("!#$%&'*+-.^_`|~").find(static_cast<char>(c)) != std::string_view::npos;
    if (!tchar) return false;
  }
  for (unsigned char c : value)
    if (c == '\r' || c == '\n' || c == 0) return false;
  return true;
}

// The request phase's callbacks: write into the exchange's request_decision.
class request_phase final : public request_callbacks {
 public:
  explicit request_phase(request_decision& d) noexcept : d_(d) {}
  bool may_rewrite = false;  // the hook being called says rewrites_body()

  void local_reply(unsigned status, std::string_view type, std::string_view message) override {
    d_.stop = true;
    d_.status = status >= 400 && status <= 599 ? status : 500;
    d_.error_type.assign(type);
    d_.error_message.assign(message);
  }
  void add_reply_header(std::string_view name, std::string_view value) override {
    if (valid_field(name, value) && !proxy_owned_field(name) &&
        d_.reply_headers.size() < max_fields)
      d_.reply_headers.push_back({std::string(name), std::string(value)});
  }
  bool set_upstream_header(std::string_view name, std::string_view value) override {
    if (!valid_field(name, value) || proxy_owned_field(name)) return false;
    for (auto& f : d_.upstream_headers) {
      if (f.name.size() == name.size() &&
          std::equal(f.name.begin(), f.name.end(), name.begin(), [](char a, char b) {
            return std::tolower(static_cast<unsigned char>(a)) ==
                   std::tolower(static_cast<unsigned char>(b));
          })) {
        f.value.assign(value);
        return true;
      }
    }
    if (d_.upstream_headers.size() >= max_fields) return false;
    d_.upstream_headers.push_back({std::string(name), std::string(value)});
    return true;
  }
  bool replace_body(std::string body) override {
    if (!may_rewrite) return false;
    d_.body = std::move(body);
    return true;
  }
  void set_route_key(std::string_view key) override {
    d_.route_key.assign(key.substr(0, max_route_key));
  }
  void set_upstream(std::string_view name) override {
    d_.upstream.assign(name.substr(0, max_route_key));
  }
  std::string_view upstream() const noexcept override { return d_.upstream; }

  static constexpr std::size_t max_fields = 32;      // per request, all hooks together
  static constexpr std::size_t max_route_key = 256;  // bytes

 private:
  request_decision& d_;
};

// A stream's hook and, for a built-in one, its side of the private seams (builtin_seams.hpp).
struct chain_entry {
  std::unique_ptr<hooks::hook> hook;
  const hot_state* hot = nullptr;
  shaped_reads* shaped = nullptr;
};

class alignas(64) chain final : public stream_tap, public parsers::decoder_handler {
 public:
  chain(std::size_t max_event_bytes, std::vector<chain_entry> hooks,
        std::shared_ptr<chain_stats> stats)
      : hooks_(std::move(hooks)), max_event_bytes_(max_event_bytes), stats_(std::move(stats)) {
    for (std::size_t i = 0; i < hooks_.size(); ++i) {
      const auto bit = std::uint64_t{1} << i;
      const auto calls = hooks_[i].hook->per_event();
      if (calls & hook::body_calls) body_ |= bit;
      if (calls & hook::token_calls) token_ |= bit;
      if (calls & hook::sample_calls) sampled_ |= bit;
      if (hooks_[i].shaped != nullptr) shaped_ |= bit;
    }
  }

  // ---- stream_tap: the request phase (called by the proxy before forwarding)

  void decide(const request_view& r, request_decision& d) noexcept override {
    request_phase callbacks(d);
    for (std::size_t i = 0; i < hooks_.size(); ++i) {
      if ((disabled_ >> i) & 1) continue;
      callbacks.may_rewrite = hooks_[i].hook->rewrites_body();
      request_status status = request_status::proceed;
      try {
        status = hooks_[i].hook->on_request_phase(r, callbacks);
      } catch (const std::exception& e) {
        disable(i, e.what());
      } catch (...) {
        disable(i, "unknown exception");
      }
      if (status == request_status::stop && d.stop) {
        live_.status = d.status;
        return;
      }
      // A stop without a reply, or a reply without a stop: the hook's intent is unclear, and
      // the request goes on (fail open); its reply, if any, is dropped.
      if (d.stop) {
        d.stop = false;
        d.status = 0;
        d.error_type.clear();
        d.error_message.clear();
        d.reply_headers.clear();
      }
    }
  }

  // ---- stream_tap: the stream phase (called by the proxy after forwarding)

  void on_request(const request_view& r) noexcept override {
    live_.start_ns = r.start_ns;
    live_.wall_start_us = r.wall_start_us;
    live_.upstream.name.assign(r.upstream);
    live_.upstream.policy.assign(r.balance);
    live_.tenant.assign(r.tenant_name);
    flushed_ns_ = r.start_ns;
    provider_ = parsers::provider_from_path(r.target.substr(0, r.target.find('?')));
    each(all(), [&](hook& h) { h.on_request(r); });
  }

  // llama.cpp's server names itself (`Server: llama.cpp`): its OpenAI-compatible chat streams
  // are llama.cpp's from the head on, also when one ends in an error before any `timings`.
  bool served_by_llamacpp(const response_view& r) const noexcept {
    return provider_ == parsers::provider::openai_chat &&
           find_header(r.headers, "server").starts_with("llama.cpp");
  }

  void on_response_head(const response_view& r) noexcept override {
    live_.status = r.status;
    live_.head_ns = r.t_ns;
    client_wait_ns_ = 0;
    engine_headers(r);
    // A compressed body is passed through untouched and not decoded.
    if (r.content_encoding.empty() || r.content_encoding == "identity")
      decoder_.emplace(served_by_llamacpp(r) ? parsers::provider::llamacpp : provider_,
                       r.content_type, max_event_bytes_);
    streamed_ = r.content_type.find("event-stream") != std::string_view::npos ||
                r.content_type.find("ndjson") != std::string_view::npos;
    each(all(), [&](hook& h) { h.on_response_head(r); });
  }

  // The decoder first: a read's tokens reach the hooks before its on_body, and the decoder
  // says whether the read was one chat chunk shaped like the last one — a hook that keeps reads
  // then takes it without comparing it with its copy of the last one (shaped_reads).
  void on_body(std::span<const char> bytes, const body_times& t) noexcept override {
    const std::string_view b(bytes.data(), bytes.size());
    // The proxy's own work (DESIGN.md §4: read done → written); tokens are timed by arrival.
    if (sampled_) add_sample({sample::overhead, t.written - t.read}, t.written);
    client_wait_ns_ += t.written - t.read;
    if (decoder_) decoder_->feed(b, t.arrived, *this);
    if (body_ == 0) return;
    parsers::read_shape shape;
    const bool shaped = (body_ & shaped_) != 0 && decoder_ && decoder_->last_read_shape(b, shape);
    each_entry(body_, [&](chain_entry& e) {
      if (shaped && e.shaped != nullptr) {
        e.shaped->on_shaped_body(b, t, shape);
      } else {
        e.hook->on_body(b, t);
      }
    });
  }

  void on_upstream_attempt(const upstream_attempt& a) noexcept override {
    // (At most 1 + config::max_retries per exchange; bounded again here.)
    auto& attempts = progress().upstream.attempts;
    if (attempts.size() < max_attempts)
      attempts.push_back({std::string(a.upstream), std::string(a.endpoint), std::string(a.error),
                          std::string(a.reason), a.matched_messages});
  }
  // (Known at the stream's end.)
  const parsers::usage_counts* usage() const noexcept override {
    return info_ ? &info_->usage : nullptr;
  }
  stream_outcome judged_outcome(stream_outcome given) const noexcept override {
    return info_ ? info_->outcome : given;
  }
  static constexpr std::size_t max_attempts = 16;

  void on_upstream_error(std::string_view reason, unsigned status) noexcept override {
    auto& p = progress();
    p.upstream_error_reason.assign(reason);
    if (p.status == 0) p.status = status;
  }

  void on_phase_marks(const phase_marks& m) noexcept override { marks_ = m; }
  void on_fault(const injected_fault& f) noexcept override { progress().fault = f; }
  void on_local_reply(unsigned status) noexcept override { progress().status = status; }

  // TGI's timing headers (on non-streamed answers; its streams send none).
  void engine_headers(const response_view& r) noexcept {
    const auto queue = find_header(r.headers, "x-queue-time");
    const auto inference = find_header(r.headers, "x-inference-time");
    if (queue.empty() && inference.empty()) return;
    header_engine_.source = parsers::engine_account::source_t::tgi;
    for (auto [value, slot] : {std::pair{queue, &header_engine_.queue_ms},
                               std::pair{inference, &header_engine_.inference_ms}}) {
      if (value.empty()) continue;
      *slot = parsers::engine_header_ms(value);
      if (*slot < 0) ++header_engine_.invalid;
    }
  }

  // Where the exchange's time went: the proxy's phases, the engine's account (its stream's,
  // else its headers').
  void attribute_time(stream_info& info, mono_ns end_ns) noexcept {
    const parsers::engine_account* engine = &header_engine_;
    std::uint32_t invalid = header_engine_.invalid;
    if (decoder_) {
      invalid += decoder_->engine().invalid;
      if (decoder_->engine().reported()) engine = &decoder_->engine();
    }
    info.attributed = attribute(marks_, {.start_ns = info.start_ns,
                                         .head_ns = info.head_ns,
                                         .first_token_ns = first_token_ns_,
                                         .end_ns = end_ns,
                                         .client_wait_ns = client_wait_ns_,
                                         .engine = engine,
                                         .prompt_tokens = info.usage.input_tokens,
                                         .cached_tokens = info.usage.cached_input_tokens});
    info.attributed.engine.invalid = invalid;
  }

  void on_stream_end(stream_outcome outcome, mono_ns end_ns) noexcept override {
    // (The decoder's last events may still report an error, a finish reason, a parse error.)
    if (decoder_) decoder_->finish(end_ns, *this);
    if (!info_) {
      info_ = std::make_unique<stream_info>();
      static_cast<stream_progress&>(*info_) = std::move(live_);
    }
    auto& info = *info_;
    std::uint64_t tokens = 0;  // every on_token call: the decoder counts them by channel
    if (decoder_) {
      info.usage = decoder_->usage();
      info.provider = decoder_->detected_provider();
      info.response_id.assign(decoder_->response_id());
      info.response_model.assign(decoder_->response_model());
      for (auto c :
           {parsers::channel::content, parsers::channel::reasoning, parsers::channel::tool})
        tokens += decoder_->token_events(c);
    } else {
      info.provider = provider_;
    }
    info.end_ns = end_ns;
    info.token_events = tokens;
    summarize_choices(info, tokens);
    info.first_token_ns = first_token_ns_;
    info.first_content_ns = first_content_ns_;
    info.last_token_ns = last_token_ns_;
    attribute_time(info, end_ns);
    flush_samples(end_ns);
    // A provider error inside an otherwise complete 2xx stream is the stream's outcome (an error
    // body on a 4xx/5xx answer is just that answer: recorded in `error`, outcome unchanged).
    const bool provider_error = !info.error_type.empty() || !info.error_message.empty();
    info.outcome = outcome == stream_outcome::ok && provider_error && info.status < 300
                       ? stream_outcome::stream_error
                       : outcome;
    // The providers fill their pieces in dependency order (the registry's), then every hook
    // reads the whole.
    each(all(), [&](hook& h) { h.fill(info); });
    const stream_info& done = info;
    each(all(), [&](hook& h) { h.on_stream_end(done); });
  }

  // The chain's per-event fields, the next sample's slot, the hooks called at every read or
  // token and the decoder: what on_body reaches one through another.
  void add_hot_lines(parsers::hot_lines& l) const noexcept override {
    l.add_range(this, &samples_);
    if (sampled_) l.add(&samples_[n_samples_ < samples_.size() ? n_samples_ : 0], sizeof(sample));
    l.add(hooks_.data(), hooks_.size() * sizeof hooks_[0]);
    for (auto m = (body_ | token_) & ~disabled_; m != 0; m &= m - 1) {
      const auto& e = hooks_[static_cast<std::size_t>(std::countr_zero(m))];
      if (e.hot) {
        e.hot->add_hot_lines(l);
      } else {
        l.add(e.hook.get());  // a hook from elsewhere: its object's first line
      }
    }
    if (decoder_) decoder_->add_hot_lines(l);
  }

  // ---- decoder_handler

  void on_token(parsers::channel ch, std::string_view text, std::int64_t t_ns,
                std::uint32_t choice) noexcept override {
    // A whole-JSON body's tokens all arrive at once: no per-token timing.
    if (streamed_) {
      if (first_token_ns_ < 0) first_token_ns_ = t_ns;
      if (ch == parsers::channel::content && first_content_ns_ < 0) first_content_ns_ = t_ns;
      // Gaps are measured within a choice: interleaved choices (n > 1) are not one another's
      // next token.  Until a second choice shows up, the last token is the first choice's.
      mono_ns& last = choice == 0 && !choices_ ? last_token_ns_ : choice_state(choice).last;
      if (sampled_ && last >= 0) add_sample({sample::itl(ch), t_ns - last}, t_ns);
      last = t_ns;
      last_token_ns_ = t_ns;
    }
    if (choice != 0) ++choice_state(choice).tokens;
    const token_event ev{ch, text, t_ns, streamed_, choice};
    each(token_, [&](hook& h) { h.on_token(ev); });
  }

  void on_output_count(std::int64_t output_tokens, std::int64_t t_ns) noexcept override {
    each(token_, [&](hook& h) { h.on_output_count(output_tokens, t_ns); });
  }

  void on_stream_error(std::string_view type, std::string_view message,
                       std::int64_t) noexcept override {
    stats_->stream_errors.fetch_add(1, std::memory_order_relaxed);
    auto& p = progress();
    if (p.error_type.empty() && p.error_message.empty()) {
      p.error_type.assign(type.empty() ? "error" : type);
      p.error_message.assign(message.substr(0, 1024));
    }
  }

  void on_finish_reason(std::string_view reason, std::uint32_t choice) noexcept override {
    progress().finish_reason.assign(reason.substr(0, 64));
    if (choice != 0 || choices_) choice_state(choice).finish.assign(reason.substr(0, 64));
  }

  void on_parse_error(parsers::parse_stage stage, std::int64_t) noexcept override {
    ++progress().parse_errors[static_cast<int>(stage)];
    stats_->parse_errors[static_cast<int>(stage)].fetch_add(1, std::memory_order_relaxed);
  }

 private:
  std::uint64_t all() const noexcept {
    static_assert(hook_chain_factory::max_hooks == 64, "one bit per hook");
    return hooks_.size() == 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << hooks_.size()) - 1;
  }

  // What the chain keeps per choice once a second choice (n > 1) has answered; until then the
  // stream's own fields are the first choice's (most streams never get here).
  struct per_choice {
    mono_ns last = -1;         // the choice's last streamed token
    std::uint64_t tokens = 0;  // counted for the other choices; the first's is what is left
    std::string finish;
  };
  struct choices_state {
    std::array<per_choice, parsers::tracked_choices> slots;
    std::uint32_t highest = 0;  // the highest index seen
  };

  per_choice& choice_state(std::uint32_t choice) {
    if (!choices_) {
      choices_ = std::make_unique<choices_state>();
      // Every token and finish reason so far was the first choice's.
      auto& first = choices_->slots[0];
      first.last = last_token_ns_;
      first.finish = progress().finish_reason;
    }
    choices_->highest = std::max(choices_->highest, choice);
    return choices_->slots[std::min(choice, parsers::tracked_choices - 1)];
  }

  void summarize_choices(stream_info& info, std::uint64_t tokens) {
    if (!choices_) {
      info.choices = tokens > 0 || !info.finish_reason.empty() ? 1 : 0;
      return;
    }
    info.choices = choices_->highest + 1;
    const auto n = std::min(info.choices, parsers::tracked_choices);
    std::uint64_t others = 0;
    for (std::uint32_t i = 1; i < n; ++i) others += choices_->slots[i].tokens;
    choices_->slots[0].tokens = tokens - others;
    for (std::uint32_t i = 0; i < n; ++i) {
      auto& c = choices_->slots[i];
      if (c.tokens == 0 && c.finish.empty()) continue;
      info.by_choice.push_back({i, c.tokens, std::move(c.finish)});
    }
  }

  // Samples are handed over when the array is full, when a second has passed since the last
  // hand-over (the metrics hook's live histograms), and at the stream's end.
  void add_sample(sample smp, mono_ns now) noexcept {
    samples_[n_samples_++] = smp;
    if (n_samples_ == samples_.size() || now - flushed_ns_ >= 1'000'000'000) flush_samples(now);
  }

  void flush_samples(mono_ns now) noexcept {
    if (n_samples_ == 0) return;
    const std::span<const sample> batch(samples_.data(), n_samples_);
    each(sampled_, [&](hook& h) { h.on_samples(batch, now); });
    n_samples_ = 0;
    flushed_ns_ = now;
  }

  // Runs f, in order, on the hooks of `which` (bit i: hooks_[i]) still enabled; a hook that
  // throws is disabled for this stream.
  template <class F>
  void each(std::uint64_t which, F&& f) noexcept {
    each_entry(which, [&](chain_entry& e) { f(*e.hook); });
  }
  template <class F>
  void each_entry(std::uint64_t which, F&& f) noexcept {
    for (auto m = which & ~disabled_; m != 0; m &= m - 1) {
      const auto i = static_cast<std::size_t>(std::countr_zero(m));
      try {
        f(hooks_[i]);
      } catch (const std::exception& e) {
        disable(i, e.what());
      } catch (...) {
        disable(i, "unknown exception");
      }
    }
  }

  void disable(std::size_t i, const char* why) noexcept {
    disabled_ |= std::uint64_t{1} << i;
    stats_->hook_failures.fetch_add(1, std::memory_order_relaxed);
    TT_LOG(warn) << "hook #" << i << " failed and is disabled for this stream: " << why;
  }

  // What every event touches comes first, after the two vtable pointers: with hundreds of open
  // streams each event finds its stream's state out of cache, and every further line is another
  // miss (the chain's per-event fields used to span five lines).
  // Bit i stands for hooks_[i] (at most 64 hooks): those with on_body / on_token / on_samples,
  // those that threw and are skipped.
  std::uint64_t body_ = 0, token_ = 0, sampled_ = 0, disabled_ = 0, shaped_ = 0;
  mono_ns last_token_ns_ = -1;  // stream_info::last_token_ns until the end (so the two below)
  std::uint8_t n_samples_ = 0;
  bool streamed_ = false;
  parsers::provider provider_ = parsers::provider::unknown;
  // second line
  std::vector<chain_entry> hooks_;
  std::optional<parsers::stream_decoder> decoder_;  // a pointer to its state
  mono_ns first_token_ns_ = -1, first_content_ns_ = -1;
  // For the attribution: the proxy's phase boundaries, the time client writes took (-1: no
  // body relayed), TGI's timing headers.
  phase_marks marks_;
  mono_ns client_wait_ns_ = -1;
  parsers::engine_account header_engine_;
  mono_ns flushed_ns_ = 0;
  std::array<sample, 32> samples_;  // 256 bytes: a hand-over per 32 samples (an event gives 1-2)
  // Per stream, not per event.
  std::size_t max_event_bytes_;
  std::shared_ptr<chain_stats> stats_;
  std::unique_ptr<choices_state> choices_;  // made when a second choice answers
  // What the stream told so far; at its end it becomes the first part of the whole stream_info
  // (made then: the rest would sit unused in every open stream).
  stream_progress live_;
  std::unique_ptr<stream_info> info_;
  stream_progress& progress() noexcept {
    return info_ ? static_cast<stream_progress&>(*info_) : live_;
  }
};

}  // namespace

hook_chain_factory::hook_chain_factory(const config::config& cfg,
                                       std::vector<std::shared_ptr<hook_factory>> hooks)
    : max_event_bytes_(cfg.max_event_bytes),
      factories_(std::move(hooks)),
      stats_(std::make_shared<chain_stats>()) {}

std::unique_ptr<stream_tap> hook_chain_factory::create() {
  stats_->streams.fetch_add(1, std::memory_order_relaxed);
  std::vector<chain_entry> hooks;
  hooks.reserve(factories_.size());
  for (auto& f : factories_) {
    if (hooks.size() == max_hooks) break;
    try {
      if (auto h = f->create()) {
        const auto* hot = dynamic_cast<const hot_state*>(h.get());
        auto* shaped = dynamic_cast<shaped_reads*>(h.get());
        hooks.push_back({std::move(h), hot, shaped});
      }
    } catch (...) {
      stats_->hook_failures.fetch_add(1, std::memory_order_relaxed);
    }
  }
  return std::make_unique<chain>(max_event_bytes_, std::move(hooks), stats_);
}

}  // namespace tokentap::hooks
