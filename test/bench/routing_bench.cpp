// What choosing an endpoint costs per request (the goal: at most 2 µs at 8 endpoints): each
// balancer's first pick, a retry's pick (one endpoint tried), and a pick with an endpoint ejected,
// at 2 and 8 endpoints, with exchanges in flight spread over them.
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "proxy/cluster.hpp"

namespace {

using namespace tokentap;

config::upstream_config fleet(int n, config::balance_policy p) {
  config::upstream_config up;
  up.name = "fleet";
  up.balance = p;
  up.outlier.consecutive_failures = 1;
  for (int i = 0; i < n; ++i) {
    std::string err;
    up.endpoints.push_back(
        *config::parse_url("http://10.0.0." + std::to_string(i + 1) + ":8000", err));
  }
  return up;
}

// Arg 0: endpoints; arg 1: 0 first pick, 1 a retry's, 2 with one endpoint ejected.
void pick(benchmark::State& state, config::balance_policy p) {
  const auto up = fleet(static_cast<int>(state.range(0)), p);
  proxy::cluster c(up, 0, nullptr);
  auto& eps = c.endpoints();
  std::vector<proxy::active_exchange> busy(eps.size() * 3);
  for (std::size_t i = 0; i < busy.size(); ++i) busy[i].reset(eps[(i * 7) % eps.size()].get());
  if (state.range(1) == 2) c.record_failure(*eps[1]);
  proxy::endpoint* tried[] = {eps[0].get()};
  const std::span<proxy::endpoint*const> none{}, one{tried, 1};
  const auto which = state.range(1) == 1 ? one : none;
  for (auto _ : state) {
    auto* e = c.pick({.route_key = {}, .tried = which});
    benchmark::DoNotOptimize(e);
  }
}

void BM_PickLeastRequest(benchmark::State& s) {
  pick(s, config::balance_policy::least_request);
}
void BM_PickRoundRobin(benchmark::State& s) {
  pick(s, config::balance_policy::round_robin);
}
BENCHMARK(BM_PickLeastRequest)->ArgsProduct({{2, 8}, {0, 1, 2}});
BENCHMARK(BM_PickRoundRobin)->ArgsProduct({{2, 8}, {0, 1, 2}});

}  // namespace

BENCHMARK_MAIN();
