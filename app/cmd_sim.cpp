#include "app/commands.hpp"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <future>
#include <iostream>
#include <optional>
#include <string>
#include <thread>

#include "base/log.hpp"
#include "proxy/proxy_server.hpp"
#include "sim/fleet.hpp"
#include "sim/load_generator.hpp"
#include "sim/sim_server.hpp"
#include "tokentap/version.hpp"

namespace tokentap::app {

namespace {

constexpr const char* sim_help = R"(usage: tokentap sim [flags]

  --listen HOST:PORT       (default 127.0.0.1:8081)
  --replicas N             N simulators on consecutive ports from --listen's (each on an
                           ephemeral port with :0), each with its own prefix cache (default 1)
  --threads N              (default 1, per replica)
  --ttft-ms N              time to first token (default 150)
  --itl-ms N               mean inter-token latency (default 15)
  --itl-jitter-ms N        spread of the inter-token latency (default 0)
  --itl-dist D             fixed | uniform | normal | exponential (default fixed)
  --tokens N               answer tokens per response (default 48)
  --reasoning-tokens N     reasoning tokens before the answer (default 0)
  --tokens-per-event N     OpenAI chat: N tokens in each streamed chunk, as engines that batch
                           their output do (default 1); with stream_options
                           .continuous_usage_stats every chunk reports the usage so far (vLLM)
  --reasoning-field F      reasoning_content | reasoning (OpenAI delta field)
  --seed N                 seed; same seed + same request = same response (default 42)
  --fault-status N         answer every request with this HTTP status
  --error-after N          send a provider error event after N tokens
  --reset-after N          reset the connection after N tokens
  --stall-after N          stall after N tokens for --stall-ms (0 = until the client leaves)
  --stall-ms N
  --prefill-us-per-token N TTFT grows by N µs per prompt token not served from the cache
  --cache-capacity N       prefix cache size in blocks of 16 tokens (default 0: no cache)
  --cache-ttl-s N          cached blocks expire after N s (default 300)
  --evict-rate P           probability that a request finds its prefix evicted (default 0)
  --context-window N       tokens; longer conversations lose their oldest messages (default 0: none)
  --max-batch N            at most N sequences decode at once; the others queue (default 0: no limit)
  --itl-per-seq-us U       each other sequence in the batch adds U µs to a response's token gaps
  --engine E               none | vllm | llama.cpp | tgi | ollama: report the engine's own timings
                           the way that engine does (vLLM's `metrics` object, llama.cpp's
                           `timings`, TGI's x-queue-time / x-inference-time headers on non-streamed
                           answers, Ollama's durations in ns on /api/chat and /api/generate)
  --tls-cert FILE --tls-key FILE   serve HTTPS
  --log-level LEVEL

Each request may override any of these with a header x-sim-NAME (e.g. x-sim-ttft-ms: 500,
x-sim-reset-after: 10, x-sim-hang: 1).  GET /sim/stats shows counters; GET /metrics the engine
model's batch, queue, prefix cache and latencies under vLLM's metric names.
)";

constexpr const char* demo_help = R"(usage: tokentap demo [flags]

Starts a fleet of simulator replicas, the proxy in front of them (one upstream balanced by prefix,
with failover and outlier ejection), and a steady mixed load (streamed and plain OpenAI chat,
multi-turn conversations, Anthropic messages with thinking, reasoning models, a few faults); now
and then takes a replica down and brings it back.  Ctrl-C stops everything.

  --listen HOST:PORT       proxy address (default 127.0.0.1:8080)
  --admin HOST:PORT        admin address (default 127.0.0.1:9464)
  --sim-listen HOST:PORT   the first simulator replica's address (default 127.0.0.1:8081); the
                           others take the next ports (ephemeral ones with :0)
  --replicas N             simulator replicas behind the proxy, balanced by prefix (default 3)
  --outage-every-s N       take a replica down this often, for half as long (at most 15 s), to
                           show ejection, failover and recovery (default 45; 0 = never)
  --concurrency N          simulated clients (default 16)
  --duration-s N           stop after N seconds (default: run until Ctrl-C)
  --trace-dir DIR          where the trace records go (default: a new directory under $TMPDIR
                           or /tmp, named at start; at most 8 files of 16 MiB are kept)
  --log-level LEVEL        (default warn: the access log of the load would drown the summary)

On stop it prints the 'tokentap analyze' and 'tokentap replay serve' commands for its traces.
)";

