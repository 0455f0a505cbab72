// tokentap-transit: a proxy's transit time per stamped event from a capture of both its legs
// (test/bench/transit.hpp).  compare.sh runs it with CAPTURE=1.
//
//   tcpdump -i lo -w cap.pcap 'tcp and (src port 8001 or src port 8080)'
//   tokentap-transit cap.pcap --upstream-port 8001 --client-port 8080 [--slowest N]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "test/bench/transit.hpp"

namespace {

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr,
               "tokentap-transit: %s\nusage: tokentap-transit CAPTURE.pcap --upstream-port P "
               "--client-port Q [--slowest N]\n",
               why);
  std::exit(2);
}

int port(const char* v) {
  char* end = nullptr;
  const long p = std::strtol(v, &end, 10);
  if (*v == '\0' || *end != '\0' || p <= 0 || p > 65535) usage("a port is 1-65535");
  return static_cast<int>(p);
}

}  // namespace

int main(int argc, char** argv) {
  std::string file;
  int up = 0, client = 0;
  long slowest = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.rfind("--", 0) != 0) {
      file = a;
      continue;
    }
    if (i + 1 >= argc) usage(("missing value for " + a).c_str());
    const char* v = argv[++i];
    if (a == "--upstream-port")
      up = port(v);
    else if (a == "--client-port")
      client = port(v);
    else if (a == "--slowest")
      slowest = std::atol(v);
    else
      usage(("unknown flag " + a).c_str());
  }
  if (file.empty() || up == 0 || client == 0) usage("a capture and both ports are needed");
  if (up == client) usage("the two legs need different ports (no proxy in between?)");
  std::ifstream in(file, std::ios::binary);
  if (!in) usage(("cannot read " + file).c_str());
  std::ostringstream bytes;
  bytes << in.rdbuf();
  tokentap::bench::transit_matcher m(static_cast<std::uint16_t>(up),
                                     static_cast<std::uint16_t>(client));
  std::string err;
  if (!tokentap::bench::read_pcap(bytes.view(), m, err)) usage(err.c_str());
  auto r = m.report();
  const auto in_order = r.transit_ns;  // quantile() sorts
  auto us = [&](double p) {
    return static_cast<double>(tokentap::bench::quantile(r.transit_ns, p)) / 1e3;
  };
  std::size_t over = 0;
  for (auto t : r.transit_ns) over += t > 50'000;
  std::printf(
      "transit packets=%zu upstream_stamps=%zu client_stamps=%zu matched=%zu unmatched=%zu "
      "p50_us=%.1f p90_us=%.1f p99_us=%.1f p999_us=%.1f max_us=%.1f over_50us_pct=%.3f "
      "silences_1ms=%zu silent_ms=%.1f longest_silence_ms=%.2f\n",
      r.packets, r.upstream_stamps, r.client_stamps, r.transit_ns.size(), r.unmatched_client,
      us(0.5), us(0.9), us(0.99), us(0.999), us(1.0),
      r.transit_ns.empty()
          ? 0.0
          : 100.0 * static_cast<double>(over) / static_cast<double>(r.transit_ns.size()),
      r.silences, static_cast<double>(r.silent_ns) / 1e6,
      static_cast<double>(r.longest_silence_ns) / 1e6);
  // The slowest, with when (ms into the capture) they reached the client: bursts show as runs.
  if (slowest > 0 && !in_order.empty()) {
    std::vector<std::size_t> idx(in_order.size());
    for (std::size_t i = 0; i < idx.size(); ++i) idx[i] = i;
    const auto n = std::min<std::size_t>(static_cast<std::size_t>(slowest), idx.size());
    std::partial_sort(idx.begin(), idx.begin() + static_cast<std::ptrdiff_t>(n), idx.end(),
                      [&](std::size_t a, std::size_t b) { return in_order[a] > in_order[b]; });
    for (std::size_t i = 0; i < n; ++i)
      std::printf("slow at_ms=%.3f transit_us=%.1f client_ns=%lld\n",
                  static_cast<double>(r.client_ns[idx[i]] - r.client_ns.front()) / 1e6,
                  static_cast<double>(in_order[idx[i]]) / 1e3,
                  static_cast<long long>(r.client_ns[idx[i]]));
  }
}
