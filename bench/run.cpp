#include "bench/run.hpp"

// g++ 12 false positive on coroutines of asio's awaitable<T, io_context::executor_type>: the
// frame's own operator new/delete pair (thread-local recycling) is reported as mismatched once
// inlined.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif

#include <algorithm>
#include <cmath>
#include <limits>
#include <span>
#include <tuple>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>

#include "base/clock.hpp"
#include "base/json.hpp"
#include "net/net.hpp"
#include "replay/measure.hpp"

namespace tokentap::bench {

namespace {

// A chat completion of `messages` (then `prompt` as a user message, when not empty), streamed,
// with usage asked for (in every chunk with `continuous_usage`).
std::pair<std::string, std::string> chat_request(std::span<const message> messages,
                                                 std::string_view prompt, std::int64_t max_tokens,
                                                 const std::string& model, bool continuous_usage) {
  std::string body;
  base::json::writer w(body);
  w.begin_object().field("model", model).key("messages").begin_array();
  for (const auto& m : messages)
    w.begin_object().field("role", m.role).field("content", m.content).end();
  if (!prompt.empty()) w.begin_object().field("role", "user").field("content", prompt).end();
  w.end();
  if (max_tokens > 0) w.field("max_tokens", max_tokens);
  w.field("stream", true).key("stream_options").begin_object().field("include_usage", true);
  if (continuous_usage) w.field("continuous_usage_stats", true);
  w.end().end();
  return {"/v1/chat/completions", std::move(body)};
}

}  // namespace

std::pair<std::string, std::string> request_of(const task& t, const std::string& model,
                                               bool continuous_usage) {
  return chat_request(t.messages, t.messages.empty() ? std::string_view(t.prompt) : "",
                      t.max_tokens, model, continuous_usage);
}

namespace {

// A conversation's history as a turn resends it: its opening (the system prompt) and each kept
// turn's user message and answer, with the tokens the client estimates for each.
class history {
 public:
  explicit history(const std::vector<message>& opening) {
    for (const auto& m : opening) add(m.role, m.content, -1);
  }
  void add(std::string role, std::string content, int turn) {
    tokens_ += estimated_tokens(content);
    entries_.push_back({{std::move(role), std::move(content)}, turn});
  }
  // Rewrites the answer of `turn`, when it is still kept: the request after diverges from the
  // engine's cached prefix there.
  void edit_answer(int turn) {
    for (auto& e : entries_)
      if (e.turn == turn && e.m.role == "assistant") {
        tokens_ -= estimated_tokens(e.m.content);
        e.m.content = "(edited) " + e.m.content;
        tokens_ += estimated_tokens(e.m.content);
      }
  }
  // Drops the oldest turns (user message and answer) while the history passes `window` tokens,
  // the turn being sent (`current`) aside: a client's context-window overflow.
  void fit(std::int64_t window, int current) {
    while (window > 0 && tokens_ > window) {
      auto oldest = std::find_if(entries_.begin(), entries_.end(),
                                 [](const entry& e) { return e.turn >= 0; });
      if (oldest == entries_.end() || oldest->turn == current) return;
      const int turn = oldest->turn;
      std::erase_if(entries_, [&](const entry& e) {
        if (e.turn != turn) return false;
        tokens_ -= estimated_tokens(e.m.content);
        return true;
      });
    }
  }
  std::vector<message> messages() const {
    std::vector<message> out;
    out.reserve(entries_.size());
    for (const auto& e : entries_) out.push_back(e.m);
    return out;
  }

 private:
  struct entry {
    message m;
    int turn;  // -1: the opening
  };
  std::vector<entry> entries_;
  std::int64_t tokens_ = 0;
};

using seconds = std::chrono::duration<double>;

// The state of one run: the tasks, how each is sent, what came back.
class runner {
 public:
  runner(const std::vector<task>& tasks, const run_options& o)
      : tasks_(tasks),
        o_(o),
        meas_({.host = o.host,
               .port = o.port,
               .max_gaps = o.max_gaps,
               // Graded tasks' answers are judged; conversations resend theirs.
               .max_text = std::any_of(tasks.begin(), tasks.end(),
                                       [](const task& t) {
                                         return t.grade.has_value() || !t.turns.empty();
                                       })
                               ? std::size_t{64 * 1024}
                               : 0,
               .analyze = o.analyze,
               .trace_dir = o.trace_dir}) {
    for (const auto& t : tasks) {
      replay::outgoing out;
      if (!t.turns.empty()) {        // a conversation: each turn's request is made when it is sent
      } else if (!t.path.empty()) {  // recorded: as it was sent
        out.method = t.method;
        out.target = t.path;
        out.body = t.body;
      } else {
        auto [target, body] = request_of(t, o.model, o.continuous_usage);
        out.target = std::move(target);
        out.body = std::move(body);
      }
      out.headers = o.headers;
      if (!out.body.empty()) out.headers.emplace_back("content-type", "application/json");
      requests_.push_back(std::move(out));
      recorded_at_.push_back(std::max(0.0, t.at_s));
    }
  }