sim::server_options sim_options(const flags& f) {
  sim::server_options o;
  auto hp = address_flag(f, "listen", {"127.0.0.1", 8081});
  o.host = hp.host;
  o.port = hp.port;
  o.threads = static_cast<unsigned>(f.number("threads", 1, 1, 64));
  // Every x-sim-* header has the same-named flag; apply_header validates both.
  for (const char* name :
       {"ttft-ms", "itl-ms", "itl-jitter-ms", "itl-dist", "tokens", "tokens-per-event",
        "reasoning-tokens", "reasoning-field", "seed", "error-after", "reset-after", "stall-after",
        "stall-ms", "prefill-us-per-token"}) {
    if (auto v = f.get(name)) {
      if (auto err = sim::apply_header(o.defaults, name, *v))
        throw usage_error{"--" + std::string(name) + ": invalid value '" + *v + "'"};
    }
  }
  if (auto v = f.get("fault-status")) {
    if (sim::apply_header(o.defaults, "status", *v))
      throw usage_error{"--fault-status: invalid value"};
  }
  o.cache.capacity_blocks = static_cast<std::size_t>(f.number("cache-capacity", 0, 0, 1e9));
  o.cache.ttl =
      std::chrono::milliseconds(static_cast<long>(f.number("cache-ttl-s", 300, 0, 1e7) * 1000));
  o.cache.evict_rate = f.number("evict-rate", 0, 0, 1);
  o.context_window = static_cast<std::size_t>(f.number("context-window", 0, 0, 1e9));
  o.max_batch = static_cast<int>(f.number("max-batch", 0, 0, 1e6));
  o.itl_per_seq_us = f.number("itl-per-seq-us", 0, 0, 1e7);
  if (auto e = f.get("engine")) {
    const auto shape = sim::engine_shape_of(*e);
    if (!shape) throw usage_error{"--engine must be none, vllm, llama.cpp, tgi or ollama"};
    o.engine = *shape;
  }
  o.tls_cert = f.get("tls-cert").value_or("");
  o.tls_key = f.get("tls-key").value_or("");
  if (o.tls_cert.empty() != o.tls_key.empty())
    throw usage_error{"--tls-cert and --tls-key go together"};
  return o;
}

