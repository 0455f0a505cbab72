#include "hooks/observe/attribution.hpp"

#include <algorithm>

namespace tokentap::hooks {

std::string_view to_string(phase p) noexcept {
  switch (p) {
    case phase::proxy:
      return "proxy";
    case phase::connect:
      return "connect";
    case phase::failed_attempts:
      return "failed_attempts";
    case phase::fault:
      return "fault";
    case phase::upstream_head:
      return "upstream_head";
    case phase::first_token:
      return "first_token";
    case phase::decode:
      return "decode";
  }
  return "";
}

std::optional<double> attribution::ttft_ms() const noexcept {
  if (!(*this)[phase::decode]) return std::nullopt;  // no streamed first token
  double sum = 0;
  for (std::size_t i = 0; i < phase_count; ++i)
    if (static_cast<phase>(i) != phase::decode && phases[i]) sum += *phases[i];
  return sum;
}

attribution attribute(const phase_marks& m, const attribution_input& in) noexcept {
  attribution a;
  // The boundaries in time order, each the start of one phase; -1: not reached.
  struct boundary {
    mono_ns t;
    phase starts;
  };
  std::array<boundary, phase_count> b = {{{in.start_ns, phase::proxy},
                                          {m.routed, phase::fault},
                                          {m.fault_done, phase::failed_attempts},
                                          {m.attempt, phase::connect},
                                          {m.connected, phase::upstream_head},
                                          {in.head_ns > 0 ? in.head_ns : -1, phase::first_token},
                                          {in.first_token_ns, phase::decode}}};
  // One clock, but stamps taken at different places (a token's arrival is the kernel's, which
  // can precede the head's read): each boundary is held within [the one before, the end].
  mono_ns floor = in.start_ns;
  for (auto& x : b) {
    if (x.t < 0) continue;
    x.t = std::clamp(x.t, floor, std::max(floor, in.end_ns));
    floor = x.t;
  }
  const auto ms = [](mono_ns ns) { return static_cast<double>(ns) / 1e6; };
  for (std::size_t i = 0; i < b.size(); ++i) {
    if (b[i].t < 0) continue;
    mono_ns next = std::max(in.end_ns, b[i].t);
    for (std::size_t j = i + 1; j < b.size(); ++j)
      if (b[j].t >= 0) {
        next = b[j].t;
        break;
      }
    a.phases[static_cast<std::size_t>(b[i].starts)] = ms(next - b[i].t);
  }
  if (in.client_wait_ns >= 0) a.client_wait_ms = ms(in.client_wait_ns);

  if (in.engine == nullptr || !in.engine->reported()) return a;
  const auto& e = *in.engine;
  a.engine = e;
  a.engine_prompt_tokens = in.prompt_tokens;
  a.engine_cached_tokens = in.cached_tokens;
  // Request written -> first token (or, without a streamed one, the end), against what the
  // engine says it spent in that time.
  const auto head = a[phase::upstream_head], first = a[phase::first_token];
  if (!head || !first) return a;
  const bool streamed = a[phase::decode].has_value();
  double engine_ms = std::max(0.0, e.queue_ms) + std::max(0.0, e.load_ms);
  if (e.prefill_ms >= 0 && (streamed || e.decode_ms >= 0)) {
    engine_ms += e.prefill_ms + (streamed ? 0.0 : e.decode_ms);
  } else if (!streamed && e.inference_ms >= 0) {
    engine_ms += e.inference_ms;
  } else {
    return a;
  }
  a.unexplained_ms = *head + *first - engine_ms;
  return a;
}

}  // namespace tokentap::hooks
