// tokentap-loadgen: N concurrent keep-alive clients streaming chat completions from a target
// (the proxy, or the simulator directly for a baseline) for a fixed time.  Reports completed
// streams, events per second, errors and client-side time-to-first-byte percentiles, and each
// stamped event's latency from the simulator's write to its arrival at the client's socket
// (event_latency, the kernel's receive timestamp) and to the client's read of it (read_latency).
//
//   tokentap-loadgen --target 127.0.0.1:8080 --concurrency 500 --duration-s 20 --tokens 64 --itl-ms
//   20
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "config/url.hpp"
#include "sim/load_generator.hpp"

namespace {

[[noreturn]] void usage(const char* why) {
  std::fprintf(
      stderr,
      "tokentap-loadgen: %s\nusage: tokentap-loadgen --target HOST:PORT "
      "[--concurrency N] [--duration-s S] [--tokens N] [--itl-ms N] [--ttft-ms N] [--threads N] "
      "[--spread-ms N]\n",
      why);
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  std::string target;
  unsigned concurrency = 100, threads = 1;
  double duration = 10;
  int tokens = 64, itl = 20, ttft = 100, spread = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) usage(("missing value for " + a).c_str());
    const char* v = argv[++i];
    if (a == "--target")
      target = v;
    else if (a == "--concurrency")
      concurrency = static_cast<unsigned>(std::atoi(v));
    else if (a == "--duration-s")
      duration = std::atof(v);
    else if (a == "--tokens")
      tokens = std::atoi(v);
    else if (a == "--itl-ms")
      itl = std::atoi(v);
    else if (a == "--ttft-ms")
      ttft = std::atoi(v);
    else if (a == "--threads")
      threads = static_cast<unsigned>(std::atoi(v));
    else if (a == "--spread-ms")  // start clients at random times in [0, N] ms (no bursts)
      spread = std::atoi(v);
    else
      usage(("unknown flag " + a).c_str());
  }
  std::string err;
  auto hp = tokentap::config::parse_host_port(target, err);
  if (!hp) usage(err.c_str());
  if (concurrency == 0 || duration <= 0) usage("concurrency and duration must be positive");

  tokentap::sim::load_options lo;
  lo.host = hp->host;
  lo.port = hp->port;
  lo.concurrency = concurrency;
  lo.threads = threads;
  lo.start_spread = std::chrono::milliseconds(spread);
  const std::string body =
      R"({"model":"sim-small","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"load"}]})";
  lo.next = [&](unsigned, std::uint64_t) {
    tokentap::sim::scenario s;
    s.body = body;
    s.headers = {{"x-sim-tokens", std::to_string(tokens)},
                 {"x-sim-itl-ms", std::to_string(itl)},
                 {"x-sim-ttft-ms", std::to_string(ttft)},
                 {"x-sim-stamp", "1"}};
    return s;
  };
  tokentap::sim::load_generator load(lo);
  const auto t0 = std::chrono::steady_clock::now();
  load.start();
  std::this_thread::sleep_for(std::chrono::milliseconds(static_cast<long>(duration * 1000)));
  auto& t = load.totals();
  const auto events = t.events.load();
  const auto ok = t.ok.load();
  const auto failed = t.failed.load();
  const auto active = t.active.load();
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  load.stop();
  std::vector<double> ttfb, latency, read_latency;
  {
    std::lock_guard lk(t.mu);
    ttfb = t.ttfb_ms;
    latency = t.event_latency_us;
    read_latency = t.read_latency_us;
  }
  std::printf(
      "concurrency=%u streams_done=%llu failed=%llu in_flight_at_end=%llu events_per_s=%.0f "
      "ttfb_p50_ms=%.1f ttfb_p99_ms=%.1f event_latency_p50_us=%.0f event_latency_p99_us=%.0f "
      "read_latency_p50_us=%.0f read_latency_p99_us=%.0f events=%llu\n",
      concurrency, static_cast<unsigned long long>(ok), static_cast<unsigned long long>(failed),
      static_cast<unsigned long long>(active), static_cast<double>(events) / secs,
      tokentap::sim::percentile(ttfb, 0.5), tokentap::sim::percentile(ttfb, 0.99),
      tokentap::sim::percentile(latency, 0.5), tokentap::sim::percentile(latency, 0.99),
      tokentap::sim::percentile(read_latency, 0.5), tokentap::sim::percentile(read_latency, 0.99),
      static_cast<unsigned long long>(t.events.load()));  // after stop(): every event received
  return failed == 0 ? 0 : 1;
}
