#include "bench/summary.hpp"

#include <algorithm>
#include <charconv>
#include <map>

#include <simdjson.h>

#include "base/json.hpp"
#include "bench/stats.hpp"

namespace tokentap::bench {

namespace {

bool within(double v, double bound) noexcept {
  return bound < 0 || (v >= 0 && v <= bound);
}

// `n`: how many samples `xs` stands for (a pool's sample of more; 0: its size).
void write_metric(base::json::writer& w, std::string_view name, std::vector<double> xs,
                  std::uint64_t n = 0) {
  const auto s = summarize(std::move(xs));
  w.key(name).begin_object().field("n", n > s.n ? n : s.n);
  const auto v = [&](std::string_view k, double x) {
    if (s.n == 0)
      w.key(k).null();
    else
      w.key(k).number(x, 3);
  };
  v("mean", s.mean);
  v("p50", s.p50);
  v("p90", s.p90);
  v("p95", s.p95);
  v("p99", s.p99);
  w.end();
}

void write_level(base::json::writer& w, const level& l, const slo& goodput,
                 std::uint32_t max_steps) {
  std::vector<double> ttft, ttfo, itl, chunk, tpot, e2e, lag;
  std::size_t requests = 0, ok = 0, good = 0, estimated = 0;
  bool per_token = true;
  std::int64_t output_tokens = 0;
  struct tally {
    std::uint64_t n = 0, correct = 0;
  };
  std::map<std::string, tally> accuracy;
  std::map<std::string, std::uint64_t> outcomes, events;
  std::uint64_t steps = 0, backtracking = 0, over_max = 0, concluded = 0, consistent = 0;
  // Conversations: what each turn came to (a later turn resends more, an engine has more of it
  // cached).
  struct turn_tally {
    std::uint64_t n = 0, ok = 0;
    std::int64_t input = 0, cached = 0;  // of the responses that reported both
    std::vector<double> ttft;
  };
  std::map<std::uint32_t, turn_tally> turns;
  // The attribution's phases, each over the requests that knew it.
  std::map<std::string_view, std::vector<double>> phases;
  const auto phase = [&](std::string_view name, double v) {
    if (v >= 0) phases[name].push_back(v);
  };
  for (const auto& r : l.requests) {
    if (r.warmup) continue;
    ++requests;
    if (r.turn > 0) {
      auto& t = turns[r.turn];
      ++t.n;
      if (r.ok) {
        ++t.ok;
        if (r.ttft_ms >= 0) t.ttft.push_back(r.ttft_ms);
        if (r.input_tokens > 0 && r.cached_tokens >= 0) {
          t.input += r.input_tokens;
          t.cached += r.cached_tokens;
        }
      }
    }
    lag.push_back(r.schedule_lag_ms);
    if (r.correct) {
      auto& t = accuracy[r.category.empty() ? "all" : r.category];
      ++t.n;
      t.correct += *r.correct ? 1 : 0;
    }
    if (!r.ok) continue;
    ++ok;
    good += goodput.met_by(r) ? 1 : 0;
    estimated += r.tokens_estimated ? 1 : 0;
    per_token = per_token && (r.itl_per_token || r.chunk_gap_ms.empty());
    if (r.output_tokens > 0) output_tokens += r.output_tokens;
    steps += r.steps;
    backtracking += r.backtracks > 0 ? 1 : 0;
    over_max += max_steps > 0 && r.steps > max_steps ? 1 : 0;
    if (r.consistent) {
      ++concluded;
      consistent += *r.consistent ? 1 : 0;
    }
    if (!r.cache_outcome.empty()) ++outcomes[r.cache_outcome];
    for (const auto& e : r.cache_events) ++events[e];
    const auto& a = r.attribution;
    phase("connect_ms", a.connect_ms);
    phase("upstream_head_ms", a.upstream_head_ms);
    phase("first_token_ms", a.first_token_ms);
    phase("decode_ms", a.decode_ms);
    phase("engine_queue_ms", a.engine_queue_ms);
    phase("engine_prefill_ms", a.engine_prefill_ms);
    phase("engine_decode_ms", a.engine_decode_ms);
    phase("unexplained_ms", a.unexplained_ms);
    if (r.ttft_ms >= 0) ttft.push_back(r.ttft_ms);
    if (r.ttfo_ms >= 0) ttfo.push_back(r.ttfo_ms);
    if (r.tpot_ms >= 0) tpot.push_back(r.tpot_ms);
    if (r.e2e_ms >= 0) e2e.push_back(r.e2e_ms);
    const auto& gaps = r.itl_per_token ? r.itl_ms : r.chunk_gap_ms;
    itl.insert(itl.end(), gaps.begin(), gaps.end());
    chunk.insert(chunk.end(), r.chunk_gap_ms.begin(), r.chunk_gap_ms.end());
  }
  std::uint64_t itl_n = 0, chunk_n = 0;
  if (l.itl_gaps != nullptr && l.chunk_gaps != nullptr) {  // pooled by the runner
    itl = l.itl_gaps->kept();
    chunk = l.chunk_gaps->kept();
    itl_n = l.itl_gaps->seen();
    chunk_n = l.chunk_gaps->seen();
    per_token = l.itl_per_token;
  }
  w.begin_object().key("load").begin_object();
  switch (l.load) {
    case level::kind::concurrency:
      w.field("concurrency", static_cast<std::uint64_t>(l.value));
      break;
    case level::kind::rate:
      w.key("rate").significant(l.value, 6);
      break;
    case level::kind::schedule:
      w.key("schedule_speed").significant(l.value, 6);
      break;
  }
  w.end()
      .field("requests", requests)
      .field("ok", ok)
      .field("errors", requests - ok)
      .field("tokens_estimated", estimated)
      .field("itl_per_token", per_token);
  w.key("duration_s").number(l.duration_s, 3);
  // The gaps' distribution itself, as its percentiles 0, 1, …, 100: the report's ITL CDF (the
  // per-gap lists are kept nowhere else).
  std::sort(itl.begin(), itl.end());
  std::vector<double> itl_cdf;
  if (!itl.empty())
    for (int q = 0; q <= 100; ++q) itl_cdf.push_back(percentile(itl, q));
  w.key("metrics").begin_object();
  write_metric(w, "ttft_ms", std::move(ttft));
  write_metric(w, "ttfo_ms", std::move(ttfo));
  write_metric(w, "itl_ms", std::move(itl), itl_n);
  write_metric(w, "chunk_gap_ms", std::move(chunk), chunk_n);
  write_metric(w, "tpot_ms", std::move(tpot));
  write_metric(w, "e2e_ms", std::move(e2e));
  w.end();
  w.key("itl_percentiles_ms").begin_array();
  for (const double v : itl_cdf) w.number(v, 3);
  w.end();
  const double seconds = l.duration_s > 0 ? l.duration_s : 0;
  const auto per_s = [&](double n) { return seconds > 0 ? n / seconds : 0.0; };
  w.key("throughput").begin_object();
  w.key("requests_per_s").number(per_s(static_cast<double>(ok)), 3);
  w.key("output_tokens_per_s").number(per_s(static_cast<double>(output_tokens)), 3);
  w.end();
  w.key("goodput");
  if (goodput.any()) {
    w.begin_object();
    w.key("fraction")
        .number(requests > 0 ? static_cast<double>(good) / static_cast<double>(requests) : 0, 4);
    w.key("requests_per_s").number(per_s(static_cast<double>(good)), 3);
    w.end();
  } else {
    w.null();
  }
  w.key("steps").begin_object();
  w.key("mean").number(ok > 0 ? static_cast<double>(steps) / static_cast<double>(ok) : 0, 3);
  w.key("backtracking_share")
      .number(ok > 0 ? static_cast<double>(backtracking) / static_cast<double>(ok) : 0, 4);
  if (max_steps > 0) w.field("max", max_steps).field("over_max", over_max);
  w.end()
      .key("step_consistency")
      .begin_object()
      .field("n", concluded)
      .field("consistent", consistent);
  w.key("share").number(
      concluded > 0 ? static_cast<double>(consistent) / static_cast<double>(concluded) : 0, 4);
  w.end().key("cache").begin_object().key("outcomes").begin_object();
  for (const auto& [name, n] : outcomes) w.field(name, n);
  w.end().key("events").begin_object();
  for (const auto& [name, n] : events) w.field(name, n);
  w.end().end();
  w.key("attribution").begin_object();
  for (auto& [name, values] : phases) write_metric(w, name, std::move(values));
  w.end();
  if (!turns.empty()) {
    w.key("turns").begin_array();
    for (auto& [turn, t] : turns) {
      w.begin_object().field("turn", turn).field("requests", t.n).field("ok", t.ok);
      write_metric(w, "ttft_ms", std::move(t.ttft));
      w.key("cached_share");
      if (t.input > 0)
        w.number(static_cast<double>(t.cached) / static_cast<double>(t.input), 4);
      else
        w.null();
      w.end();
    }
    w.end();
  }
  std::sort(lag.begin(), lag.end());
  const double lag_p99 = percentile(lag, 99);
  w.key("schedule_lag_ms").begin_object();
  w.key("p50").number(percentile(lag, 50), 3);
  w.key("p99").number(lag_p99, 3);
  w.end().field("client_kept_up", client_kept_up(l));
  w.key("accuracy").begin_object();
  for (const auto& [category, t] : accuracy) {
    const auto ci = wilson(t.correct, t.n);
    w.key(category).begin_object().field("n", t.n).field("correct", t.correct);
    w.key("accuracy").number(static_cast<double>(t.correct) / static_cast<double>(t.n), 4);
    w.key("ci95").begin_array().number(ci.lo, 4).number(ci.hi, 4).end().end();
  }
  w.end().end();
}

}  // namespace

void gap_pool::add(double gap_ms) {
  ++seen_;
  if (kept_.size() < cap_) {
    kept_.push_back(gap_ms);
    return;
  }
  // Algorithm R: the seen_-th gap replaces a kept one with probability cap / seen (splitmix64).
  state_ += 0x9e3779b97f4a7c15ull;
  std::uint64_t z = state_;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  if (const auto j = z % seen_; j < cap_) kept_[j] = gap_ms;
}

double schedule_lag_p99(const level& l) {
  std::vector<double> lag;
  for (const auto& r : l.requests)
    if (!r.warmup) lag.push_back(r.schedule_lag_ms);
  std::sort(lag.begin(), lag.end());
  return percentile(lag, 99);
}

bool slo::met_by(const request_result& r) const noexcept {
  return r.ok && within(r.ttft_ms, ttft_ms) && within(r.ttfo_ms, ttfo_ms) &&
         within(r.mean_itl_ms, itl_ms) && within(r.tpot_ms, tpot_ms) && within(r.e2e_ms, e2e_ms);
}

std::optional<slo> parse_slo(std::string_view text, std::string& error) {
  slo out;
  while (!text.empty()) {
    const auto comma = text.find(',');
    const auto item = text.substr(0, comma);
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    const auto colon = item.find(':');
    const auto key = item.substr(0, colon);
    double v = -1;
    if (colon != std::string_view::npos) {
      const auto value = item.substr(colon + 1);
      const auto r = std::from_chars(value.data(), value.data() + value.size(), v);
      if (r.ec != std::errc() || r.ptr != value.data() + value.size()) v = -1;
    }
    double* slot = key == "ttft_ms"   ? &out.ttft_ms
                   : key == "ttfo_ms" ? &out.ttfo_ms
                   : key == "itl_ms"  ? &out.itl_ms
                   : key == "tpot_ms" ? &out.tpot_ms
                   : key == "e2e_ms"  ? &out.e2e_ms
                                      : nullptr;
    if (slot == nullptr) {
      error = "--goodput: unknown metric '" + std::string(key) +
              "' (ttft_ms, ttfo_ms, itl_ms, tpot_ms, e2e_ms)";
      return std::nullopt;
    }
    if (!(v > 0)) {
      error = "--goodput: " + std::string(key) + " needs a bound in ms above 0, as " +
              std::string(key) + ":500";
      return std::nullopt;
    }
    *slot = v;
  }
  if (!out.any()) {
    error = "--goodput needs at least one bound, as ttft_ms:500,itl_ms:50";
    return std::nullopt;
  }
  return out;
}

std::string summary_json(std::span<const level> levels, const slo& goodput,
                         std::uint32_t max_reasoning_steps) {
  std::string out;
  base::json::writer w(out);
  w.begin_object().key("levels").begin_array();
  for (const auto& l : levels) write_level(w, l, goodput, max_reasoning_steps);
  w.end().end();
  return out;
}

std::string request_json(const request_result& r) {
  std::string out;
  base::json::writer w(out);
  const auto ms = [&](std::string_view k, double v) {
    if (v < 0)
      w.key(k).null();
    else
      w.key(k).number(v, 3);
  };
  w.begin_object().field("id", r.id).field("level", r.level);
  if (r.turn > 0) w.field("turn", r.turn);
  w.field("status", r.status).field("ok", r.ok);
  if (r.warmup) w.field("warmup", true);
  ms("ttft_ms", r.ttft_ms);
  ms("ttfo_ms", r.ttfo_ms);
  ms("e2e_ms", r.e2e_ms);
  ms("tpot_ms", r.tpot_ms);
  w.key("input_tokens").integer_or_null(r.input_tokens);
  w.key("output_tokens").integer_or_null(r.output_tokens);
  w.key("cached_tokens").integer_or_null(r.cached_tokens);
  if (r.tokens_estimated) w.field("tokens_estimated", true);
  w.key("schedule_lag_ms").number(r.schedule_lag_ms, 3);
  if (r.correct) w.field("category", r.category).field("correct", *r.correct);
  if (r.steps > 0) w.field("steps", r.steps).field("backtracks", r.backtracks);
  if (r.consistent) w.field("consistent", *r.consistent);
  if (!r.cache_outcome.empty()) w.field("cache", r.cache_outcome);
  if (!r.cache_events.empty()) {
    w.key("cache_events").begin_array();
    for (const auto& e : r.cache_events) w.string(e);
    w.end();
  }
  if (!r.trace_id.empty()) w.field("trace_id", r.trace_id);
  const auto& a = r.attribution;
  w.key("attribution").begin_object();
  ms("connect_ms", a.connect_ms);
  ms("upstream_head_ms", a.upstream_head_ms);
  ms("first_token_ms", a.first_token_ms);
  ms("decode_ms", a.decode_ms);
  if (!a.engine.empty()) {
    w.key("engine").begin_object().field("source", a.engine);
    ms("queue_ms", a.engine_queue_ms);
    ms("prefill_ms", a.engine_prefill_ms);
    ms("decode_ms", a.engine_decode_ms);
    w.end();
    ms("unexplained_ms", a.unexplained_ms);
  }
  w.end();
  w.end();
  return out;
}

std::optional<std::vector<request_result>> read_requests(std::string_view text,
                                                         const std::string& file,
                                                         std::string& error) {
  std::vector<request_result> out;
  simdjson::dom::parser parser;
  int line = 0;
  while (!text.empty()) {
    ++line;
    const auto nl = text.find('\n');
    const auto row = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    if (row.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    const auto fail = [&](const std::string& why) {
      error = file + ":" + std::to_string(line) + ": " + why;
      return std::nullopt;
    };
    simdjson::dom::object o;
    if (parser.parse(row.data(), row.size()).get(o)) return fail("not a request (a JSON object)");
    request_result r;
    std::string_view id;
    std::uint64_t level = 0;
    std::int64_t status = 0;
    if (o["id"].get(id) || o["level"].get(level) || o["status"].get(status) || o["ok"].get(r.ok))
      return fail("a request needs id, level, status and ok");
    r.id = std::string(id);
    r.level = static_cast<std::size_t>(level);
    r.status = static_cast<int>(status);
    if (std::uint64_t turn = 0; !o["turn"].get(turn))
      r.turn = static_cast<std::uint32_t>(std::min<std::uint64_t>(turn, UINT32_MAX));
    bool flag = false;
    if (!o["warmup"].get(flag)) r.warmup = flag;
    if (!o["tokens_estimated"].get(flag)) r.tokens_estimated = flag;
    const auto ms = [&](const char* key, double& v) {
      double x = 0;
      if (!o[key].get(x)) v = x;
    };
    ms("ttft_ms", r.ttft_ms);
    ms("ttfo_ms", r.ttfo_ms);
    ms("e2e_ms", r.e2e_ms);
    ms("tpot_ms", r.tpot_ms);
    ms("schedule_lag_ms", r.schedule_lag_ms);
    const auto count = [&](const char* key, std::int64_t& v) {
      std::int64_t x = 0;
      if (!o[key].get(x)) v = x;
    };
    count("input_tokens", r.input_tokens);
    count("output_tokens", r.output_tokens);
    count("cached_tokens", r.cached_tokens);
    if (bool correct = false; !o["correct"].get(correct)) {
      r.correct = correct;
      std::string_view category;
      if (!o["category"].get(category)) r.category = std::string(category);
    }
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace tokentap::bench
