#pragma once
// `tokentap bench report`: one self-contained HTML page of a run, or of two side by side (A
// against B) — tables and SVG charts written here, no script and nothing fetched, so the file
// opens offline in any browser and reads the same later.
//
// What it shows: each level's figures (summary.json); CDFs of TTFT, of each request's mean gap
// between tokens and of end to end, one line per run and level (requests.jsonl); latency,
// throughput and goodput against load; accuracy per category with its 95 % interval; the prompt
// cache's outcomes and the events that explain its misses.
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "bench/summary.hpp"

namespace tokentap::bench {

/// One run directory as the report reads it (the command reads the files).
struct report_run {
  std::string name;                      ///< how the page names it (its directory)
  std::string run_json;                  ///< run.json: target, workload, when, load
  std::string summary_json;              ///< summary.json: the levels' figures
  std::vector<request_result> requests;  ///< requests.jsonl: the CDFs' samples
};

/// The page.  nullopt with `error` ("NAME: reason") when a run's run.json or summary.json is
/// not what `bench run` writes.
std::optional<std::string> report_html(std::span<const report_run> runs, std::string& error);

}  // namespace tokentap::bench
