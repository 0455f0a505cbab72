#include "test/support/metrics_text.hpp"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "test/support/tls_cert.hpp"

namespace tokentap::test {

std::vector<sample> parse_metrics(const std::string& text) {
  std::vector<sample> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    sample s;
    auto brace = line.find('{');
    auto space = line.rfind(' ');
    if (brace != std::string::npos && brace < space) {
      s.name = line.substr(0, brace);
      const auto close = line.find('}', brace);
      std::string labels = line.substr(brace + 1, close - brace - 1);
      std::size_t pos = 0;
      while (pos < labels.size()) {
        const auto eq = labels.find('=', pos);
        const auto q1 = labels.find('"', eq);
        auto q2 = q1 + 1;
        while (q2 < labels.size() && !(labels[q2] == '"' && labels[q2 - 1] != '\\')) ++q2;
        s.labels[labels.substr(pos, eq - pos)] = labels.substr(q1 + 1, q2 - q1 - 1);
        pos = q2 + 2;
      }
    } else {
      s.name = line.substr(0, space);
    }
    s.value = std::strtod(line.c_str() + space + 1, nullptr);
    out.push_back(std::move(s));
  }
  return out;
}

double metric_sum(const std::vector<sample>& samples, const std::string& name,
                  const std::map<std::string, std::string>& match) {
  double total = 0;
  for (const auto& s : samples) {
    if (s.name != name) continue;
    bool ok = true;
    for (const auto& [k, v] : match) {
      auto it = s.labels.find(k);
      if (it == s.labels.end() || it->second != v) ok = false;
    }
    if (ok) total += s.value;
  }
  return total;
}

std::pair<int, std::string> promtool_check(const std::string& text) {
  const auto dir = temp_dir();
  std::ofstream(dir + "/metrics.txt") << text;
  const std::string cmd = "promtool check metrics < " + dir + "/metrics.txt 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return {-1, "cannot run promtool"};
  std::string out;
  char buf[512];
  while (auto n = fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  const int st = pclose(p);
  return {WIFEXITED(st) ? WEXITSTATUS(st) : -1, out};
}

double series_value(const std::string& text, const std::string& series) {
  const auto at = ("\n" + text).find("\n" + series + " ");
  return at == std::string::npos ? -1 : std::stod(text.substr(at + series.size() + 1));
}

}  // namespace tokentap::test
