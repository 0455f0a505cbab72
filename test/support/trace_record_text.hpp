#pragma once
// A trace record as read back (replay::record), as one comparable string: every field, with the
// header lists in name order (a JSON object's member order carries no meaning).  Header-only and
// free of GoogleTest so the fuzz targets can use it.
#include <algorithm>
#include <string>

#include "replay/trace_reader.hpp"

namespace tokentap::test {

inline std::string describe(const replay::record& r) {
  auto n = [](auto v) { return std::to_string(v); };
  auto headers = [](auto list) {
    std::sort(list.begin(), list.end());
    std::string out;
    for (const auto& [k, v] : list) out += k + "=" + v + ";";
    return out;
  };
  std::string out = "id=" + r.id + "|start=" + r.start + "|" + n(r.start_us) + "|route=" + r.route +
                    "|provider=" + r.provider + "|model=" + r.model + "|outcome=" + r.outcome +
                    "|error=" + r.error_type + "|" + r.method + " " + r.path +
                    "|body=" + (r.body ? *r.body : "(null)") +
                    "|request_headers=" + headers(r.request_headers) + "|status=" + n(r.status) +
                    "|response_headers=" + headers(r.response_headers) + "|timing=" + n(r.ttft_ms) +
                    "," + n(r.ttft_answer_ms) + "," + n(r.e2e_ms) + "," + n(r.upstream_headers_ms) +
                    "," + n(r.itl_p50) + "," + n(r.itl_p95) + "," + n(r.itl_p99) + "," +
                    n(r.overhead_p50) + "," + n(r.overhead_p99) + "," + n(r.tokens_per_s) + "," +
                    n(r.stalls) + "|itl=";
  for (double v : r.itl_values_ms) out += n(v) + ",";
  out += "|usage=" + n(r.input_tokens) + "," + n(r.output_tokens) + "," + n(r.reasoning_tokens) +
         "," + n(r.cached_input_tokens) + "|choices=" + n(r.choices) + "|events=";
  for (const auto& e : r.events) out += n(e.t_us) + ":" + e.bytes + ";";
  out += "|steps=";
  for (const auto& s : r.steps) out += s.kind + "," + n(s.tokens) + "," + n(s.redundant) + ";";
  out += "|redundant=" + n(r.redundant_tokens) + "|cache=";
  for (const auto& c : r.cache) out += c.event + ";";
  return out;
}

}  // namespace tokentap::test
