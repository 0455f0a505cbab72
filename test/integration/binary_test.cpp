// The real `tokentap` binary: command line contract, signals and graceful shutdown.
#include <gtest/gtest.h>

#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <thread>

#include <boost/asio/ip/address.hpp>

#include "sim/sim_server.hpp"
#include "test/support/http_client.hpp"
#include "test/support/metrics_text.hpp"
#include "test/support/ports.hpp"
#include "test/support/process.hpp"
#include "test/support/tls_cert.hpp"

namespace tokentap::test {
namespace {

int lines(const std::string& s) {
  return static_cast<int>(std::count(s.begin(), s.end(), '\n'));
}

TEST(Binary, VersionAndHelp) {
  auto r = run({"--version"});
  EXPECT_EQ(r.status, 0);
  EXPECT_EQ(r.out.rfind("tokentap ", 0), 0u);
  // The allocator the binary runs on: jemalloc when the build linked it (CMakeLists.txt), which
  // is what a request's CPU cost was measured with (BENCHMARKS.md).
#if defined(TOKENTAP_EXPECT_JEMALLOC)
  EXPECT_NE(r.out.find("\nallocator: jemalloc "), std::string::npos) << r.out;
  // With the binary's settings (app/allocator_conf.cpp), which the environment overrides.
  EXPECT_NE(r.out.find(" (background_thread:true,dirty_decay_ms:1000)\n"), std::string::npos)
      << r.out;
  {
    process p(std::vector<std::string>{"--version"}, {{"MALLOC_CONF", "dirty_decay_ms:5000"}});
    ASSERT_EQ(p.wait(std::chrono::seconds(10)), 0);
    EXPECT_NE(p.out().find(" (background_thread:true,dirty_decay_ms:5000)\n"), std::string::npos)
        << p.out();
  }
#else
  EXPECT_NE(r.out.find("\nallocator: libc malloc"), std::string::npos) << r.out;
#endif
  r = run({"--help"});
  EXPECT_EQ(r.status, 0);
  for (const char* cmd : {"proxy", "sim", "demo", "replay serve", "replay send", "analyze",
                          "bench run", "bench compare", "check-config"})
    EXPECT_NE(r.out.find(std::string("\n  ") + cmd + " "), std::string::npos) << cmd << r.out;
  for (const char* cmd : {"proxy", "sim", "demo", "check-config", "analyze", "replay", "bench"}) {
    r = run({cmd, "--help"});
    EXPECT_EQ(r.status, 0) << cmd;
    EXPECT_NE(r.out.find("usage: tokentap"), std::string::npos) << cmd;
  }
}

TEST(Binary, BadUsageIsOneLineAndExitTwo) {
  const std::vector<std::vector<std::string>> cases = {
      {},
      {"frobnicate"},
      {"proxy", "--bogus"},
      {"proxy", "--listen"},
      {"proxy", "--listen", "nonsense", "--upstream", "http://127.0.0.1:1"},
      {"proxy", "--upstream", "ftp://x"},
      {"proxy"},  // no upstream
      {"proxy", "--upstream", "http://127.0.0.1:1", "--threads", "-3"},
      {"proxy", "--config", "/nonexistent.yaml"},
      {"sim", "--itl-dist", "zipf"},
      {"check-config"},
      // Nothing to analyze or replay is an error, not an empty report.
      {"analyze", "/no/such/dir"},
      {"analyze", std::string(TOKENTAP_SOURCE_DIR) + "/config"},  // a directory without traces
      {"replay", "serve", "--trace", "/no/such/dir", "--listen", "127.0.0.1:0"},
      {"replay", "send", "--trace", "/no/such/dir", "--target", "http://127.0.0.1:1"},
  };
  for (const auto& args : cases) {
    const auto r = run(args);
    std::string joined;
    for (const auto& a : args) joined += a + " ";
    EXPECT_EQ(r.status, 2) << joined;
    if (!args.empty()) {
      EXPECT_EQ(lines(r.err), 1) << joined << ": " << r.err;
      EXPECT_EQ(r.err.rfind("tokentap ", 0), 0u) << r.err;
    }
    if (!args.empty() && (args[0] == "analyze" || args[0] == "replay")) {
      EXPECT_NE(r.err.find("no trace records found in "), std::string::npos) << r.err;
    }
  }
}

TEST(Binary, CheckConfig) {
  const auto dir = temp_dir();
  {
    std::ofstream(dir + "/good.yaml") << "upstreams:\n  vllm: {url: http://127.0.0.1:8000}\n"
                                         "routes:\n  - {prefix: /v1/, upstream: vllm}\n";
    std::ofstream(dir + "/bad.yaml") << "upstreams:\n  vllm: {url: http://127.0.0.1:8000}\n"
                                        "routes:\n  - {prefix: /v1/, upstream: tgi}\n";
    // What `proxy` refuses at start-up, check-config refuses too.
    std::ofstream(dir + "/hooks.yaml") << "upstreams:\n  vllm: {url: http://127.0.0.1:8000}\n"
                                          "hooks: [timing, metrics, timing]\n";
    std::ofstream(dir + "/nohook.yaml") << "upstreams:\n  vllm: {url: http://127.0.0.1:8000}\n"
                                           "hooks: [timing, tracing]\n";
    std::ofstream(dir + "/needs.yaml") << "upstreams:\n  vllm: {url: http://127.0.0.1:8000}\n"
                                          "hooks: [metrics, steps]\n";
    std::ofstream(dir + "/reversed.yaml") << "upstreams:\n  vllm: {url: http://127.0.0.1:8000}\n"
                                             "hooks: [trace, metrics, cache, steps, timing]\n";
  }
  // Hooks in any order are fine; one whose needs no hook provides is refused, in one line.
  auto needs = run({"check-config", dir + "/reversed.yaml"});
  EXPECT_EQ(needs.status, 0) << needs.err;
  needs = run({"check-config", dir + "/needs.yaml"});
  EXPECT_EQ(needs.status, 2);
  EXPECT_NE(needs.err.find("needs.yaml: hook 'metrics' needs the timing"), std::string::npos)
      << needs.err;
  EXPECT_EQ(lines(needs.err), 1);
  auto r = run({"check-config", dir + "/good.yaml"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("ok"), std::string::npos);
  r = run({"check-config", dir + "/bad.yaml"});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("unknown upstream 'tgi'"), std::string::npos) << r.err;
  EXPECT_EQ(lines(r.err), 1);
  r = run({"check-config", dir + "/hooks.yaml"});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("hooks.yaml: hook 'timing' is listed twice"), std::string::npos) << r.err;
  EXPECT_EQ(lines(r.err), 1);
  r = run({"check-config", dir + "/nohook.yaml"});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("unknown hook 'tracing'"), std::string::npos) << r.err;
  EXPECT_EQ(lines(r.err), 1);
  // The example shipped in config/ is valid.
  r = run({"check-config", std::string(TOKENTAP_SOURCE_DIR) + "/config/example.yaml"});
  EXPECT_EQ(r.status, 0) << r.err;
  // A hook's own section is read by the hook, and a top-level key no one reads is refused: both
  // name the file and the line, from check-config as from proxy.
  {
    std::ofstream(dir + "/typo.yaml") << "upstreams:\n  vllm: {url: http://127.0.0.1:8000}\n"
                                         "timng: {stall_threshold_ms: 100}\n";
    std::ofstream(dir + "/steps.yaml") << "upstreams:\n  vllm: {url: http://127.0.0.1:8000}\n"
                                          "steps:\n  triggers: {step: First}\n";
    std::ofstream(dir + "/policy.yaml") << "upstreams:\n  vllm:\n    url: http://127.0.0.1:8000\n"
                                           "    balance: random\n";
  }
  for (const std::string command : {"check-config", "proxy"}) {
    const auto file_arg = [&](const std::string& f) {
      return command == "proxy"
                 ? std::vector<std::string>{command, "--config", f, "--listen", "127.0.0.1:0"}
                 : std::vector<std::string>{command, f};
    };
    r = run(file_arg(dir + "/typo.yaml"));
    EXPECT_EQ(r.status, 2) << command;
    EXPECT_NE(r.err.find("typo.yaml: line 3: unknown key 'timng' in the top level"),
              std::string::npos)
        << command << ": " << r.err;
    EXPECT_EQ(lines(r.err), 1) << r.err;
    r = run(file_arg(dir + "/steps.yaml"));
    EXPECT_EQ(r.status, 2) << command;
    EXPECT_NE(r.err.find("steps.yaml: line 4: steps.triggers.step must be a list"),
              std::string::npos)
        << command << ": " << r.err;
    r = run(file_arg(dir + "/policy.yaml"));
    EXPECT_EQ(r.status, 2) << command;
    EXPECT_NE(r.err.find("policy.yaml: line 4: upstream 'vllm': balance must be one of "
                         "least_request, round_robin, prefix, not 'random'"),
              std::string::npos)
        << command << ": " << r.err;
  }
}

