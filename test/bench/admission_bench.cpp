// What admission costs per request with local state (the goal: at most 1 µs): naming the tenant,
// the decision and its settlement at stream end, with one rule and with three (tenant rates and
// tokens, a route cap, a global cap), over many tenants.
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "hooks/admission.hpp"
#include "hooks/tenants.hpp"

namespace {

using namespace tokentap;
using rule = config::admission_rule;

void BM_AdmitAndSettle(benchmark::State& state) {
  config::config cfg;
  cfg.routes = {{"chat", "/v1/", "up", 0}};
  cfg.admission = {{.name = "per-tenant",
                    .max_concurrent = 1000,
                    .requests_per_minute = 100000000,
                    .tokens_per_minute = std::uint64_t{1} << 40}};
  if (state.range(0) == 3) {
    cfg.admission.push_back(
        {.name = "fleet-cap", .scope = rule::scope_kind::route, .max_concurrent = 100000});
    cfg.admission.push_back(
        {.name = "global", .scope = rule::scope_kind::global, .requests_per_minute = 100000000});
  }
  hooks::admission_state s(cfg, nullptr);
  hooks::tenant_names names(cfg.tenants.max);
  std::vector<std::string> tenants;
  for (int i = 0; i < 100; ++i) tenants.push_back("tenant-" + std::to_string(i));
  std::size_t i = 0;
  for (auto _ : state) {
    const auto now = std::chrono::steady_clock::now();
    const auto tenant = names.name_of(tenants[i++ % tenants.size()], 0);
    hooks::admission_state::facts f{tenant, "chat", "m", 500, 256};
    hooks::admission_state::ticket t;
    hooks::admission_state::refusal r;
    benchmark::DoNotOptimize(s.admit(f, t, r, now));
    s.settle(t, 700, now);
  }
}
BENCHMARK(BM_AdmitAndSettle)->Arg(1)->Arg(3);

}  // namespace

BENCHMARK_MAIN();
