// What choosing an endpoint costs per request (the goal: at most 2 µs at 8 endpoints): each
// balancer's first pick, a retry's pick (one endpoint tried), and a pick with an endpoint ejected,
// at 2 and 8 endpoints, with exchanges in flight spread over them.  The prefix balancer: a
// conversation's next turn, a new conversation, and telling it what an endpoint served, over an
// index holding many other conversations.
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "parsers/request_inspector.hpp"
#include "proxy/cluster.hpp"

namespace {

using namespace tokentap;

config::upstream_config fleet(int n, std::string p) {
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
void pick(benchmark::State& state, std::string p) {
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
    auto* e = c.pick({.route_key = {}, .conversation = {}, .tried = which});
    benchmark::DoNotOptimize(e);
  }
}

void BM_PickLeastRequest(benchmark::State& s) {
  pick(s, "least_request");
}
void BM_PickRoundRobin(benchmark::State& s) {
  pick(s, "round_robin");
}
BENCHMARK(BM_PickLeastRequest)->ArgsProduct({{2, 8}, {0, 1, 2}});
BENCHMARK(BM_PickRoundRobin)->ArgsProduct({{2, 8}, {0, 1, 2}});

// A chat conversation `c` of `messages` elements (a system prompt, then user/assistant turns),
// digested as the proxy digests it.
std::vector<parsers::message_digest> conversation(int c, int messages) {
  std::string body = R"({"model":"m","messages":[{"role":"system","content":"You are terse."})";
  for (int i = 1; i < messages; ++i)
    body += std::string(R"(,{"role":")") + (i % 2 == 1 ? "user" : "assistant") +
            R"(","content":"message )" + std::to_string(i) + " of conversation " +
            std::to_string(c) + "\"}";
  body += "]}";
  parsers::request_inspector inspector;
  return inspector.inspect(body, {.digests = true}).digests;
}

// Arg 0: endpoints; arg 1: messages in the conversation; arg 2: 0 its next turn (all but the
// last two messages served just before), 1 a new conversation (every message looked up).
// 10,000 other conversations of the same length were served first.
void BM_PickPrefix(benchmark::State& state) {
  const auto up = fleet(static_cast<int>(state.range(0)), "prefix");
  proxy::cluster c(up, 0, nullptr);
  auto& eps = c.endpoints();
  const int messages = static_cast<int>(state.range(1));
  for (int i = 0; i < 10000; ++i)
    c.served(*eps[static_cast<std::size_t>(i) % eps.size()], conversation(i, messages - 2));
  std::vector<proxy::active_exchange> busy(eps.size() * 3);
  for (std::size_t i = 0; i < busy.size(); ++i) busy[i].reset(eps[(i * 7) % eps.size()].get());
  const auto conv = conversation(123456, messages);
  if (state.range(2) == 0) c.served(*eps[1], conversation(123456, messages - 2));
  for (auto _ : state) {
    auto r = c.choose({.route_key = {}, .conversation = conv, .tried = {}});
    benchmark::DoNotOptimize(r);
  }
}
BENCHMARK(BM_PickPrefix)->ArgsProduct({{2, 8}, {4, 40}, {0, 1}});

// What a 2xx head costs the prefix balancer: every prefix of the conversation indexed.
void BM_PrefixServed(benchmark::State& state) {
  const auto up = fleet(8, "prefix");
  proxy::cluster c(up, 0, nullptr);
  const auto conv = conversation(1, static_cast<int>(state.range(0)));
  for (auto _ : state) c.served(*c.endpoints()[3], conv);
}
BENCHMARK(BM_PrefixServed)->Arg(4)->Arg(40);

}  // namespace

BENCHMARK_MAIN();
