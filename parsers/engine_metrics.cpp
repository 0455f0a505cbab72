#include "parsers/engine_metrics.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>

namespace tokentap::parsers {

namespace {

struct names {
  std::string_view prefix, running, waiting, kv, kv_old, ttft_bucket;
};

const names& names_of(engine_kind k) {
  static const names vllm{"vllm:",
                          "vllm:num_requests_running",
                          "vllm:num_requests_waiting",
                          "vllm:kv_cache_usage_perc",
                          "vllm:gpu_cache_usage_perc",
                          "vllm:time_to_first_token_seconds_bucket"};
  static const names sglang{"sglang:",
                            "sglang:num_running_reqs",
                            "sglang:num_queue_reqs",
                            "sglang:token_usage",
                            "",
                            "sglang:time_to_first_token_seconds_bucket"};
  static const names tgi{"tgi_", "tgi_batch_current_size", "tgi_queue_size", "", "", ""};
  static const names llamacpp{"llamacpp:",
                              "llamacpp:requests_processing",
                              "llamacpp:requests_deferred",
                              "llamacpp:kv_cache_usage_ratio",
                              "",
                              ""};
  static const names none{};
  switch (k) {
    case engine_kind::vllm:
      return vllm;
    case engine_kind::sglang:
      return sglang;
    case engine_kind::tgi:
      return tgi;
    case engine_kind::llamacpp:
      return llamacpp;
    case engine_kind::unknown:
      break;
  }
  return none;
}

// A sample's value: a finite number (Prometheus also writes NaN and ±Inf: no figure).
bool value_of(std::string_view v, double& out) {
  if (!v.empty() && v.front() == '+') v.remove_prefix(1);
  const auto [ptr, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
  return ec == std::errc() && ptr == v.data() + v.size() && std::isfinite(out);
}

void add(double& slot, double v) {
  slot = slot < 0 ? v : slot + v;
}

// The value of label `key` in a label set's text (between the braces); false if absent.
// Escapes are kept as written: the values read here (`le`) have none.
bool label_value(std::string_view labels, std::string_view key, std::string_view& out) {
  std::size_t i = 0;
  while (i < labels.size()) {
    while (i < labels.size() && (labels[i] == ' ' || labels[i] == ',')) ++i;
    const auto eq = labels.find('=', i);
    if (eq == std::string_view::npos || eq + 1 >= labels.size() || labels[eq + 1] != '"')
      return false;
    auto name = labels.substr(i, eq - i);
    while (!name.empty() && name.back() == ' ') name.remove_suffix(1);
    std::size_t j = eq + 2;
    for (; j < labels.size() && labels[j] != '"'; ++j)
      if (labels[j] == '\\') ++j;
    if (j >= labels.size()) return false;
    if (name == key) {
      out = labels.substr(eq + 2, j - eq - 2);
      return true;
    }
    i = j + 1;
  }
  return false;
}

// A bucket's bound: a number or +Inf.
bool bound_of(std::string_view v, double& out) {
  if (v == "+Inf" || v == "Inf" || v == "inf" || v == "+inf") {
    out = std::numeric_limits<double>::infinity();
    return true;
  }
  return value_of(v, out);
}

}  // namespace

std::string_view to_string(engine_kind k) noexcept {
  switch (k) {
    case engine_kind::vllm:
      return "vllm";
    case engine_kind::sglang:
      return "sglang";
    case engine_kind::tgi:
      return "tgi";
    case engine_kind::llamacpp:
      return "llama.cpp";
    case engine_kind::unknown:
      break;
  }
  return "";
}

bool engine_kind_of(std::string_view name, engine_kind& out) noexcept {
  for (auto k : {engine_kind::unknown, engine_kind::vllm, engine_kind::sglang, engine_kind::tgi,
                 engine_kind::llamacpp})
    if (name == (k == engine_kind::unknown ? std::string_view("auto") : to_string(k))) {
      out = k;
      return true;
    }
  return false;
}

void engine_metrics_reader::feed(std::string_view bytes) {
  while (!bytes.empty()) {
    const auto nl = bytes.find('\n');
    const auto piece = bytes.substr(0, nl);
    if (!overlong_) {
      if (partial_.size() + piece.size() > max_line_bytes) {
        overlong_ = true;
        partial_.clear();
      } else {
        partial_.append(piece);
      }
    }
    if (nl == std::string_view::npos) return;
    if (overlong_) {
      ++load_.skipped;
      overlong_ = false;
    } else {
      line(partial_);
    }
    partial_.clear();
    bytes.remove_prefix(nl + 1);
  }
}

const engine_load& engine_metrics_reader::finish() {
  if (overlong_) {
    ++load_.skipped;
  } else if (!partial_.empty()) {
    line(partial_);
  }
  partial_.clear();
  overlong_ = false;
  return load_;
}

void engine_metrics_reader::line(std::string_view l) {
  if (!l.empty() && l.back() == '\r') l.remove_suffix(1);
  const auto start = l.find_first_not_of(" \t");
  if (start == std::string_view::npos || l[start] == '#') return;  // blank, HELP, TYPE
  l.remove_prefix(start);
  // name [{labels}] value [timestamp]
  const auto name_end = l.find_first_of("{ \t");
  if (name_end == std::string_view::npos || name_end == 0) {
    ++load_.skipped;
    return;
  }
  const auto name = l.substr(0, name_end);
  auto rest = l.substr(name_end);
  std::string_view labels;
  if (rest.front() == '{') {
    // Skip the labels: quoted values may hold '}' and escaped quotes.
    bool quoted = false;
    std::size_t i = 1;
    for (; i < rest.size(); ++i) {
      const char c = rest[i];
      if (quoted) {
        if (c == '\\')
          ++i;
        else if (c == '"')
          quoted = false;
      } else if (c == '"') {
        quoted = true;
      } else if (c == '}') {
        break;
      }
    }
    if (i >= rest.size()) {
      ++load_.skipped;
      return;
    }
    labels = rest.substr(1, i - 1);
    rest.remove_prefix(i + 1);
  }
  const auto v0 = rest.find_first_not_of(" \t");
  if (v0 == std::string_view::npos) {
    ++load_.skipped;
    return;
  }
  rest.remove_prefix(v0);
  const auto v1 = rest.find_first_of(" \t");
  double v = 0;
  if (!value_of(rest.substr(0, v1), v)) {
    ++load_.skipped;
    return;
  }
  if (load_.kind == engine_kind::unknown) {
    for (auto k : {engine_kind::vllm, engine_kind::sglang, engine_kind::llamacpp, engine_kind::tgi})
      if (name.starts_with(names_of(k).prefix)) {
        load_.kind = k;
        break;
      }
    if (load_.kind == engine_kind::unknown) return;
  }
  const auto& n = names_of(load_.kind);
  if (!name.starts_with(n.prefix)) return;
  ++load_.samples;
  if (name == n.running) {
    add(load_.running, v);
  } else if (name == n.waiting) {
    add(load_.waiting, v);
  } else if (!n.kv.empty() && (name == n.kv || (!n.kv_old.empty() && name == n.kv_old))) {
    // (Several engines behind one server each report their own use: their mean.)
    if (v >= 0 && v <= 1) {
      kv_sum_ += v;
      ++kv_n_;
      load_.kv_usage = kv_sum_ / static_cast<double>(kv_n_);
    }
  } else if (!n.ttft_bucket.empty() && name == n.ttft_bucket) {
    bucket(labels, v);
  }
}

void engine_metrics_reader::bucket(std::string_view labels, double count) {
  std::string_view le_text;
  double le = 0;
  if (count < 0 || !label_value(labels, "le", le_text) || !bound_of(le_text, le) || le < 0) {
    ++load_.skipped;
    return;
  }
  auto& b = load_.ttft;
  const auto at = std::lower_bound(b.begin(), b.end(), le,
                                   [](const histogram_bucket& x, double v) { return x.le < v; });
  if (at != b.end() && at->le == le) {
    if (!std::isfinite(at->count + count)) {
      ++load_.skipped;
      return;
    }
    at->count += count;
  } else if (b.size() < engine_load::max_buckets) {
    b.insert(at, {le, count});
  } else {
    ++load_.skipped;
  }
}

double bucket_quantile(double q, const std::vector<histogram_bucket>& b) noexcept {
  if (b.empty() || !std::isinf(b.back().le)) return -1;
  // A count below an earlier bucket's (a garbled text) is taken as that one, as Prometheus does.
  double total = 0;
  for (const auto& x : b) total = std::max(total, x.count);
  if (!(total > 0) || !std::isfinite(total)) return -1;
  const double rank = std::clamp(q, 0.0, 1.0) * total;
  double lower = 0, below = 0;
  for (std::size_t i = 0; i < b.size(); ++i) {
    const double count = std::max(b[i].count, below);
    if (count >= rank && count > below) {
      if (std::isinf(b[i].le)) return i > 0 ? b[i - 1].le : -1;
      // (Rounding may not carry the value past its bucket's bound.)
      return std::min(b[i].le, lower + (b[i].le - lower) * ((rank - below) / (count - below)));
    }
    lower = b[i].le;
    below = count;
  }
  return -1;
}

bool bucket_delta(const std::vector<histogram_bucket>& now,
                  const std::vector<histogram_bucket>& before, std::vector<histogram_bucket>& out) {
  out.clear();
  if (now.size() != before.size()) return false;
  for (std::size_t i = 0; i < now.size(); ++i) {
    if (now[i].le != before[i].le || now[i].count < before[i].count) {
      out.clear();
      return false;
    }
    out.push_back({now[i].le, now[i].count - before[i].count});
  }
  return true;
}

}  // namespace tokentap::parsers
