#pragma once
// What a run's level comes to (DESIGN.md §14, `summary.json`): per metric its mean and
// percentiles, throughput, goodput under the SLOs given, the client's schedule lag and the
// accuracy of graded tasks per category — computed from the run's requests, warm-up excluded.
//
// Definitions (docs/bench.md says why each):
// - TTFT: the first token, reasoning included (AIPerf's, GuideLLM's since #742); TTFO: the first
//   answer token after the reasoning (AIPerf's TTFO).
// - ITL: every gap between two tokens (an event of k tokens: k gaps of 1/k of the gap before it,
//   when the server counts tokens per chunk), pooled over the level's requests; the gaps between
//   events (what vLLM, and AIPerf's ICL, call ITL) are `chunk_gap_ms`, kept apart.
// - TPOT: per request, (last token − first token) / (output tokens − 1); vLLM and AIPerf take end
//   to end for the last token (the same when the stream ends with its last token).
// - End to end: request sent → the response's last event (its last body bytes), where vLLM and
//   AIPerf stop; a server's framing may end later.
// - Goodput: a request is good when it succeeded and meets every SLO given (`itl_ms` against
//   its mean inter-token latency, AIPerf's per-request ITL); the fraction counts failed requests
//   in its denominator (AIPerf's good_request_fraction).
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tokentap::bench {

/// One request of a run, as requests.jsonl writes it.  Times in ms; -1: not measured.
struct request_result {
  std::string id;
  std::size_t level = 0;
  std::uint32_t turn = 0;  ///< a conversation's turn, from 1 (0: a single request)
  bool warmup = false;     ///< sent during the warm-up: in requests.jsonl, not in the summary
  int status = 0;          ///< HTTP status; 0: no response
  bool ok = false;         ///< 2xx and the response ended as its provider ends one
  double ttft_ms = -1, ttfo_ms = -1, e2e_ms = -1, tpot_ms = -1;
  double mean_itl_ms = -1;  ///< the request's mean gap between tokens
  /// Every gap between two tokens, when the server counted tokens per chunk (`itl_per_token`);
  /// otherwise empty, and the level's ITL takes chunk_gap_ms (an event is one gap).
  std::vector<double> itl_ms;
  bool itl_per_token = false;
  std::vector<double> chunk_gap_ms;  ///< every gap between two token-bearing events
  std::int64_t input_tokens = -1, output_tokens = -1, cached_tokens = -1;
  bool tokens_estimated = false;  ///< the server gave no usage: counted by the client
  double schedule_lag_ms = 0;     ///< sent − planned (open loop and schedules; 0 closed loop)
  std::string category;           ///< graded tasks
  std::optional<bool> correct;    ///< graded tasks: the grader's verdict
  std::uint32_t steps = 0, backtracks = 0;  ///< reasoning steps the tap found
  /// Graded tasks whose response concluded (a conclusion step): whether the conclusion states
  /// the same answer as the response's final one (step consistency).
  std::optional<bool> consistent;
  std::string cache_outcome;              ///< hit, partial, miss (empty: not judged)
  std::vector<std::string> cache_events;  ///< the cache hook's events (a miss's cause …)
  std::string trace_id;  ///< its trace record in the run directory's traces/ (empty: none)
  /// Where its time went (DESIGN.md §13, the tap's attribution; ms, -1 unknown): the server's
  /// phases as the client saw them — request written → response head, head → first token, first
  /// token → end — the connection's setup (outside end to end), and the engine's own account when
  /// the server reported one (its name, queue, prefill, decode) with what it leaves unexplained
  /// of TTFT (network and the engine's HTTP front end).
  struct attribution {
    double connect_ms = -1, upstream_head_ms = -1, first_token_ms = -1, decode_ms = -1;
    std::string engine;  ///< llama.cpp, vllm, tgi, ollama; empty: none reported
    double engine_queue_ms = -1, engine_prefill_ms = -1, engine_decode_ms = -1;
    double unexplained_ms = -1;
  } attribution;
};

/// The service-level objectives goodput is measured against (`--goodput ttft_ms:500,itl_ms:50`);
/// a negative bound is not set.
struct slo {
  double ttft_ms = -1, ttfo_ms = -1, itl_ms = -1, tpot_ms = -1, e2e_ms = -1;
  bool any() const noexcept {
    return ttft_ms >= 0 || ttfo_ms >= 0 || itl_ms >= 0 || tpot_ms >= 0 || e2e_ms >= 0;
  }
  /// Whether a request that succeeded meets every bound set.
  bool met_by(const request_result& r) const noexcept;
};
/// Parses `ttft_ms:500,itl_ms:50` (keys ttft_ms, ttfo_ms, itl_ms, tpot_ms, e2e_ms; values ms > 0);
/// nullopt with `error` set for anything else.
std::optional<slo> parse_slo(std::string_view text, std::string& error);

/// Gaps pooled as requests end: every one while they fit in `cap`, then a uniform sample of
/// them (reservoir sampling, seeded), so that a long run holds a bounded number — the
/// percentiles of a uniform sample of a million gaps are within a fraction of a percent.
class gap_pool {
 public:
  explicit gap_pool(std::size_t cap = 1000000, std::uint64_t seed = 1) : cap_(cap), state_(seed) {}
  void add(double gap_ms);
  std::uint64_t seen() const noexcept { return seen_; }
  const std::vector<double>& kept() const noexcept { return kept_; }

 private:
  std::size_t cap_;
  std::uint64_t seen_ = 0, state_;
  std::vector<double> kept_;
};

/// One level of a run: its load and how long it sent (warm-up excluded).
struct level {
  enum class kind : std::uint8_t { concurrency, rate, schedule };
  kind load = kind::concurrency;
  double value = 0;  ///< clients, or requests per second (schedule: its speed-up)
  /// Its first request sent after the warm-up to its last response's last event.
  double duration_s = 0;
  std::span<const request_result> requests;
  /// Its successful requests' gaps, pooled as they ended (bench's runner keeps none per
  /// request), and whether each ITL gap was per token; null: the requests' own lists are pooled.
  const gap_pool* itl_gaps = nullptr;
  const gap_pool* chunk_gaps = nullptr;
  bool itl_per_token = true;
};

/// The P99 of a level's schedule lag (ms; warm-up left out), and whether the client kept up:
/// that P99 within 1 ms — past it, the level's figures include the client's own delays.
double schedule_lag_p99(const level& l);
inline bool client_kept_up(const level& l) {
  return schedule_lag_p99(l) <= 1.0;
}

/// `summary.json` for the levels of a run, in order: `{"levels":[...]}` as DESIGN.md §14, each
/// level also with `chunk_gap_ms`, `errors`, `steps` (per response: mean, the share with a
/// backtrack; with `max_reasoning_steps` K > 0 also `over_max`, the responses that ran past K
/// steps), `step_consistency` (graded responses that concluded: how many concluded as they
/// finally answered), `cache` (outcomes and events by name), `tokens_estimated` (requests whose
/// counts the client made), `attribution` (each phase of the requests' attribution that any of
/// them knew: mean and percentiles), `turns` (conversations only: per turn its requests, TTFT and
/// the share of its input the server had cached), `itl_per_token` (false when any request's ITL is
/// one gap per event, its server not counting tokens per chunk), `client_kept_up` (schedule lag P99
/// within 1 ms) and `itl_percentiles_ms` (the gaps' percentiles 0, 1, …, 100: their CDF; empty
/// without gaps).
std::string summary_json(std::span<const level> levels, const slo& goodput,
                         std::uint32_t max_reasoning_steps = 0);

/// One line of requests.jsonl for `r` (no newline).
std::string request_json(const request_result& r);

/// The requests of a requests.jsonl (what `compare` reads: ids, levels, outcomes, latencies,
/// tokens, verdicts; the per-gap lists are not in the file).  nullopt with `error` =
/// "FILE:LINE: reason" for a line that is not a request.
std::optional<std::vector<request_result>> read_requests(std::string_view text,
                                                         const std::string& file,
                                                         std::string& error);

}  // namespace tokentap::bench
