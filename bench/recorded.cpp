#include "bench/recorded.hpp"

#include <algorithm>

#include "replay/trace_reader.hpp"

namespace tokentap::bench {

std::optional<std::vector<task>> recorded_tasks(const std::string& dir, std::size_t& skipped,
                                                std::string& error) {
  auto read = replay::read_traces({dir});
  skipped = read.skipped;
  auto& records = read.records;
  std::erase_if(records, [](const replay::record& r) { return r.start_us < 0 || r.path.empty(); });
  if (records.empty()) {
    error = dir + ": no trace records to replay";
    if (!read.warnings.empty()) error += " (" + read.warnings.front() + ")";
    return std::nullopt;
  }
  std::stable_sort(records.begin(), records.end(),
                   [](const auto& a, const auto& b) { return a.start_us < b.start_us; });
  std::vector<task> out;
  out.reserve(records.size());
  const auto first = records.front().start_us;
  for (auto& r : records) {
    const bool has_body = r.method == "GET" || r.method == "HEAD" || r.body.has_value();
    if (!has_body) {
      error = dir + ": record " + r.id +
              " has no request body (traced with trace.bodies off, or over its size limit): it "
              "cannot be replayed";
      return std::nullopt;
    }
    task t;
    t.id = r.id;
    t.method = r.method.empty() ? "POST" : r.method;
    t.path = std::move(r.path);
    t.body = r.body ? std::move(*r.body) : std::string();
    t.at_s = static_cast<double>(r.start_us - first) / 1e6;
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace tokentap::bench