  run_result run() {
    run_result res;
    std::vector<std::pair<std::size_t, std::size_t>> spans;
    std::vector<double> durations;
    for (std::size_t l = 0; l < o_.values.size(); ++l) {
      const auto first = results_.size();
      pools_.push_back(std::make_unique<gap_pool>(o_.max_level_gaps, o_.seed + 2 * l));
      pools_.push_back(std::make_unique<gap_pool>(o_.max_level_gaps, o_.seed + 2 * l + 1));
      per_token_.push_back(true);
      asio::io_context ioc(1);
      level_ = l;
      sent_ = 0;
      counted_ = 0;
      last_end_ns_ = 0;
      first_sent_ns_ = 0;
      level_start_ns_ = base::mono_now_ns();
      warm_end_ns_ = level_start_ns_ + static_cast<std::int64_t>(o_.warmup_s * 1e9);
      if (o_.load == level::kind::rate)
        asio::co_spawn(ioc, rate_loop(o_.values[l]), asio::detached);
      else if (o_.load == level::kind::schedule)
        asio::co_spawn(ioc, recorded_loop(o_.values[l]), asio::detached);
      else
        for (unsigned c = 0; c < static_cast<unsigned>(o_.values[l]); ++c)
          asio::co_spawn(ioc, client(), asio::detached);
      ioc.run();
      spans.emplace_back(first, results_.size());
      // From the first counted request sent to the last response's end (AIPerf's benchmark
      // duration): the connection a first request opens is not the level's time.
      const auto from = first_sent_ns_ > 0 ? first_sent_ns_ : warm_end_ns_;
      durations.push_back(last_end_ns_ > from ? static_cast<double>(last_end_ns_ - from) / 1e9
                                              : 0.0);
    }
    res.requests = std::move(results_);
    res.gaps = std::move(pools_);
    for (std::size_t l = 0; l < spans.size(); ++l)
      res.levels.push_back(
          {.load = o_.load,
           .value = o_.values[l],
           .duration_s = durations[l],
           .requests = std::span<const request_result>(res.requests)
                           .subspan(spans[l].first, spans[l].second - spans[l].first),
           .itl_gaps = res.gaps[2 * l].get(),
           .chunk_gaps = res.gaps[2 * l + 1].get(),
           .itl_per_token = per_token_[l]});
    return res;
  }

 private:
  // Past the level's time: nothing more is sent.
  bool time_is_up(std::int64_t now_ns) const {
    return o_.duration_s > 0 &&
           now_ns >= warm_end_ns_ + static_cast<std::int64_t>(o_.duration_s * 1e9);
  }
  // Whether another counted request may be sent.
  bool requests_left() const { return o_.requests == 0 || counted_ < o_.requests; }

  // Counts the `n`-th task against the level's requests before it starts, and says how many
  // requests it may send (0: none).  A conversation reserves all its turns, so that it runs
  // whole and two runs of one workload send the same turns (compare pairs them by id); the first
  // one that does not fit takes what is left and stops there.  Warm-up tasks count nothing.
  std::size_t reserve(std::size_t n, bool warmup) {
    const auto need = std::max<std::size_t>(1, tasks_[n % tasks_.size()].turns.size());
    if (warmup) return need;
    const auto granted =
        o_.requests == 0 ? need : std::min(need, o_.requests - std::min(o_.requests, counted_));
    counted_ += granted;
    return granted;
  }

  // The level's next task (the `n`-th sent at this level): one request, or a conversation's
  // turns.
  // `turns`: what reserve() granted a conversation.
  awaitable<void> send(std::size_t n, bool warmup, std::int64_t planned_ns, std::size_t turns) {
    const auto& t = tasks_[n % tasks_.size()];
    auto id = n < tasks_.size() ? t.id : t.id + "#" + std::to_string(n / tasks_.size() + 1);
    if (!t.turns.empty()) {
      co_await converse(t, std::move(id), warmup, planned_ns, turns);
      co_return;
    }
    const std::size_t slot = results_.size();
    results_.emplace_back();
    replay::measurement m;
    co_await meas_.measure(requests_[n % tasks_.size()], m);
    record(results_[slot], t, std::move(id), warmup, planned_ns, m);
  }

