#include "parsers/engine_metrics.hpp"

#include <charconv>
#include <cmath>

namespace tokentap::parsers {

namespace {

struct names {
  std::string_view prefix, running, waiting, kv, kv_old;
};

const names& names_of(engine_kind k) {
  static const names vllm{"vllm:", "vllm:num_requests_running", "vllm:num_requests_waiting",
                          "vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"};
  static const names sglang{"sglang:", "sglang:num_running_reqs", "sglang:num_queue_reqs",
                            "sglang:token_usage", ""};
  static const names tgi{"tgi_", "tgi_batch_current_size", "tgi_queue_size", "", ""};
  static const names llamacpp{"llamacpp:", "llamacpp:requests_processing",
                              "llamacpp:requests_deferred", "llamacpp:kv_cache_usage_ratio", ""};
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
  }
}

}  // namespace tokentap::parsers
