#pragma once
// Reads trace files (JSON Lines, DESIGN.md §5) back into memory for replay and analysis.
// Malformed or truncated lines are skipped and counted, never fatal.
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace tokentap::replay {

struct recorded_read {
  std::int64_t t_us = 0;  ///< since the request started
  std::string bytes;      ///< exactly as forwarded
};

struct cache_event {
  std::string event;
  /// From its evidence: the role of the element where the prompt diverged (prefix_divergence),
  /// why a conversation was cut (truncation).
  std::string role, reason;
};

struct step_record {
  std::string kind;
  bool redundant = false;
  std::int64_t tokens = 0;
};

/// A record's `attribution` (DESIGN.md §13), in milliseconds; nullopt = null.
inline constexpr std::size_t recorded_phases = 7;  ///< hooks::phase_count, in its order
struct recorded_attribution {
  bool present = false;  ///< the record has one (records before it do not)
  std::array<std::optional<double>, recorded_phases> phases{};
  std::optional<double> client_wait_ms, unexplained_ms;
  std::string engine_source;  ///< empty: no engine account
  std::optional<double> engine_queue_ms, engine_load_ms, engine_prefill_ms, engine_decode_ms,
      engine_inference_ms;
};

/// A record's `fault`: one injected on purpose (DESIGN.md §13), the ground truth of an experiment.
struct recorded_fault {
  std::string rule, kind;   ///< kind: delay, event_delay, cut, abort
  std::int64_t value = -1;  ///< ms, events or an HTTP status, by kind
};

struct record {
  std::string id, start, route, provider, model, outcome, error_type;
  std::int64_t start_us = -1;  ///< `start` as µs since the epoch (-1 if unreadable)
  std::string method, path;
  std::optional<std::string> body;  ///< null when bodies were not recorded
  std::vector<std::pair<std::string, std::string>> request_headers;  ///< secrets are "[redacted]"
  int status = 0;
  std::vector<std::pair<std::string, std::string>> response_headers;
  std::vector<recorded_read> events;
  // timing (ms; -1 = absent)
  double ttft_ms = -1, ttft_answer_ms = -1, e2e_ms = -1, upstream_headers_ms = -1;
  double itl_p50 = -1, itl_p95 = -1, itl_p99 = -1, overhead_p50 = -1, overhead_p99 = -1,
         tokens_per_s = -1;
  std::int64_t stalls = 0;
  std::vector<double> itl_values_ms;
  // usage (-1 = absent)
  std::int64_t input_tokens = -1, output_tokens = -1, reasoning_tokens = -1,
               cached_input_tokens = -1;
  std::int64_t choices = -1;  ///< choices that answered (n > 1); -1 in records before it
  std::vector<step_record> steps;
  std::int64_t redundant_tokens = 0;
  std::vector<cache_event> cache;
  recorded_attribution attribution;
  std::optional<recorded_fault> fault;  ///< absent: none was injected
  std::string raw;  ///< the line as written; kept only when records are read by id
};

struct read_result {
  std::vector<record> records;
  std::size_t skipped = 0;            ///< malformed or truncated lines
  std::vector<std::string> warnings;  ///< one per skipped line (first few), for the user
};

/// Reads every file; a directory stands for its *.jsonl files in name order.  A file that cannot
/// be opened, or a directory without trace files, is a warning too.
read_result read_traces(const std::vector<std::string>& paths);

/// The same, keeping only the records whose `id` is one of `ids` (each with its line in `raw`).
read_result read_traces(const std::vector<std::string>& paths, const std::vector<std::string>& ids);

/// RFC 3339 "YYYY-MM-DDTHH:MM:SS.uuuuuuZ" (the traces' `start`) as µs since the epoch, or -1.
std::int64_t parse_rfc3339_us(const std::string& s);

/// Parses one line; nullopt when it is not a valid version-1 record.  The order of a record's
/// keys does not matter; an event with both `raw` and `raw_b64` is its `raw_b64` bytes.
std::optional<record> parse_record(const std::string& line);

}  // namespace tokentap::replay
