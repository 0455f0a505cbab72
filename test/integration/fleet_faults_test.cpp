// An upstream's endpoints failing under the real binary: simulator processes behind one cluster,
// one killed mid-run and restarted, then all of them down (DESIGN.md §10).
#include <gtest/gtest.h>

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "test/support/http_client.hpp"
#include "test/support/metrics_text.hpp"
#include "test/support/ports.hpp"
#include "test/support/process.hpp"

namespace tokentap::test {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

// `tokentap sim` on a fixed port, as a process of its own.
struct sim_process {
  explicit sim_process(std::uint16_t port) : port(port) { start(); }
  void start() {
    proc = std::make_unique<process>(std::vector<std::string>{
        "sim", "--listen", "127.0.0.1:" + std::to_string(port), "--ttft-ms", "5", "--itl-ms", "5"});
    ASSERT_NE(proc->wait_for_line("ready ", 10s), "") << proc->err();
  }
  void kill() {
    proc->signal(SIGKILL);
    proc->wait(5s);
    proc.reset();
  }
  std::string label() const { return "127.0.0.1:" + std::to_string(port); }
  std::uint16_t port;
  std::unique_ptr<process> proc;
};

request_options stream_of(int tokens, int itl_ms) {
  request_options o;
  o.body = chat_body(true, "fleet");
  o.headers = {{"content-type", "application/json"},
               {"x-sim-tokens", std::to_string(tokens)},
               {"x-sim-itl-ms", std::to_string(itl_ms)}};
  return o;
}

double endpoint_metric(const tcp::endpoint& admin, const std::string& name,
                       const std::string& endpoint) {
  request_options o;
  o.method = "GET";
  o.target = "/metrics";
  return metric_sum(parse_metrics(fetch(admin, o).body), name,
                    {{"upstream", "fleet"}, {"endpoint", endpoint}});
}

bool ends_with_done(const response& r) {
  const auto data = sse_data(r.body);
  return r.complete && !data.empty() && data.back() == "[DONE]";
}

TEST(FleetFaults, AnEndpointKilledMidRunIsLeftAndTakesTrafficAgainOnceRestarted) {
  const fs::path dir = fs::temp_directory_path() / ("tokentap-fleet-" + std::to_string(::getpid()));
  fs::create_directories(dir / "traces");
  std::vector<std::unique_ptr<sim_process>> sims;
  for (int i = 0; i < 3; ++i) sims.push_back(std::make_unique<sim_process>(free_loopback_port()));
  std::ofstream(dir / "fleet.yaml")
      << "threads: 2\n"
         "upstreams:\n  fleet:\n    endpoints: [http://"
      << sims[0]->label() << ", http://" << sims[1]->label() << ", http://" << sims[2]->label()
      << "]\n    balance: round_robin\n    retries: 2\n"
         "    outlier: {consecutive_failures: 2, base_ejection_ms: 1500}\n"
         "timeouts: {connect_ms: 1000}\n";
  process proxy({"proxy", "--config", (dir / "fleet.yaml").string(), "--listen", "127.0.0.1:0",
                 "--admin", "127.0.0.1:0", "--trace-dir", (dir / "traces").string()});
  const auto ready = proxy.wait_for_line("ready ", 10s);
  ASSERT_NE(ready, "") << proxy.err();
  const auto ep = ready_address(ready, "proxy"), admin = ready_address(ready, "admin");

  // Three streams of ~2 s, one per endpoint (round robin); the second endpoint dies under its
  // stream: that stream ends visibly cut, the others finish.
  std::vector<std::future<response>> streams;
  for (int i = 0; i < 3; ++i) {
    streams.push_back(
        std::async(std::launch::async, [&] { return fetch(ep, stream_of(100, 20)); }));
    std::this_thread::sleep_for(50ms);  // (in this order)
  }
  std::this_thread::sleep_for(400ms);
  sims[1]->kill();
  int cut = 0;
  for (auto& f : streams) {
    const auto r = f.get();
    EXPECT_EQ(r.status, 200);
    if (!ends_with_done(r)) ++cut;
  }
  EXPECT_EQ(cut, 1);

  // The next requests go elsewhere before any byte reached the client: none fails; two failures
  // in a row eject the dead endpoint.
  for (int i = 0; i < 12; ++i) {
    const auto r = fetch(ep, stream_of(3, 1));
    EXPECT_TRUE(ends_with_done(r)) << i << ": " << r.status << " " << r.body;
  }
  EXPECT_EQ(endpoint_metric(admin, "tokentap_upstream_endpoint_healthy", sims[1]->label()), 0);
  EXPECT_EQ(endpoint_metric(admin, "tokentap_upstream_ejections_total", sims[1]->label()), 1);

  // Restarted, it rejoins once its ejection is over and serves again.
  sims[1]->start();
  std::this_thread::sleep_for(1600ms);
  EXPECT_EQ(endpoint_metric(admin, "tokentap_upstream_endpoint_healthy", sims[1]->label()), 1);
  for (int i = 0; i < 6; ++i) EXPECT_TRUE(ends_with_done(fetch(ep, stream_of(3, 1)))) << i;
  EXPECT_EQ(endpoint_metric(admin, "tokentap_upstream_ejections_total", sims[1]->label()), 1);

  // All endpoints down: a 502 at once (refused: well within the connect timeout), nothing hangs.
  for (auto& s : sims) s->kill();
  const auto t0 = std::chrono::steady_clock::now();
  const auto down = fetch(ep, stream_of(3, 1));
  EXPECT_EQ(down.status, 502);
  EXPECT_NE(down.body.find("upstream_connect_error"), std::string::npos) << down.body;
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 1s);

  proxy.signal(SIGTERM);
  EXPECT_EQ(proxy.wait(10s), 0);
  // The trace says who served what: the restarted endpoint answered whole streams again.
  int served_by_restarted = 0;
  for (const auto& f : fs::directory_iterator(dir / "traces")) {
    std::ifstream in(f.path());
    for (std::string line; std::getline(in, line);)
      if (line.find(R"("endpoint":")" + sims[1]->label() + R"(","attempts")") !=
              std::string::npos &&
          line.find(R"("outcome":"ok")") != std::string::npos)
        ++served_by_restarted;
  }
  EXPECT_GE(served_by_restarted, 1);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace tokentap::test
