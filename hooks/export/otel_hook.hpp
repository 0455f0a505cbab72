#pragma once
// The `otel` hook (DESIGN.md §12): W3C trace context in, two spans out per exchange.
//
// Request phase: the client's `traceparent` (if valid) is continued, else a new trace starts;
// sampling is parent-based (a client's sampled flag is followed, a new trace is kept with
// `otel.sample_rate`, decided on its trace id so every instance agrees).  The upstream request
// gets the CLIENT span's `traceparent`; `tracestate` and `baggage` go on as the client sent
// them.  At stream end a sampled exchange becomes a SERVER span (the request as the proxy
// received it) and its child CLIENT span `chat {model}` (the call to the inference API, GenAI
// semantic conventions, tokentap's own facts under `tokentap.*`, steps and cache events as span
// events), handed to a span_sink that never blocks.
#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config/config.hpp"
#include "hooks/export/otlp.hpp"
#include "hooks/hook.hpp"
#include "hooks/registry.hpp"

namespace tokentap::hooks {

/// A W3C `traceparent` (trace-context level 1).
struct trace_parent {
  otel_trace_id trace_id{};
  otel_span_id parent_id{};
  std::uint8_t flags = 0;  ///< bit 0: sampled
  bool sampled() const noexcept { return (flags & 1) != 0; }
};

/// Parses a `traceparent` value: version 00 exactly (`00-<32 hex>-<16 hex>-<2 hex>`), a later
/// version by its first four fields; lowercase hex, neither id all zeros, version not ff.
/// nullopt: not a valid one (the proxy then starts a new trace).
std::optional<trace_parent> parse_traceparent(std::string_view v) noexcept;
/// `00-<trace id>-<span id>-<flags>`.
std::string format_traceparent(const otel_trace_id& t, const otel_span_id& s, std::uint8_t flags);

/// Where the spans go: the exporter (proxy/otlp_exporter.hpp), or a test's collector.
class span_sink {
 public:
  virtual ~span_sink() = default;
  /// Takes one exchange's spans; never blocks (a full queue drops them, counted).  Any thread.
  virtual void export_spans(std::vector<otel_span> spans) noexcept = 0;
};

class otel_hook_factory final : public hook_factory {
 public:
  otel_hook_factory(const config::otel_config& cfg, std::shared_ptr<span_sink> sink);
  std::unique_ptr<hook> create() override;

  /// Whether a new trace with this id is kept, at rate `r` (the id's last 8 bytes against r·2^64).
  static bool keep(const otel_trace_id& id, double r) noexcept;

 private:
  const config::otel_config* cfg_;
  std::shared_ptr<span_sink> sink_;
};

/// Registers "otel" (skipped while no `span_sinks` are given or no endpoint is configured).  One
/// exporter per registry and `otel:` configuration, as the trace writer.
void register_otel(hook_registry& r, span_sink_maker span_sinks);

}  // namespace tokentap::hooks
