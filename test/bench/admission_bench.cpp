// What admission costs per request (the goal: at most 1 µs with local state): naming the tenant,
// the decision and its settlement at stream end, with one rule and with three (tenant rates and
// tokens, a route cap, a global cap), over many tenants — locally, and with the budgets shared
// through a real redis-server (started here on a free port), where the request path does no
// round trip and a sync thread exchanges every budget's use in one pipelined round trip, whose
// latency BM_RedisExchange measures by the number of budgets.
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include <unistd.h>

#include "hooks/govern/admission.hpp"
#include "hooks/govern/tenants.hpp"
#include "store/redis_budgets.hpp"
#include "test/support/redis_server.hpp"

namespace {

using namespace tokentap;
using rule = hooks::admission_rule;

// A redis-server for the shared-state benchmarks, started once.
std::uint16_t redis_port() {
  static test::redis_server* redis = new test::redis_server();  // (lives as long as the process)
  return redis->running() ? redis->port() : 0;
}

void BM_AdmitAndSettle(benchmark::State& state) {
  config::config cfg;
  const bool shared = state.range(1) != 0;
  if (shared) {
    cfg.shared_state.redis_host = "127.0.0.1";
    cfg.shared_state.redis_port = redis_port();
    cfg.shared_state.key_prefix = "bench:" + std::to_string(::getpid()) + ":";
  }
  cfg.routes = {{"chat", "/v1/", "up", 0}};
  hooks::admission_settings settings;
  settings.rules = {{.name = "per-tenant",
                     .max_concurrent = 1000,
                     .requests_per_minute = 100000000,
                     .tokens_per_minute = std::uint64_t{1} << 40}};
  if (state.range(0) == 3) {
    settings.rules.push_back(
        {.name = "fleet-cap", .scope = rule::scope_kind::route, .max_concurrent = 100000});
    settings.rules.push_back(
        {.name = "global", .scope = rule::scope_kind::global, .requests_per_minute = 100000000});
  }
  hooks::admission_state s(settings, cfg);
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
BENCHMARK(BM_AdmitAndSettle)
    ->ArgNames({"rules", "redis"})
    ->Args({1, 0})
    ->Args({3, 0})
    ->Args({1, 1})
    ->Args({3, 1});

void BM_RedisExchange(benchmark::State& state) {
  config::shared_state_config c;
  c.redis_host = "127.0.0.1";
  c.redis_port = redis_port();
  c.key_prefix = "bench:" + std::to_string(::getpid()) + ":x:";
  store::redis_budgets redis(c);
  std::vector<store::redis_budgets::budget> budgets;
  for (int i = 0; i < state.range(0); ++i)
    budgets.push_back({"rule:tenant-" + std::to_string(i) + ":t", 1e6, 1e6 / 60000, 3});
  for (auto _ : state)
    if (!redis.exchange(budgets)) state.SkipWithError("redis unreachable");
  state.counters["budgets"] = static_cast<double>(state.range(0));
}
BENCHMARK(BM_RedisExchange)->Arg(1)->Arg(10)->Arg(100)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