struct binary_stack {
  explicit binary_stack(std::vector<std::string> extra = {},
                        const std::string& listen = "127.0.0.1:0") {
    sim::server_options so;
    so.host = "127.0.0.1";
    so.port = 0;
    sim = std::make_unique<sim::server>(so);
    sim->start();
    std::vector<std::string> args = {
        "proxy",   "--listen",    listen,
        "--admin", "127.0.0.1:0", "--threads",
        "2",       "--upstream",  "http://127.0.0.1:" + std::to_string(sim->endpoint().port())};
    args.insert(args.end(), extra.begin(), extra.end());
    proc = std::make_unique<process>(args);
    const auto line = proc->wait_for_line("ready ", std::chrono::seconds(10));
    proxy = ready_address(line, "proxy");
    admin = ready_address(line, "admin");
  }
  std::unique_ptr<sim::server> sim;
  std::unique_ptr<process> proc;
  tcp::endpoint proxy, admin;
};

request_options long_stream(int tokens, int itl_ms) {
  request_options o;
  o.body = chat_body(true, "drain me");
  o.headers = {{"x-sim-tokens", std::to_string(tokens)},
               {"x-sim-itl-ms", std::to_string(itl_ms)},
               {"x-sim-ttft-ms", "10"}};
  o.timeout = std::chrono::milliseconds(20000);
  return o;
}

