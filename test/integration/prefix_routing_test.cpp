// `balance: prefix` against real simulator replicas, each with its own prefix cache: every turn
// of a conversation returns to the replica that holds its prefix, the replica reports the hit,
// and the decisions, the trace record and the metrics say why (DESIGN.md §10).
#include <gtest/gtest.h>
#include <simdjson.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "test/support/http_client.hpp"
#include "test/support/metrics_text.hpp"
#include "test/support/stack.hpp"

namespace tokentap::test {
namespace {

sim::server_options replica_options() {
  auto o = loopback_sim(2, 1, 4);
  o.cache.capacity_blocks = 4096;
  return o;
}

// A stack whose upstream "fleet" is its own simulator plus `more` replicas, balanced by prefix.
struct fleet_stack {
  explicit fleet_stack(int more, const std::string& trace_dir = {}) {
    for (int i = 0; i < more; ++i) {
      replicas.push_back(std::make_unique<sim::server>(replica_options()));
      replicas.back()->start();
    }
    s = std::make_unique<stack>(
        [&](config::config& cfg) {
          auto& up = cfg.upstreams.front();
          up.name = "fleet";
          cfg.routes.front().upstream = "fleet";
          for (const auto& r : replicas) {
            std::string err;
            up.endpoints.push_back(*config::parse_url(
                "http://127.0.0.1:" + std::to_string(r->endpoint().port()), err));
          }
          up.balance = "prefix";
          if (!trace_dir.empty()) cfg.trace.dir = trace_dir;
        },
        replica_options());
  }
  // Requests each replica has read so far (the stack's own simulator first).
  std::vector<std::uint64_t> served() const {
    std::vector<std::uint64_t> n{s->sim->stats().requests.load()};
    for (const auto& r : replicas) n.push_back(r->stats().requests.load());
    return n;
  }
  double metric(const std::string& name, std::map<std::string, std::string> labels) const {
    request_options o;
    o.method = "GET";
    o.target = "/metrics";
    labels["upstream"] = "fleet";
    return metric_sum(parse_metrics(fetch(s->proxy->admin_endpoint(), o).body), name, labels);
  }
  std::vector<std::unique_ptr<sim::server>> replicas;
  std::unique_ptr<stack> s;
};

// A long system prompt every conversation shares, and a conversation's first `turns` messages.
std::string chat_turns(int conversation, int turns) {
  std::string system;
  for (int i = 0; i < 40; ++i)
    system += "Answer as a careful latency engineer would, step " + std::to_string(i) + ". ";
  std::string body = R"({"model":"sim-chat","stream":true,"stream_options":{"include_usage":true},)"
                     R"("messages":[{"role":"system","content":")" +
                     system + "\"}";
  for (int t = 0; t < turns; ++t) {
    const bool user = t % 2 == 0;
    body += std::string(R"(,{"role":")") + (user ? "user" : "assistant") + R"(","content":")";
    for (int k = 0; k < 20; ++k)
      body += (user ? "question " : "answer ") + std::to_string(conversation) + "." +
              std::to_string(t) + " ";
    body += "\"}";
  }
  return body + "]}";
}

long cached_tokens_in(const std::string& sse) {
  const std::string key = "\"cached_tokens\":";
  const auto at = sse.rfind(key);
  return at == std::string::npos ? -1 : std::stol(sse.substr(at + key.size()));
}

TEST(PrefixRouting, EveryTurnReturnsToTheReplicaThatHoldsTheConversation) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("tokentap-prefix-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  {
    fleet_stack f(2, dir.string());
    constexpr int conversations = 6, turns = 3;
    std::map<int, std::size_t> replica_of;
    for (int turn = 0; turn < turns; ++turn) {
      for (int c = 0; c < conversations; ++c) {
        request_options o;
        o.body = chat_turns(c, 2 * turn + 1);
        o.headers = {{"content-type", "application/json"}};
        const auto before = f.served();
        const auto r = fetch(f.s->proxy_ep(), o);
        ASSERT_EQ(r.status, 200) << r.body;
        const auto after = f.served();
        std::size_t which = before.size();
        for (std::size_t i = 0; i < before.size(); ++i)
          if (after[i] == before[i] + 1) which = i;
        ASSERT_LT(which, before.size());
        if (turn == 0) {
          replica_of[c] = which;
          // (Only the shared system prompt can be cached on the replica it went to.)
        } else {
          EXPECT_EQ(which, replica_of[c]) << "conversation " << c << " turn " << turn;
          // The replica served the conversation's earlier turns from its cache.
          EXPECT_GT(cached_tokens_in(r.body), 300) << r.body.substr(r.body.size() - 300);
        }
      }
    }
    // New conversations spread: two per replica.
    std::map<std::size_t, int> per_replica;
    for (auto& [c, r] : replica_of) ++per_replica[r];
    EXPECT_EQ(per_replica.size(), 3u);
    for (auto& [r, n] : per_replica) EXPECT_EQ(n, 2) << "replica " << r;
    EXPECT_EQ(f.metric("tokentap_routing_decisions_total",
                       {{"policy", "prefix"}, {"reason", "least_request"}}),
              conversations);
    EXPECT_EQ(f.metric("tokentap_routing_decisions_total",
                       {{"policy", "prefix"}, {"reason", "prefix_match"}}),
              conversations * (turns - 1));
    // /api/stats: a row per replica, each with its two conversations' six requests, routed by
    // load first and by prefix after, serving most prompt tokens from its cache.
    request_options o;
    o.method = "GET";
    o.target = "/api/stats";
    const auto stats = fetch(f.s->proxy->admin_endpoint(), o).body;
    simdjson::dom::parser parser;
    simdjson::dom::element doc;
    ASSERT_FALSE(parser.parse(stats).get(doc)) << stats;
    simdjson::dom::array rows;
    ASSERT_FALSE(doc["endpoints"].get_array().get(rows)) << stats;
    ASSERT_EQ(rows.size(), 3u);
    for (auto row : rows) {
      std::string_view upstream;
      bool healthy = false;
      std::uint64_t requests = 0, by_prefix = 0, by_load = 0, ttft_n = 0, active = 1;
      double hit_ratio = -1;
      ASSERT_FALSE(row["upstream"].get(upstream) || row["healthy"].get(healthy) ||
                   row["requests"].get(requests) || row["hit_ratio"].get(hit_ratio) ||
                   row["active"].get(active) || row["ttft_ms"]["n"].get(ttft_n) ||
                   row["reasons"]["prefix_match"].get(by_prefix) ||
                   row["reasons"]["least_request"].get(by_load))
          << simdjson::to_string(row);
      EXPECT_EQ(upstream, "fleet");
      EXPECT_TRUE(healthy);
      EXPECT_EQ(active, 0u);
      EXPECT_EQ(requests, 6u);
      EXPECT_EQ(ttft_n, 6u);
      EXPECT_EQ(by_prefix, 4u);
      EXPECT_EQ(by_load, 2u);
      EXPECT_GT(hit_ratio, 0.5) << simdjson::to_string(row);
    }
  }
  // The trace record of a later turn names the decision and how much of the conversation
  // matched: what the turn before sent (2 elements for the second turn, 4 for the third).
  std::size_t records = 0;
  std::map<int, int> matched;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    std::ifstream in(e.path());
    for (std::string line; std::getline(in, line);) {
      ++records;
      for (const int m : {2, 4})
        matched[m] += line.find(R"("decision":{"policy":"prefix","reason":"prefix_match",)"
                                R"("matched_messages":)" +
                                std::to_string(m) + "}") != std::string::npos;
    }
  }
  EXPECT_EQ(records, 18u);
  EXPECT_EQ(matched[2], 6);
  EXPECT_EQ(matched[4], 6);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace tokentap::test
