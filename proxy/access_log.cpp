#include "proxy/access_log.hpp"

#include "base/log.hpp"
#include "proxy/proxy_server.hpp"
#include "proxy/request_plan.hpp"

namespace tokentap::proxy {

namespace {

double ms_between(clock::time_point a, clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

}  // namespace

void write_access_log(const exchange& ex, std::string_view peer) {
  if (!ex.gen->cfg.access_log || !base::log::enabled(base::log::level::info)) return;
  const auto end = clock::now();
  base::log::line l(base::log::level::info);
  l << "access peer=" << peer << " method=" << log_safe(ex.method, 16)
    << " path=" << log_safe(ex.target_redacted, 512)
    << " route=" << (ex.route ? ex.route->name : std::string("-")) << " status=" << ex.status
    << " outcome=" << hooks::to_string(ex.outcome);
  if (!ex.model.empty()) l << " model=" << log_safe(ex.model);
  if (ex.stream_requested) l << " stream=1";
  if (ex.first_byte) l << " ttfb_ms=" << ms_between(ex.start, *ex.first_byte);
  l << " dur_ms=" << ms_between(ex.start, end) << " bytes=" << ex.body_bytes
    << " conn=" << (ex.reused_connection ? "reused" : "new");
}

}  // namespace tokentap::proxy
