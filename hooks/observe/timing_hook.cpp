#include "hooks/observe/timing_hook.hpp"

#include <algorithm>
#include <cmath>

#include "hooks/observe/metrics.hpp"  // quantile_sketch
#include "hooks/registry.hpp"

namespace tokentap::hooks {

timing_summary::quantiles quantiles_of(std::vector<double>& v) {
  timing_summary::quantiles q;
  q.count = v.size();
  if (v.empty()) return q;
  auto index = [&](double p) {
    const auto rank = static_cast<std::size_t>(std::ceil(p * static_cast<double>(v.size())));
    return static_cast<std::ptrdiff_t>(std::min(v.size() - 1, rank == 0 ? 0 : rank - 1));
  };
  // Three selections, each in what the previous one left above its rank (linear time; a full
  // sort of every series was a sixth of a stream's end).
  const auto b = v.begin();
  const auto i50 = index(0.50), i95 = index(0.95), i99 = index(0.99);
  std::nth_element(b, b + i50, v.end());
  q.p50 = b[i50];  // read before the next selection moves it
  std::nth_element(b + i50, b + i95, v.end());
  q.p95 = b[i95];
  std::nth_element(b + i95, b + i99, v.end());
  q.p99 = b[i99];
  q.max = *std::max_element(b + i99, v.end());
  return q;
}

namespace {

double ms(mono_ns a, mono_ns b) {
  return static_cast<double>(b - a) / 1e6;
}

// One series of a stream's samples: the first `cap` kept exactly and in order (exact quantiles,
// the trace's itl_values_ms), every one counted into a quantile sketch (2 % relative error) once
// there are more — a stream's memory stays bounded however long it runs.
class sample_series {
 public:
  explicit sample_series(std::size_t cap) : cap_(cap == 0 ? 1 : cap) {}

  void add(double v) {
    ++count_;
    if (count_ == 1 || v > max_) max_ = v;
    if (values_.size() < cap_) {
      // One allocation for the first 32 values instead of six doublings to get there.
      if (values_.capacity() == 0) values_.reserve(std::min<std::size_t>(cap_, 32));
      values_.push_back(v);
      return;
    }
    if (count_ == cap_ + 1)  // the first value past the cap: the sketch takes over
      for (double x : values_) sketch_.add(x);
    sketch_.add(v);
  }

  const std::vector<double>& first() const noexcept { return values_; }
  std::uint64_t count() const noexcept { return count_; }

  /// Consumes the exact values (reordered for the quantiles).
  timing_summary::quantiles summary() {
    if (count_ <= cap_) return quantiles_of(values_);
    timing_summary::quantiles q;
    q.count = count_;
    q.max = max_;
    q.p50 = std::min(sketch_.quantile(0.50), max_);
    q.p95 = std::min(sketch_.quantile(0.95), max_);
    q.p99 = std::min(sketch_.quantile(0.99), max_);
    return q;
  }

 private:
  std::size_t cap_;
  std::vector<double> values_;
  quantile_sketch sketch_;
  std::uint64_t count_ = 0;
  double max_ = 0;
};

class timing_hook final : public hook {
 public:
  explicit timing_hook(const timing_settings& cfg)
      : stall_ns_(
            std::chrono::duration_cast<std::chrono::nanoseconds>(cfg.stall_threshold).count()),
        gaps_(cfg.exact_samples),
        content_gaps_(cfg.exact_samples),
        reasoning_gaps_(cfg.exact_samples),
        overhead_ms_(cfg.exact_samples) {}

  // Gaps between streamed tokens and per-read overheads, measured by the chain.
  void on_samples(std::span<const sample> batch, mono_ns) override {
    for (const auto smp : batch) {
      const double v = smp.ms();
      switch (smp.kind()) {
        case sample::overhead:
          overhead_ms_.add(v);
          continue;
        case sample::itl_content:
          content_gaps_.add(v);
          break;
        case sample::itl_reasoning:
          reasoning_gaps_.add(v);
          break;
        case sample::itl_tool:
          break;
      }
      gaps_.add(v);
      if (smp.ns() > stall_ns_) ++stalls_;
    }
  }

  unsigned per_event() const noexcept override { return sample_calls; }

  void fill(stream_info& s) override {
    auto& t = s.timing;
    const auto first = s.first_token_ns, last = s.last_token_ns;
    if (s.head_ns > 0) t.upstream_headers_ms = ms(s.start_ns, s.head_ns);
    if (first >= 0) t.ttft_ms = ms(s.start_ns, first);
    if (s.first_content_ns >= 0) t.ttft_answer_ms = ms(s.start_ns, s.first_content_ns);
    t.e2e_ms = ms(s.start_ns, s.end_ns);
    if (first >= 0 && last > first) {
      t.decode_ms = ms(first, last);
      const auto out = s.usage.output_tokens > 0 ? s.usage.output_tokens
                                                 : static_cast<std::int64_t>(s.token_events);
      if (out > 1) {
        t.tpot_ms = t.decode_ms / static_cast<double>(out - 1);
        t.tokens_per_s = static_cast<double>(out - 1) / (t.decode_ms / 1000.0);
      }
    }
    t.stalls = stalls_;
    t.itl_values_ms = gaps_.first();  // before summary() reorders them
    t.itl = gaps_.summary();
    // A channel's gaps are a subset of all gaps: when it has all of them (an answer without
    // reasoning, or reasoning only), its quantiles are the ones just computed.
    const auto same_as_all = [&](sample_series& c) {
      return c.count() == t.itl.count ? t.itl : c.summary();
    };
    t.itl_content = same_as_all(content_gaps_);
    t.itl_reasoning = same_as_all(reasoning_gaps_);
    t.overhead = overhead_ms_.summary();
  }

 private:
  std::int64_t stall_ns_;
  std::uint64_t stalls_ = 0;
  sample_series gaps_, content_gaps_, reasoning_gaps_, overhead_ms_;
};

}  // namespace

std::unique_ptr<hook> timing_hook_factory::create() {
  return std::make_unique<timing_hook>(settings_);
}

timing_settings timing_settings::parse(const config::section& s) {
  timing_settings t;
  if (!s) return t;
  s.check_keys({"stall_threshold_ms", "exact_samples"}, "timing");
  if (const auto& v = s["stall_threshold_ms"])
    t.stall_threshold = std::chrono::milliseconds(v.non_negative("stall_threshold_ms"));
  if (const auto& v = s["exact_samples"]) {
    t.exact_samples = v.non_negative("exact_samples");
    if (t.exact_samples == 0 || t.exact_samples > (1u << 20))
      v.fail("timing.exact_samples must be 1 .. 1048576");
  }
  return t;
}

void register_timing(hook_registry& r) {
  r.add_with_settings<timing_settings>(
      "timing", &timing_settings::parse,
      [](const config::config&, const timing_settings& t) -> std::shared_ptr<hook_factory> {
        return std::make_shared<timing_hook_factory>(t);
      },
      {.provides = {"timing"}, .needs = {}, .reads = {}});
}

}  // namespace tokentap::hooks