TEST(Binary, ServesAndReportsHealth) {
  binary_stack b;
  ASSERT_NE(b.proxy.port(), 0) << b.proc->err();
  request_options h;
  h.method = "GET";
  h.target = "/healthz";
  auto r = fetch(b.admin, h);
  EXPECT_EQ(r.status, 200);
  h.target = "/readyz";
  EXPECT_EQ(fetch(b.admin, h).status, 200);
  r = fetch(b.proxy, long_stream(5, 1));
  EXPECT_TRUE(r.complete);
  EXPECT_EQ(r.status, 200);
  // A request the proxy refuses is no "ok" exchange; an upstream's 5xx is its failure.
  {
    connection c(b.proxy);
    c.send_raw("GARBAGE\r\n\r\n");
    EXPECT_EQ(c.read_response().status, 400u);
  }
  auto unavailable = long_stream(1, 1);
  unavailable.headers.push_back({"x-sim-status", "503"});
  EXPECT_EQ(fetch(b.proxy, unavailable).status, 503u);
  // Ollama's native API streams when the body does not say `stream`; with `false` it does not.
  for (const char* body : {R"({"model":"llama3.2","prompt":"why"})",
                           R"({"model":"llama3.2","prompt":"why not","stream":false})"}) {
    request_options o;
    o.target = "/api/generate";
    o.body = body;
    EXPECT_EQ(fetch(b.proxy, o).status, 200u);
  }
  b.proc->signal(SIGTERM);
  EXPECT_EQ(b.proc->wait(std::chrono::seconds(10)), 0);
  // One access-log line per request, without the credentials.
  const auto log = b.proc->err();
  EXPECT_NE(log.find("status=200 outcome=ok"), std::string::npos) << log;
  EXPECT_NE(log.find("status=400 outcome=rejected"), std::string::npos) << log;
  EXPECT_NE(log.find("status=503 outcome=upstream_error"), std::string::npos) << log;
  EXPECT_EQ(log.find("status=400 outcome=ok"), std::string::npos) << log;
  const auto generate = log.find("path=/api/generate");
  ASSERT_NE(generate, std::string::npos) << log;
  EXPECT_NE(log.substr(generate, log.find('\n', generate) - generate).find(" stream=1"),
            std::string::npos)
      << log;
  const auto plain = log.find("path=/api/generate", generate + 1);
  ASSERT_NE(plain, std::string::npos) << log;
  EXPECT_EQ(log.substr(plain, log.find('\n', plain) - plain).find(" stream=1"), std::string::npos)
      << log;
}

