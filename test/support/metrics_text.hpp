#pragma once
// Reads Prometheus text format (what /metrics serves) into samples for assertions.
#include <map>
#include <string>
#include <vector>

namespace tokentap::test {

struct sample {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
};

std::vector<sample> parse_metrics(const std::string& text);

/// Sum of the samples named `name` whose labels include every pair of `match`.
double metric_sum(const std::vector<sample>& s, const std::string& name,
                  const std::map<std::string, std::string>& match = {});

/// The value of the one sample written exactly as `series` (`name` or `name{labels}`, labels as
/// the text has them) on a line of its own; -1 when there is none.
double series_value(const std::string& text, const std::string& series);

/// Runs `promtool check metrics` on `text`; returns its exit status and output.
std::pair<int, std::string> promtool_check(const std::string& text);

}  // namespace tokentap::test