  // A conversation: each of its first `turns` turns sent with the history so far once the
  // previous one is answered and its think time has passed (a turn's planned time: the answer's
  // end + the think time, from which its lag is measured).  It ends early when a turn fails or
  // the level's time is up.  Its turns are warm-up when it began in the warm-up.
  awaitable<void> converse(const task& t, std::string id, bool warmup, std::int64_t planned_ns,
                           std::size_t turns) {
    history h(t.messages);
    steady_timer timer(co_await asio::this_coro::executor);
    for (std::size_t k = 0; k < std::min(turns, t.turns.size()); ++k) {
      const auto& u = t.turns[k];
      if (k > 0) {
        planned_ns = base::mono_now_ns() + static_cast<std::int64_t>(u.think_ms * 1e6);
        if (u.think_ms > 0) {
          timer.expires_after(std::chrono::duration_cast<clock::duration>(
              std::chrono::duration<double, std::milli>(u.think_ms)));
          error_code ec;
          co_await timer.async_wait(use_ec(ec));
        }
        if (time_is_up(base::mono_now_ns())) co_return;
      }
      if (u.edit_answer >= 0) h.edit_answer(u.edit_answer);
      h.add("user", u.user, static_cast<int>(k));
      h.fit(t.context_window, static_cast<int>(k));
      replay::outgoing out;
      std::tie(out.target, out.body) =
          chat_request(h.messages(), "", u.max_tokens, o_.model, o_.continuous_usage);
      out.headers = o_.headers;
      out.headers.emplace_back("content-type", "application/json");
      const std::size_t slot = results_.size();
      results_.emplace_back();
      replay::measurement m;
      co_await meas_.measure(out, m);
      auto& r = results_[slot];
      r.turn = static_cast<std::uint32_t>(k + 1);
      record(r, t, id + "/" + std::to_string(k + 1), warmup, planned_ns, m);
      if (!m.ok) co_return;
      h.add("assistant", std::move(m.content), static_cast<int>(k));
    }
  }

  // What a response came to, into `r` (its slot, taken when it was sent).
  void record(request_result& r, const task& t, std::string id, bool warmup,
              std::int64_t planned_ns, replay::measurement& m) {
    r.id = std::move(id);
    r.level = level_;
    r.warmup = warmup;
    r.status = m.status;
    r.ok = m.ok;
    r.ttft_ms = m.ttft_ms;
    r.ttfo_ms = m.ttfo_ms;
    // End to end as vLLM and AIPerf end it: at the response's last event (the framing's end,
    // which the trace record's timing includes, may come later).
    r.e2e_ms = m.last_byte_ms >= 0 ? m.last_byte_ms : m.e2e_ms;
    r.tpot_ms = m.tpot_ms;
    r.mean_itl_ms = m.tpot_ms;  // AIPerf's per-request ITL
    r.chunk_gap_ms = std::move(m.event_gaps_ms);
    r.itl_per_token = m.per_token_gaps;  // else the level's ITL takes the chunk gaps
    r.itl_ms = std::move(m.token_gaps_ms);
    r.input_tokens = m.usage.input_tokens;
    r.output_tokens = m.usage.output_tokens;
    r.cached_tokens = m.usage.cached_input_tokens;
    if (r.output_tokens < 0 && m.ok) {
      r.output_tokens = static_cast<std::int64_t>(m.token_events);
      r.tokens_estimated = true;
    }
    r.schedule_lag_ms =
        planned_ns > 0 ? std::max(0.0, static_cast<double>(m.sent_ns - planned_ns) / 1e6) : 0;
    r.steps = m.steps;
    r.backtracks = m.backtracks;
    r.cache_outcome = std::move(m.cache_outcome);
    r.cache_events = std::move(m.cache_events);
    r.trace_id = std::move(m.trace_record_id);
    auto& a = r.attribution;
    a.connect_ms = m.connect_ms;
    a.upstream_head_ms = m.upstream_head_ms;
    a.first_token_ms = m.first_token_ms;
    a.decode_ms = m.decode_ms;
    if (m.engine.reported()) {
      a.engine = std::string(parsers::to_string(m.engine.source));
      a.engine_queue_ms = m.engine.queue_ms;
      a.engine_prefill_ms = m.engine.prefill_ms;
      a.engine_decode_ms = m.engine.decode_ms;
      a.unexplained_ms = m.unexplained_ms;
    }
    if (t.grade) {
      r.category = t.category;
      r.correct = m.ok && t.grade->judge(m.content).correct;
      // Step consistency: the reasoning's conclusion states what the response finally answers.
      if (m.ok && !m.conclusion.empty())
        if (const auto stated = t.grade->extract(m.content); !stated.empty())
          r.consistent = t.grade->extract(m.conclusion) == stated;
    }
    if (!warmup && m.sent_ns > 0 && (first_sent_ns_ == 0 || m.sent_ns < first_sent_ns_))
      first_sent_ns_ = m.sent_ns;
    pool_gaps(r);
    last_end_ns_ =
        std::max(last_end_ns_, r.e2e_ms >= 0 ? m.sent_ns + static_cast<std::int64_t>(r.e2e_ms * 1e6)
                                             : base::mono_now_ns());
    if (o_.on_request) o_.on_request(r);
  }

