// The routing experiment (BENCHMARKS.md "Routing by prefix: the experiment"): does sending a
// conversation back to the replica that holds its prefix cache raise the provider-reported hit
// ratio and cut TTFT, without unbalancing the fleet?
//
// A fleet of simulator replicas (tokentap sim's engine, in process), each with a prefix cache
// that holds ~3.2x less than the conversations' working set while the fleet together holds it,
// and a prefill cost per uncached prompt token.  Closed-loop clients run multi-turn
// conversations with long system prompts through the real proxy, one turn at a time; a
// conversation restarts as a new one after its last turn.  Arms: round_robin, least_request,
// prefix, and prefix without load bounds, at two load levels; then a hot prefix (every client
// sending the same conversation at once).  Each arm starts from empty caches and a new proxy.
//
// Reports per arm: the provider-reported hit ratio (cached / prompt tokens), TTFT P50/P99 as the
// client saw it, split by the request's cache outcome, and requests per replica (max/mean).
//
//   build/test/tokentap_routing_experiment [--quick]
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "base/log.hpp"
#include "config/config.hpp"
#include "proxy/proxy_server.hpp"
#include "sim/fleet.hpp"
#include "sim/load_generator.hpp"
#include "test/support/http_client.hpp"
#include "test/support/stack.hpp"

namespace {

using namespace tokentap;

constexpr int replicas = 4;
constexpr int apps = 8;            // distinct application system prompts
constexpr int conversations = 64;  // live at any time: the working set
constexpr int turns = 8;           // then the conversation restarts as a new one
constexpr int block_tokens = 16;   // the simulator's cache block

// Deterministic filler text of about `tokens` tokens (4 bytes each) for a seed.
std::string words(std::uint64_t seed, int tokens) {
  static const char* vocab[] = {"latency", "prefill", "decode", "cache",  "replica", "tensor",
                                "batch",   "token",   "kernel", "stream", "queue",   "model"};
  std::mt19937_64 rng(seed);
  std::string s;
  while (static_cast<int>(s.size()) < tokens * 4) {
    s += vocab[rng() % 12];
    s += ' ';
  }
  return s;
}

// A workload: each conversation's system prompt is its app's (shared by the conversations of
// that app) followed by its own context (retrieved documents, the user's memory), then turns.
struct workload {
  const char* name;
  int shared_tokens, own_tokens, message_tokens;
};

// The request body of turn `t` of conversation instance `id` of app `app`: the system prompt,
// then t user/assistant exchanges, then the new user message.
std::string turn_body(const workload& w, int app, std::uint64_t id, int t) {
  std::string b =
      R"({"model":"sim-chat","stream":true,"stream_options":{"include_usage":true},"messages":[)"
      R"({"role":"system","content":")" +
      words(1000 + app, w.shared_tokens) + words(id * 7919 + 1, w.own_tokens) + "\"}";
  for (int i = 0; i <= t; ++i) {
    b += R"(,{"role":"user","content":")" + words(id * 104729 + i * 2, w.message_tokens) + "\"}";
    if (i < t)
      b += R"(,{"role":"assistant","content":")" +
           words(id * 104729 + i * 2 + 1, w.message_tokens) + "\"}";
  }
  return b + "]}";
}

// The conversations' longest prompts, in the simulator's blocks (its canonical text adds role
// names and separators: a little more than the texts).
int working_set_blocks(const workload& w) {
  const int tokens =
      w.shared_tokens + w.own_tokens + (2 * turns - 1) * w.message_tokens + 8 * (2 * turns);
  return conversations * (tokens / block_tokens + 1);
}

long field(const std::string& body, const char* key) {
  const auto k = body.rfind(key);
  return k == std::string::npos ? -1 : std::atol(body.c_str() + k + std::strlen(key));
}

struct sample {
  double ttft_ms;
  long prompt, cached;
};

struct arm {
  const char* name;
  std::string policy;
  bool load_bounds = true;
};

struct result {
  std::vector<sample> samples;
  std::vector<std::uint64_t> per_replica;
  std::map<std::string, double> decisions;
};

double quantile(std::vector<double> v, double q) {
  return v.empty() ? -1 : sim::percentile(std::move(v), q);
}