// The demo's trace directory: the one given (created if missing), else a new one named after the
// time under $TMPDIR (or /tmp).
std::string demo_trace_dir(const std::optional<std::string>& given) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (given) {
    fs::create_directories(*given, ec);
    if (ec || !fs::is_directory(*given)) throw usage_error{"--trace-dir: cannot create " + *given};
    return *given;
  }
  const char* tmp = std::getenv("TMPDIR");
  const auto t = std::time(nullptr);
  std::tm tm{};
  localtime_r(&t, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
  const auto dir = (fs::path(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") /
                    ("tokentap-demo-" + std::string(stamp) + "-" + std::to_string(::getpid())))
                       .string();
  fs::create_directories(dir, ec);
  if (ec) throw usage_error{"cannot create the trace directory " + dir + ": " + ec.message()};
  return dir;
}

std::string sim_url(const std::string& host, std::uint16_t port) {
  return "http://" + (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" +
         std::to_string(port);
}

// This binary's path, for the commands the demo prints.
std::string self_path() {
  std::error_code ec;
  const auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string("tokentap") : p.string();
}

}  // namespace

int cmd_sim(const std::vector<std::string>& args) {
  if (want_help(args)) return std::cout << sim_help, 0;
  auto f = flags::parse(
      "sim", args, {"listen",           "replicas",        "threads",     "ttft-ms",
                    "itl-ms",           "itl-jitter-ms",   "itl-dist",    "tokens",
                    "reasoning-tokens", "reasoning-field", "seed",        "fault-status",
                    "error-after",      "reset-after",     "stall-after", "stall-ms",
                    "tls-cert",         "tls-key",         "log-level",   "prefill-us-per-token",
                    "cache-capacity",   "cache-ttl-s",     "evict-rate",  "context-window",
                    "max-batch",        "itl-per-seq-us",  "engine",      "tokens-per-event"},
      {});
  apply_log_level(f, "info");
  const auto opts = sim_options(f);
  const auto replicas = static_cast<unsigned>(f.number("replicas", 1, 1, 64));
  if (opts.port != 0 && opts.port + replicas - 1 > 65535)
    throw usage_error{"--replicas: ports past 65535"};
  sim::fleet fleet(opts, replicas);
  // One line per replica, in port order: what scripts wait for.
  for (std::size_t i = 0; i < fleet.size(); ++i) {
    TT_LOG(info) << "tokentap sim listening on " << opts.host << ":" << fleet.port(i);
    std::printf("ready sim=%s:%u\n", opts.host.c_str(), fleet.port(i));
  }
  std::fflush(stdout);
  run_until_stopped([&] { fleet.shutdown(std::chrono::milliseconds(2000)); },
                    [&] { fleet.shutdown(std::chrono::milliseconds(0)); }, [&] { fleet.join(); });
  return 0;
}

int cmd_demo(const std::vector<std::string>& args) {
  if (want_help(args)) return std::cout << demo_help, 0;
  auto f = flags::parse("demo", args,
                        {"listen", "admin", "sim-listen", "replicas", "outage-every-s",
                         "concurrency", "duration-s", "trace-dir", "log-level"},
                        {});
  apply_log_level(f, "warn");
  const auto trace_dir = demo_trace_dir(f.get("trace-dir"));
  const auto sim_addr = address_flag(f, "sim-listen", {"127.0.0.1", 8081});
  const auto replicas = static_cast<unsigned>(f.number("replicas", 3, 1, 16));
  const double outage_every_s = f.number("outage-every-s", 45, 0, 1e6);
  sim::server_options so;
  so.host = sim_addr.host;
  so.port = sim_addr.port;
  so.threads = 1;
  // A real prefix cache per replica with a short TTL, some eviction and a prefill cost, so every
  // cache event kind shows up within a minute, and a conversation sent to another replica pays
  // its prefill again.
  so.cache.capacity_blocks = 50000;
  so.cache.ttl = std::chrono::seconds(20);
  so.cache.evict_rate = 0.03;
  so.defaults.prefill_us_per_token = 30;
  sim::fleet sims(so, replicas);

  config::config cfg;
  cfg.listen = address_flag(f, "listen", cfg.listen);
  cfg.admin = address_flag(f, "admin", cfg.admin);
  cfg.log_level = f.get("log-level").value_or("warn");
  config::set_hook_sections(
      cfg, "cache: {ttl_s: 20, min_prefix_tokens: 256, context_windows: {sim-chat: 2500}}");
  cfg.trace.dir = trace_dir;
  cfg.trace.max_file_bytes = 16u << 20;
  cfg.trace.max_files = 8;
  // The replicas as one upstream balanced by prefix: conversations return to the replica that
  // holds their cache; a replica taken down is retried around, ejected, and rejoins.
  config::set_single_upstream(cfg, sim_url(sim_addr.host, sims.port(0)));
  auto& up = cfg.upstreams.front();
  up.name = "sim-fleet";
  cfg.routes.front().upstream = up.name;
  for (std::size_t i = 1; i < sims.size(); ++i) {
    std::string err;
    up.endpoints.push_back(*config::parse_url(sim_url(sim_addr.host, sims.port(i)), err));
  }
  up.balance = "prefix";
  up.retries = 2;
  up.outlier.consecutive_failures = 3;
  up.outlier.base_ejection = std::chrono::seconds(5);
  up.outlier.max_ejection = std::chrono::seconds(20);
  config::validate(cfg);
  proxy::proxy_server proxy_server(cfg);
  proxy_server.start();

  const auto p = proxy_server.endpoint();
  const auto a = proxy_server.admin_endpoint();
  const std::string base = "http://" + p.address().to_string() + ":" + std::to_string(p.port());
  const std::string admin = "http://" + a.address().to_string() + ":" + std::to_string(a.port());
  std::string fleet_ports;
  for (std::size_t i = 0; i < sims.size(); ++i)
    fleet_ports += (i ? "," : "") + std::to_string(sims.port(i));
  std::printf(
      "\ntokentap %s demo\n"
      "  simulator  http://%s:%s   (%zu replicas, OpenAI + Anthropic compatible, balanced by "
      "prefix)\n"
      "  proxy      %s   <- send your requests here\n"
      "  dashboard  %s/dashboard   <- open this in a browser\n"
      "  metrics    %s/metrics  (Prometheus)   %s/api/stats  (JSON)\n"
      "  traces     %s   (one JSON line per exchange)\n\n"
      "try it:\n"
      "  curl -N %s/v1/chat/completions -H 'content-type: application/json' \\\n"
      "    -d "
      "'{\"model\":\"sim-small\",\"stream\":true,\"messages\":[{\"role\":\"user\",\"content\":"
      "\"hi\"}]}'\n\n"
      "generated load: %s clients, mixed OpenAI/Anthropic, streamed/plain, reasoning, faults.\n"
      "Ctrl-C stops everything.\n\n",
      version_string, sim_addr.host.c_str(), fleet_ports.c_str(), sims.size(), base.c_str(),
      admin.c_str(), admin.c_str(), admin.c_str(), trace_dir.c_str(), base.c_str(),
      f.get("concurrency").value_or("16").c_str());
  std::fflush(stdout);

  sim::load_options lo;
  lo.host = p.address().to_string();
  lo.port = p.port();
  lo.concurrency = static_cast<unsigned>(f.number("concurrency", 16, 1, 10000));
  lo.think_time = std::chrono::milliseconds(300);
  lo.next = [](unsigned c, std::uint64_t n) { return sim::demo_scenario(c, n, 42); };
  sim::load_generator load(lo);
  load.start();

  // A one-line summary every 5 s so the terminal shows the numbers moving.
  std::atomic<bool> done{false};
  std::thread reporter([&] {
    std::uint64_t last_events = 0;
    auto last = clock::now();
    while (!done) {
      for (int i = 0; i < 50 && !done; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      if (done) break;
      auto& t = load.totals();
      std::vector<double> ttfb;
      {
        std::lock_guard lk(t.mu);
        const auto n = std::min<std::size_t>(t.ttfb_ms.size(), 2000);
        ttfb.assign(t.ttfb_ms.end() - static_cast<long>(n), t.ttfb_ms.end());
      }
      const auto now = clock::now();
      const double secs = std::chrono::duration<double>(now - last).count();
      const auto events = t.events.load();
      std::printf(
          "requests ok=%llu failed=%llu  in flight=%llu  events/s=%.0f  TTFB p50=%.0fms "
          "p99=%.0fms\n",
          static_cast<unsigned long long>(t.ok.load()),
          static_cast<unsigned long long>(t.failed.load()),
          static_cast<unsigned long long>(t.active.load()),
          static_cast<double>(events - last_events) / secs, sim::percentile(ttfb, 0.5),
          sim::percentile(ttfb, 0.99));
      std::fflush(stdout);
      last_events = events;
      last = now;
    }
  });

  // Now and then a replica goes down for a while and comes back: the dashboard's endpoint table
  // shows its ejection, the others taking its conversations, and its return.
  std::thread outages([&] {
    if (outage_every_s <= 0 || sims.size() < 2) return;
    const auto pause = [&](double seconds) {
      for (double t = 0; t < seconds && !done; t += 0.1)
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      return !done.load();
    };
    for (std::size_t victim = sims.size() - 1; pause(outage_every_s);
         victim = (victim + 1) % sims.size()) {
      sims.take_down(victim);
      std::printf("replica %s:%u down (for %.0f s)\n", sim_addr.host.c_str(), sims.port(victim),
                  std::min(15.0, outage_every_s / 2));
      std::fflush(stdout);
      pause(std::min(15.0, outage_every_s / 2));
      if (done) break;
      const bool back = sims.bring_up(victim);
      std::printf("replica %s:%u %s\n", sim_addr.host.c_str(), sims.port(victim),
                  back ? "back up" : "could not rebind its port");
      std::fflush(stdout);
    }
  });

  std::optional<double> duration;
  if (f.has("duration-s")) duration = f.number("duration-s", 0, 1, 1e7);
  std::promise<void> stop_requested;
  run_until_stopped([&] { stop_requested.set_value(); },
                    [&] {
                      proxy_server.shutdown(std::chrono::milliseconds(0));
                      sims.shutdown(std::chrono::milliseconds(0));
                    },
                    [&] {
                      stop_requested.get_future().wait();
                      done = true;
                      reporter.join();
                      outages.join();
                      // No new requests; what is in flight gets two seconds to finish through the
                      // proxy.
                      load.request_stop();
                      proxy_server.shutdown(std::chrono::milliseconds(2000));
                      load.stop();
                      proxy_server.join();
                      sims.shutdown(std::chrono::milliseconds(1000));
                      sims.join();
                    },
                    duration);
  const auto self = self_path();
  std::printf(
      "demo stopped\n\n"
      "its traces are in %s:\n"
      "  %s analyze %s                 # latency, cache and step summary\n"
      "  %s replay serve --trace %s    # answer again with the recorded timing\n",
      trace_dir.c_str(), self.c_str(), trace_dir.c_str(), self.c_str(), trace_dir.c_str());
  return 0;
}

}  // namespace tokentap::app
