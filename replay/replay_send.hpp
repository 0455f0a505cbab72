#pragma once
// `tokentap replay send`: re-issues recorded requests against a target, measures every response
// exactly as the proxy does (the same decoders and timing hook), and compares recorded with
// replayed P50/P95/P99.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "replay/trace_reader.hpp"

namespace tokentap::replay {

struct send_options {
  std::string host = "127.0.0.1";
  std::uint16_t port = 8080;
  double speed = 1.0;        ///< recorded arrival pattern, sped up by this factor
  unsigned concurrency = 0;  ///< > 0: a closed loop of N clients instead of the recorded pattern
  double rate = 0;           ///< > 0: an open loop at R requests per second
  std::vector<std::pair<std::string, std::string>>
      headers;            ///< added to every request (credentials)
  bool progress = false;  ///< draw a progress bar on stderr
};

struct measured {
  std::string id;                ///< of the recorded exchange
  std::string recorded_outcome;  ///< and how it ended then (`outcome`, or "status N")
  bool recorded_ok = true;
  int status = 0;
  bool ok = false;
  std::string outcome;  ///< how it ended now: ok, stream_error, upstream_reset, no_response …
  std::string error;
  double ttft_ms = -1, ttft_answer_ms = -1, e2e_ms = -1, itl_median_ms = -1, tokens_per_s = -1;
};

struct send_result {
  std::vector<measured> replayed;
  std::size_t failed = 0;              ///< every replayed request that failed
  std::size_t failed_as_recorded = 0;  ///< of those, the ones whose record had failed too
  std::size_t failed_anew = 0;         ///< of those, the ones whose record was ok
  std::size_t recovered = 0;           ///< recorded failures that now succeed
  /// One line per request that failed (anew first) or recovered: id, recorded, replayed.
  std::string failures;
  /// Side-by-side table (text) and the same as JSON.
  std::string table, json;
};

send_result send(const std::vector<record>& records, const send_options& opts);

/// Whether a recorded exchange failed: an outcome other than ok, or a status of 400 and up.
bool failed(const record& r) noexcept;

}  // namespace tokentap::replay
