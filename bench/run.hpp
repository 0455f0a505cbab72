#pragma once
// Runs a workload against a target, level by level (DESIGN.md §14): a closed loop of N clients
// each sending its next task when its last one is answered, or an open loop sending on a
// schedule made before the level starts (a rate's, or the recorded one of a trace workload); each
// level stops after a number of requests or a
// duration, its first seconds (warm-up) sent but left out of its figures.  Every response is
// measured by the proxy's own decoders (replay/measure.hpp); all clients are coroutines on one
// Asio thread, so one process drives thousands of streams.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "bench/arrivals.hpp"
#include "bench/summary.hpp"
#include "bench/workload.hpp"

namespace tokentap::bench {

struct run_options {
  std::string host = "127.0.0.1";
  std::uint16_t port = 8000;
  std::string model = "default";                             ///< the `model` every request names
  std::vector<std::pair<std::string, std::string>> headers;  ///< sent with every request
  /// The levels: clients (closed loop), requests per second (open loop), or the speed-up of
  /// the tasks' recorded schedule (task::at_s; recorded workloads), in order.
  level::kind load = level::kind::concurrency;
  std::vector<double> values{1};
  std::size_t requests = 0;  ///< per level, warm-up excluded (0: by duration only)
  double duration_s = 0;     ///< per level, warm-up excluded (0: by requests only)
  double warmup_s = 0;       ///< sent first at each level, left out of its figures
  arrival arrivals = arrival::poisson;
  double burstiness = 1;
  std::uint64_t seed = 1;
  std::size_t max_gaps = 4096;  ///< gaps between token events kept per response
  /// Gaps kept per level for its ITL and chunk-gap percentiles: past it, a uniform sample
  /// (gap_pool).  Requests keep none of their own once they are pooled.
  std::size_t max_level_gaps = 1000000;
  /// Ask for the usage in every chunk (`stream_options.continuous_usage_stats`, vLLM's): with
  /// it, an event of several tokens counts as that many gaps in ITL.  Servers that do not know
  /// the option may refuse it (OpenAI's API does not take unknown stream options).
  bool continuous_usage = false;
  /// Reasoning steps and prompt-cache events per request (the proxy's steps and cache hooks).
  bool analyze = true;
  /// A trace record per request, written here by the proxy's trace hook; empty: none.
  std::string trace_dir{};
  /// Called after each request (on the run's thread): for a progress line.
  std::function<void(const request_result&)> on_request;
};

struct run_result {
  std::vector<request_result> requests;  ///< in the order they were sent, warm-up included
  /// One per level, its requests a view into `requests` and its gaps into `gaps` (valid while
  /// it lives).
  std::vector<level> levels;
  std::vector<std::unique_ptr<gap_pool>> gaps;  ///< per level: ITL, then chunk gaps
};

/// The path and body a task becomes: an OpenAI chat completion, streamed, with usage asked for
/// (`stream_options.include_usage`, and `continuous_usage_stats` with `continuous_usage`) and the
/// task's `max_tokens`; a `prompt` is one user message (every OpenAI-compatible server has chat
/// completions; not all still serve /v1/completions).
std::pair<std::string, std::string> request_of(const task& t, const std::string& model,
                                               bool continuous_usage = false);

/// Runs `tasks` (repeated when a level needs more: a repeat's id gets `#2`, `#3` …, so ids stay
/// unique and two runs of one workload pair by id).  A level stops sending once it has sent its
/// requests or its time is up, and ends when those sent are answered.
run_result run(const std::vector<task>& tasks, const run_options& o);

}  // namespace tokentap::bench
