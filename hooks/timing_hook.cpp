#include "hooks/timing_hook.hpp"

#include <algorithm>
#include <cmath>

namespace tokentap::hooks {

timing_summary::quantiles quantiles_of(std::vector<double>& v) {
  timing_summary::quantiles q;
  q.count = v.size();
  if (v.empty()) return q;
  std::sort(v.begin(), v.end());
  auto at = [&](double p) {
    const auto rank = static_cast<std::size_t>(std::ceil(p * static_cast<double>(v.size())));
    return v[std::min(v.size() - 1, rank == 0 ? 0 : rank - 1)];
  };
  q.p50 = at(0.50);
  q.p95 = at(0.95);
  q.p99 = at(0.99);
  q.max = v.back();
  return q;
}

namespace {

double ms(mono_ns a, mono_ns b) {
  return static_cast<double>(b - a) / 1e6;
}

class timing_hook final : public hook {
 public:
  explicit timing_hook(const config::timing_config& cfg)
      : stall_ns_(
            std::chrono::duration_cast<std::chrono::nanoseconds>(cfg.stall_threshold).count()) {}

  void on_body(std::string_view, mono_ns read_ns, mono_ns written_ns) override {
    overhead_ms_.push_back(ms(read_ns, written_ns));
  }

  void on_token(const token_event& e) override {
    ++tokens_;
    if (!e.streamed) return;  // a whole-JSON body has no per-token timing
    if (first_ns_ < 0) first_ns_ = e.t_ns;
    if (e.channel == parsers::channel::content && first_content_ns_ < 0) first_content_ns_ = e.t_ns;
    if (last_ns_ >= 0) {
      const auto gap = e.t_ns - last_ns_;
      gaps_.push_back(static_cast<double>(gap) / 1e6);
      if (e.channel == parsers::channel::reasoning)
        reasoning_gaps_.push_back(gaps_.back());
      else if (e.channel == parsers::channel::content)
        content_gaps_.push_back(gaps_.back());
      if (gap > stall_ns_) ++stalls_;
    }
    last_ns_ = e.t_ns;
  }

  void on_stream_end(stream_summary& s) override {
    auto& t = s.timing;
    if (s.head_ns > 0) t.upstream_headers_ms = ms(s.start_ns, s.head_ns);
    if (first_ns_ >= 0) t.ttft_ms = ms(s.start_ns, first_ns_);
    if (first_content_ns_ >= 0) t.ttft_answer_ms = ms(s.start_ns, first_content_ns_);
    t.e2e_ms = ms(s.start_ns, s.end_ns);
    if (first_ns_ >= 0 && last_ns_ > first_ns_) {
      t.decode_ms = ms(first_ns_, last_ns_);
      const auto out =
          s.usage.output_tokens > 0 ? s.usage.output_tokens : static_cast<std::int64_t>(tokens_);
      if (out > 1) {
        t.tpot_ms = t.decode_ms / static_cast<double>(out - 1);
        t.tokens_per_s = static_cast<double>(out - 1) / (t.decode_ms / 1000.0);
      }
    }
    t.stalls = stalls_;
    t.itl_values_ms = gaps_;
    t.itl = quantiles_of(gaps_);
    t.itl_content = quantiles_of(content_gaps_);
    t.itl_reasoning = quantiles_of(reasoning_gaps_);
    t.overhead = quantiles_of(overhead_ms_);
  }

 private:
  std::int64_t stall_ns_;
  mono_ns first_ns_ = -1, first_content_ns_ = -1, last_ns_ = -1;
  std::uint64_t tokens_ = 0, stalls_ = 0;
  std::vector<double> gaps_, content_gaps_, reasoning_gaps_, overhead_ms_;
};

}  // namespace

std::unique_ptr<hook> timing_hook_factory::create() {
  return std::make_unique<timing_hook>(cfg_);
}

}  // namespace tokentap::hooks