  // A counted successful request's gaps into its level's pools (what the summary's ITL and
  // chunk-gap figures are made of); the request keeps none, so a long run's memory is bounded.
  void pool_gaps(request_result& r) {
    if (!r.warmup && r.ok) {
      per_token_[level_] = per_token_[level_] && (r.itl_per_token || r.chunk_gap_ms.empty());
      for (const double g : r.itl_per_token ? r.itl_ms : r.chunk_gap_ms) pools_[2 * level_]->add(g);
      for (const double g : r.chunk_gap_ms) pools_[2 * level_ + 1]->add(g);
    }
    std::vector<double>().swap(r.itl_ms);
    std::vector<double>().swap(r.chunk_gap_ms);
  }

  // A closed-loop client: its next request as soon as its last one is answered.
  awaitable<void> client() {
    for (;;) {
      const auto now = base::mono_now_ns();
      const bool warmup = now < warm_end_ns_;
      if (time_is_up(now) || (!warmup && !requests_left())) co_return;
      const auto turns = reserve(sent_, warmup);
      if (turns == 0) co_return;
      co_await send(sent_++, warmup, 0, turns);
    }
  }

  // An open loop at `rate` requests per second: the warm-up's and the level's requests on one
  // schedule made now.
  awaitable<void> rate_loop(double rate) {
    const auto warm = static_cast<std::size_t>(std::ceil(o_.warmup_s * rate));
    std::size_t main = o_.requests;
    if (main == 0) main = static_cast<std::size_t>(std::ceil(o_.duration_s * rate));
    co_await open_loop(schedule(warm + main, rate, o_.arrivals, o_.burstiness, o_.seed + level_),
                       warm);
  }

  // The recorded schedule played `speed` times as fast: the requests planned in the first
  // warmup_s seconds are the warm-up; then --requests or --duration-s more, or one pass.
  awaitable<void> recorded_loop(double speed) {
    const std::size_t warm =
        o_.warmup_s > 0 ? recorded_schedule(recorded_at_, speed, 0, o_.warmup_s).size() : 0;
    co_await open_loop(
        recorded_schedule(recorded_at_, speed, o_.requests > 0 ? warm + o_.requests : 0,
                          o_.duration_s > 0 ? o_.warmup_s + o_.duration_s : 0),
        warm);
  }

  // An open loop: every request at its planned time (seconds from the level's start), whether
  // the earlier ones were answered or not; each planned time is kept to measure the lag.  The
  // first `warm` are the warm-up.
  awaitable<void> open_loop(std::vector<double> plan, std::size_t warm) {
    const auto exec = co_await asio::this_coro::executor;
    steady_timer timer(exec);
    const auto start = clock::now();
    const auto start_ns = base::mono_now_ns();  // the same instant: what lag is measured from
    for (std::size_t i = 0; i < plan.size(); ++i) {
      timer.expires_at(start + std::chrono::duration_cast<clock::duration>(seconds(plan[i])));
      error_code ec;
      co_await timer.async_wait(use_ec(ec));
      const bool warmup = i < warm;
      if (!warmup && time_is_up(base::mono_now_ns())) break;
      const auto turns = reserve(sent_, warmup);
      if (turns == 0) break;
      const auto planned = start_ns + static_cast<std::int64_t>(plan[i] * 1e9);
      asio::co_spawn(exec, send(sent_++, warmup, planned, turns), asio::detached);
    }
  }

  const std::vector<task>& tasks_;
  const run_options& o_;
  replay::measurer meas_;
  std::vector<replay::outgoing> requests_;
  std::vector<double> recorded_at_;  // each task's recorded offset (recorded workloads)
  std::vector<request_result> results_;
  std::vector<std::unique_ptr<gap_pool>> pools_;  // per level: ITL, chunk gaps
  std::vector<bool> per_token_;                   // per level: every ITL gap per token
  std::size_t level_ = 0, sent_ = 0, counted_ = 0;
  std::int64_t level_start_ns_ = 0, warm_end_ns_ = 0, last_end_ns_ = 0, first_sent_ns_ = 0;
};

}  // namespace

run_result run(const std::vector<task>& tasks, const run_options& o) {
  if (tasks.empty()) return {};
  runner r(tasks, o);
  return r.run();
}

}  // namespace tokentap::bench
