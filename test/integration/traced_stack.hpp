#pragma once
// What the attribution, engine-metrics and fault tests share: a stack whose proxy writes traces
// into a directory of its own, the simulator as an engine of a given shape, a record's phases,
// load through a stack, `analyze --attribute --compare` between two runs, a fault rule, and the
// proxy's /metrics.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "replay/trace_reader.hpp"
#include "test/support/http_client.hpp"
#include "test/support/metrics_text.hpp"
#include "test/support/process.hpp"
#include "test/support/stack.hpp"
#include "test/support/tls_cert.hpp"

namespace tokentap::test {

// A stack whose proxy writes traces into its own directory.
struct traced {
  traced(sim::server_options so, std::function<void(config::config&)> tweak = {})
      : dir(temp_dir() + "/traces"),
        s(
            [&](config::config& cfg) {
              cfg.trace.dir = dir;
              if (tweak) tweak(cfg);
            },
            so) {}
  // The records once `n` are written.
  std::vector<replay::record> records(std::size_t n) const {
    std::vector<replay::record> out;
    for (int i = 0; i < 500; ++i) {
      if (std::filesystem::exists(dir)) out = replay::read_traces({dir}).records;
      if (out.size() >= n) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return out;
  }
  std::string dir;
  stack s;
};

inline sim::server_options engine_sim(sim::engine_shape e) {
  auto so = loopback_sim(30, 3, 8);
  so.engine = e;
  return so;
}

inline double phase_sum(const replay::record& r) {
  double sum = 0;
  for (const auto& p : r.attribution.phases) sum += p.value_or(0);
  return sum;
}

// hooks::phase's order in recorded_attribution::phases.
enum { proxy_, connect_, failed_attempts_, fault_, upstream_head_, first_token_, decode_ };

inline std::string compare_json(const std::string& a, const std::string& b) {
  const auto r = run({"analyze", "--attribute", "--compare", a, b, "--format", "json"});
  EXPECT_EQ(r.status, 0) << r.err;
  return r.out;
}

// Requests at `concurrency`, `each` per client, through the stack.
inline void load(const traced& t, int concurrency, int each, const std::string& tag) {
  std::vector<std::future<bool>> f;
  for (int c = 0; c < concurrency; ++c)
    f.push_back(std::async(std::launch::async, [&, c] {
      bool ok = true;
      for (int i = 0; i < each; ++i) {
        request_options o;
        o.body = chat_body(true, tag + " " + std::to_string(c) + " " + std::to_string(i));
        ok = fetch(t.s.proxy_ep(), o).complete && ok;
      }
      return ok;
    }));
  for (auto& x : f) EXPECT_TRUE(x.get());
}

using fault_kind = config::fault_rule::kind_t;

inline config::fault_rule fault_rule(std::string name, fault_kind k, std::uint32_t value,
                                     double percent = 100) {
  config::fault_rule r;
  r.name = std::move(name);
  r.route = "default";
  r.kind = k;
  r.value = value;
  r.percent = percent;
  return r;
}

// /metrics (with the admin token, when the proxy has one).
inline std::vector<sample> metrics_of(const stack& s) {
  request_options o;
  o.method = "GET";
  o.target = "/metrics";
  if (const auto& token = s.proxy->cfg().admin_token; !token.empty())
    o.headers = {{"authorization", "Bearer " + token}};
  const auto res = fetch(s.proxy->admin_endpoint(), o);
  EXPECT_EQ(res.status, 200u) << res.body;
  return res.status == 200 ? parse_metrics(res.body) : std::vector<sample>{};
}

}  // namespace tokentap::test
