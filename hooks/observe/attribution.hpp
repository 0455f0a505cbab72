#pragma once
// Where an exchange's time went (DESIGN.md §13): its end to end cut into the proxy's phases on
// the one monotonic clock, the engine's own account beside them, and what neither explains.
#include <array>
#include <cstdint>
#include <optional>
#include <string_view>

#include "hooks/tap.hpp"
#include "parsers/stream_decoder.hpp"

namespace tokentap::hooks {

/// The proxy's phases, in the trace record's order.  They partition end to end: each runs from
/// its boundary (phase_marks, the response head, the first token) to the next boundary the
/// exchange reached, the last one reached to the end.  So a request answered without forwarding
/// is all `proxy`; one whose upstream never answered ends in `connect` or `upstream_head`; a
/// non-streamed answer's tokens come with its last byte, so `first_token` runs from the head to
/// the end and `decode` is unknown.
enum class phase : std::uint8_t {
  proxy,            ///< request read -> our own work done (inspection, hooks, routing)
  connect,          ///< resolve, TCP, TLS for the attempt used (0 on a pooled connection)
  failed_attempts,  ///< attempts that failed over to another endpoint
  fault,            ///< a delay injected before forwarding
  upstream_head,    ///< request written -> response head
  first_token,      ///< response head -> first token
  decode,           ///< first token -> end of the response
};
inline constexpr std::size_t phase_count = 7;
/// The phase's name without `_ms` (the metric's `phase` label).
std::string_view to_string(phase p) noexcept;

/// One exchange's attribution, in milliseconds; nullopt = not known (never a guess).
struct attribution {
  std::array<std::optional<double>, phase_count> phases{};
  /// Time writes to the client took (a slow client blocks them), beside the phases: it lies
  /// inside `decode` (the relay reads the next bytes once the client took the last ones).
  std::optional<double> client_wait_ms;
  /// The engine's account (its source none when the upstream gave none), and the prompt it
  /// reported: all its tokens and the cached part.
  parsers::engine_account engine;
  std::int64_t engine_prompt_tokens = -1, engine_cached_tokens = -1;
  /// Request written -> first token (a non-streamed answer: its end), less the engine's queue,
  /// load and prefill (and decode, for a non-streamed answer): the network and the engine's
  /// HTTP front end — and, where the engine reports no queue (llama.cpp), its slot wait.
  /// Known when the engine reported its prefill (or TGI its inference) and a head came.
  std::optional<double> unexplained_ms;

  std::optional<double> operator[](phase p) const noexcept {
    return phases[static_cast<std::size_t>(p)];
  }
  /// The phases before the first token, summed: TTFT as the proxy measured it, when known.
  std::optional<double> ttft_ms() const noexcept;
};

/// What the attribution is made of, beside the proxy's phase_marks.
struct attribution_input {
  mono_ns start_ns = 0, head_ns = 0, first_token_ns = -1, end_ns = 0;  ///< head 0: none
  mono_ns client_wait_ns = -1;  ///< -1: the response body was never relayed
  const parsers::engine_account* engine = nullptr;
  std::int64_t prompt_tokens = -1, cached_tokens = -1;
};

attribution attribute(const phase_marks& m, const attribution_input& in) noexcept;

}  // namespace tokentap::hooks