// Two processes share one listening port (--reuse-port, SO_REUSEPORT): the kernel spreads the
// connections over them and each serves its share — how a host holds more streams than one
// process's descriptor limit allows, or starts a new binary beside the old one.  Without the flag
// the port is taken: exit 2, one line.
TEST(Binary, ReusePortSharesTheListenerBetweenProcesses) {
  binary_stack first({"--reuse-port"});
  ASSERT_NE(first.proxy.port(), 0) << first.proc->err();
  const auto at = "127.0.0.1:" + std::to_string(first.proxy.port());
  binary_stack second({"--reuse-port"}, at);
  ASSERT_EQ(second.proxy, first.proxy) << second.proc->err();

  constexpr int requests = 40;  // each on a new connection: all on one process has odds 2^-39
  for (int i = 0; i < requests; ++i) {
    const auto r = fetch(first.proxy, long_stream(3, 1));
    ASSERT_TRUE(r.complete) << i << ": " << r.error.message();
  }
  request_options m;
  m.method = "GET";
  m.target = "/metrics";
  // A request is counted when its exchange ends, just after the client has the last byte: a
  // loaded machine may show the last one a moment later.
  double served[2] = {0, 0};
  for (int i = 0; i < 500 && served[0] + served[1] < requests; ++i) {
    if (i > 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    for (int p = 0; p < 2; ++p)
      served[p] = metric_sum(parse_metrics(fetch((p == 0 ? first : second).admin, m).body),
                             "tokentap_requests_total");
  }
  EXPECT_GT(served[0], 0) << "one process got no connection";
  EXPECT_GT(served[1], 0) << "one process got no connection";
  EXPECT_EQ(served[0] + served[1], requests);

  const auto taken = run({"proxy", "--listen", at, "--admin", "127.0.0.1:0", "--upstream",
                          "http://127.0.0.1:" + std::to_string(first.sim->endpoint().port())});
  EXPECT_EQ(taken.status, 2);
  EXPECT_NE(taken.err.find("in use"), std::string::npos) << taken.err;
  EXPECT_NE(taken.err.find("bind " + at + ": "), std::string::npos) << taken.err;
  EXPECT_EQ(lines(taken.err), 1) << taken.err;
  for (const auto* b : {&first, &second}) {
    b->proc->signal(SIGTERM);
    EXPECT_EQ(b->proc->wait(std::chrono::seconds(10)), 0);
  }
}

TEST(Binary, SigtermLetsInFlightStreamsFinish) {
  binary_stack b;
  ASSERT_NE(b.proxy.port(), 0) << b.proc->err();
  // ~1.5 s of streaming in three concurrent streams.
  std::vector<std::future<response>> streams;
  for (int i = 0; i < 3; ++i)
    streams.push_back(
        std::async(std::launch::async, [&] { return fetch(b.proxy, long_stream(50, 30)); }));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const double t0 = now_ms();
  b.proc->signal(SIGTERM);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  // Draining: the admin port still answers, and says not ready (load balancers stop sending).
  request_options ready;
  ready.method = "GET";
  ready.target = "/readyz";
  const auto rz = fetch(b.admin, ready);
  EXPECT_EQ(rz.status, 503) << rz.body;
  EXPECT_NE(rz.body.find("draining"), std::string::npos);
  // No new connections once draining.
  boost::asio::io_context ioc;
  tcp::socket probe(ioc);
  boost::system::error_code ec;
  probe.connect(b.proxy, ec);
  EXPECT_TRUE(ec) << "the listener must be closed while draining";
  for (auto& f : streams) {
    const auto r = f.get();
    EXPECT_TRUE(r.complete) << r.error.message();
    EXPECT_EQ(sse_data(r.body).back(), "[DONE]");
  }
  EXPECT_EQ(b.proc->wait(std::chrono::seconds(10)), 0);
  EXPECT_LT(now_ms() - t0, 5000);
}

TEST(Binary, GracePeriodBoundsShutdown) {
  const auto dir = temp_dir();
  std::ofstream(dir + "/c.yaml") << "timeouts: {shutdown_grace_ms: 500}\n";
  binary_stack b({"--config", dir + "/c.yaml"});
  ASSERT_NE(b.proxy.port(), 0) << b.proc->err();
  auto stream =
      std::async(std::launch::async, [&] { return fetch(b.proxy, long_stream(1000, 20)); });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const double t0 = now_ms();
  b.proc->signal(SIGTERM);
  EXPECT_EQ(b.proc->wait(std::chrono::seconds(10)), 0);
  const double took = now_ms() - t0;
  EXPECT_GE(took, 450);
  EXPECT_LT(took, 3000);
  const auto r = stream.get();
  EXPECT_FALSE(r.complete) << "a stream cut by the grace period must look truncated";
}

TEST(Binary, DemoRunsSimulatorProxyAndLoad) {
  const auto traces = temp_dir() + "/demo-traces";
  const auto r =
      run({"demo", "--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0", "--sim-listen",
           "127.0.0.1:0", "--duration-s", "6", "--concurrency", "8", "--trace-dir", traces},
          std::chrono::seconds(30));
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("send your requests here"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("/dashboard"), std::string::npos);
  EXPECT_NE(r.out.find("traces     " + traces), std::string::npos) << r.out;
  const auto k = r.out.find("requests ok=");
  ASSERT_NE(k, std::string::npos) << r.out;
  EXPECT_GT(std::stoi(r.out.substr(k + 12)), 0) << r.out;
  EXPECT_NE(r.out.find("demo stopped"), std::string::npos);
  // On stop it names the commands for its traces, and they work.
  EXPECT_NE(r.out.find(tokentap_binary() + " analyze " + traces), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(tokentap_binary() + " replay serve --trace " + traces), std::string::npos)
      << r.out;
  const auto analyzed = run({"analyze", traces, "--format", "json"});
  EXPECT_EQ(analyzed.status, 0) << analyzed.err;
  EXPECT_NE(analyzed.out.find("\"requests\""), std::string::npos) << analyzed.out;
}

// Without --trace-dir the demo names a new directory of its own.
TEST(Binary, DemoNamesItsTraceDirectory) {
  const auto tmp = temp_dir();
  process p({"demo", "--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0", "--sim-listen",
             "127.0.0.1:0", "--duration-s", "2", "--concurrency", "2"},
            {{"TMPDIR", tmp}});
  const auto line = p.wait_for_line("  traces     ", std::chrono::seconds(15));
  ASSERT_FALSE(line.empty()) << p.err();
  const auto dir = line.substr(13, line.find(' ', 13) - 13);
  EXPECT_EQ(dir.rfind(tmp + "/tokentap-demo-", 0), 0u) << dir;
  EXPECT_EQ(p.wait(std::chrono::seconds(20)), 0);
  EXPECT_TRUE(std::filesystem::is_directory(dir));
}

// `sim --replicas 3`: three simulators, one ready line each, each answering with a prefix cache
// of its own — the same conversation is cold on each the first time and warm the second.
TEST(Binary, SimReplicasEachHaveTheirOwnCache) {
  process p({"sim", "--listen", "127.0.0.1:0", "--replicas", "3", "--cache-capacity", "1000",
             "--ttft-ms", "1", "--itl-ms", "1", "--tokens", "3"});
  std::vector<tcp::endpoint> replicas;
  for (int i = 0; i < 3; ++i) {
    const auto line = p.wait_for_line("ready sim=", std::chrono::seconds(10));
    ASSERT_FALSE(line.empty()) << p.err();
    replicas.push_back(ready_address(line, "sim"));
  }
  EXPECT_NE(replicas[0].port(), replicas[1].port());
  EXPECT_NE(replicas[1].port(), replicas[2].port());
  request_options o;
  o.body = R"({"model":"m","messages":[{"role":"system","content":")" + std::string(600, 's') +
           R"("},{"role":"user","content":"the same question"}]})";
  const auto cached = [](const std::string& body) {
    const auto k = body.find("\"cached_tokens\":");
    return k == std::string::npos ? -1 : std::stoi(body.substr(k + 16));
  };
  for (const auto& r : replicas) {
    EXPECT_EQ(cached(fetch(r, o).body), 0) << r.port();
    EXPECT_GT(cached(fetch(r, o).body), 100) << r.port();
  }
  p.signal(SIGTERM);
  EXPECT_EQ(p.wait(std::chrono::seconds(10)), 0);
}

// The demo's fleet: a replica goes down, is ejected, comes back, and the load goes on.
TEST(Binary, DemoTakesAReplicaDownAndBringsItBack) {
  process p({"demo", "--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0", "--sim-listen",
             "127.0.0.1:0", "--duration-s", "10", "--concurrency", "6", "--outage-every-s", "4",
             "--trace-dir", temp_dir() + "/outage-traces"});
  const auto down = p.wait_for_line("replica ", std::chrono::seconds(15));
  ASSERT_NE(down.find(" down (for 2 s)"), std::string::npos) << down << p.err();
  const auto back = p.wait_for_line("replica ", std::chrono::seconds(5));
  EXPECT_NE(back.find(" back up"), std::string::npos) << back;
  EXPECT_EQ(back.substr(0, back.find(' ', 8)), down.substr(0, down.find(' ', 8)));
  EXPECT_EQ(p.wait(std::chrono::seconds(30)), 0);
  EXPECT_NE(p.err().find("ejected after 3 failures in a row"), std::string::npos) << p.err();
}

}  // namespace
}  // namespace tokentap::test