// A proxy in front of a fresh fleet, `clients` closed-loop clients for `requests` requests in
// all; `hot`: every client sends the same first turn of one conversation.
result run(const workload& w, const arm& a, int clients, int requests, bool hot) {
  auto so = test::loopback_sim(20, 4, 24);
  so.defaults.prefill_us_per_token = 60;
  so.cache.capacity_blocks = static_cast<std::size_t>(working_set_blocks(w) / 3.2);
  so.cache.ttl = std::chrono::hours(1);
  sim::fleet fleet(so, replicas);

  auto cfg = test::test_config("http://127.0.0.1:" + std::to_string(fleet.port(0)));
  cfg.threads = 1;
  auto& up = cfg.upstreams.front();
  up.name = "fleet";
  cfg.routes.front().upstream = "fleet";
  for (int i = 1; i < replicas; ++i) {
    std::string err;
    up.endpoints.push_back(
        *config::parse_url("http://127.0.0.1:" + std::to_string(fleet.port(i)), err));
  }
  up.balance = a.policy;
  up.prefix.load_bounds = a.load_bounds;
  config::validate(cfg);
  proxy::proxy_server proxy(cfg);
  proxy.start();

  std::mutex mu;
  result r;
  std::atomic<int> next{0};
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      test::connection conn(proxy.endpoint());
      // This client's conversations: every clients-th of the live ones, each at its own turn.
      std::vector<int> mine;
      for (int k = c; k < conversations; k += clients) mine.push_back(k);
      std::map<int, std::pair<std::uint64_t, int>> at;  // slot -> (instance id, turn)
      for (int k : mine) at[k] = {static_cast<std::uint64_t>(k) + 1, (k * 3) % turns};
      // The next turn is of one of them at random, as users come back when they do (a fixed
      // cycle would land every turn of a conversation on one replica under round robin
      // whenever the cycle is a multiple of the replicas).
      std::mt19937 rng(static_cast<unsigned>(c) * 7919u + 17u);
      while (next.fetch_add(1) < requests) {
        const int slot = mine[rng() % mine.size()];
        auto& [id, t] = at[slot];
        test::request_options o;
        o.body = hot ? turn_body(w, 0, 999999, 0) : turn_body(w, slot % apps, id, t);
        o.headers = {{"content-type", "application/json"}};
        o.timeout = std::chrono::milliseconds(30000);
        const auto resp = conn.request(o);
        if (!hot && ++t == turns) {
          t = 0;
          id += conversations;  // the slot's next conversation is a new one
        }
        if (resp.status != 200 || resp.chunk_ms.empty()) continue;
        const sample s{resp.chunk_ms.front(), field(resp.body, "\"prompt_tokens\":"),
                       field(resp.body, "\"cached_tokens\":")};
        std::lock_guard lk(mu);
        r.samples.push_back(s);
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int i = 0; i < replicas; ++i) r.per_replica.push_back(fleet.requests(i));
  proxy.shutdown(std::chrono::milliseconds(1000));
  proxy.join();
  return r;
}

void report(const char* load, const arm& a, const result& r) {
  long prompt = 0, cached = 0;
  std::vector<double> all, hit, partial, miss;
  for (const auto& s : r.samples) {
    all.push_back(s.ttft_ms);
    if (s.prompt <= 0 || s.cached < 0) continue;
    prompt += s.prompt;
    cached += s.cached;
    // The cache classes of DESIGN.md §8: hit when >= 90 % of the prompt was cached.
    (10 * s.cached >= 9 * s.prompt ? hit : s.cached > 0 ? partial : miss).push_back(s.ttft_ms);
  }
  double sum = 0, max = 0;
  for (auto n : r.per_replica) {
    sum += static_cast<double>(n);
    max = std::max(max, static_cast<double>(n));
  }
  const double mean = sum / static_cast<double>(r.per_replica.size());
  const auto q = [](const std::vector<double>& v) {
    char b[48];
    if (v.empty()) return std::string("–");
    std::snprintf(b, sizeof b, "%.0f / %.0f (%zu)", quantile(v, 0.5), quantile(v, 0.99), v.size());
    return std::string(b);
  };
  std::printf("| %s | %s | %.1f %% | %.0f / %.0f | %s | %s | %s | %.2f |\n", load, a.name,
              prompt ? 100.0 * static_cast<double>(cached) / static_cast<double>(prompt) : 0.0,
              quantile(all, 0.5), quantile(all, 0.99), q(hit).c_str(), q(partial).c_str(),
              q(miss).c_str(), mean > 0 ? max / mean : 0.0);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::string(argv[1]) == "--quick";
  base::log::set_level(base::log::level::error);
  const arm arms[] = {{"round_robin", "round_robin"},
                      {"least_request", "least_request"},
                      {"prefix", "prefix"},
                      {"prefix, no load bounds", "prefix", false}};
  // A: each conversation's own context dominates its prompt (agents with retrieved documents or
  // a user's memory).  B: a long system prompt every conversation of an app shares.
  const workload workloads[] = {{"A: own context 700 + shared 300 tokens", 300, 700, 120},
                                {"B: shared 600 + own context 400 tokens", 600, 400, 100}};
  const int requests = quick ? 256 : 1024;
  for (const auto& w : workloads) {
    std::printf(
        "\n%s, turns of %d tokens: %d replicas, cache %d blocks each (the working set, %d "
        "blocks, is %.1fx one cache, %.2fx the fleet's); %d conversations of %d turns, %d apps, "
        "%d requests per run\n\n",
        w.name, w.message_tokens, replicas, static_cast<int>(working_set_blocks(w) / 3.2),
        working_set_blocks(w), 3.2, 3.2 / replicas, conversations, turns, apps, requests);
    std::printf(
        "| load | policy | hit ratio | TTFT p50 / p99 (ms) | hit: p50 / p99 (n) | partial | miss | "
        "max/mean per replica |\n|---|---|---|---|---|---|---|---|\n");
    for (const auto& [load, clients] : {std::pair{"8 clients", 8}, std::pair{"32 clients", 32}})
      for (const auto& a : arms) report(load, a, run(w, a, clients, requests, false));
  }
  std::printf("\nA hot prefix: 32 clients sending the same first turn at once\n\n");
  std::printf(
      "| load | policy | hit ratio | TTFT p50 / p99 (ms) | hit: p50 / p99 (n) | partial | miss | "
      "max/mean per replica |\n|---|---|---|---|---|---|---|---|\n");
  for (const auto& a : arms)
    report("hot prefix", a, run(workloads[0], a, 32, quick ? 128 : 512, true));
  return 0;
}
