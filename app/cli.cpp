#include "app/cli.hpp"

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <iostream>
#include <optional>
#include <thread>

#include <boost/asio/signal_set.hpp>

#include "config/config.hpp"
#include "config/log.hpp"
#include "hooks/hook.hpp"
#include "net/net.hpp"
#include "proxy/proxy_server.hpp"
#include "replay/analyze.hpp"
#include "replay/replay_send.hpp"
#include "replay/replay_server.hpp"
#include "sim/load_generator.hpp"
#include "sim/sim_server.hpp"
#include "tokentap/version.hpp"

// jemalloc's control interface: present when the binary is linked with jemalloc (CMakeLists.txt)
// or it is preloaded, null otherwise (a weak reference; jemalloc's header is not needed).
extern "C" int mallctl(const char* name, void* oldp, std::size_t* oldlenp, void* newp,
                       std::size_t newlen) __attribute__((weak));

namespace tokentap::app {

namespace {

// The allocator the process runs on, for --version and the proxy's start-up line: "jemalloc
// 5.3.0" or "libc malloc".
std::string allocator_name() {
  const char* v = nullptr;
  std::size_t n = sizeof v;
  if (mallctl != nullptr && mallctl("version", static_cast<void*>(&v), &n, nullptr, 0) == 0 &&
      v != nullptr) {
    const std::string_view version(v);
    return "jemalloc " + std::string(version.substr(0, version.find('-')));
  }
  return "libc malloc";
}

constexpr const char* main_help = R"(tokentap — a tracing reverse proxy for LLM inference endpoints

usage: tokentap <command> [flags]

commands:
  proxy          run the proxy in front of an inference API
  sim            run the simulated inference server (OpenAI + Anthropic compatible)
  demo           simulator + proxy + generated load, all in one process
  replay serve   answer requests with recorded responses, with their original timing
  replay send    re-issue recorded requests to a server, and compare its timing with the record
  analyze        summarize trace files
  check-config   validate a YAML config file

Run 'tokentap <command> --help' for the flags of a command.  'tokentap --version' prints the version.
)";

constexpr const char* proxy_help = R"(usage: tokentap proxy [flags]

  --config FILE            YAML config (upstreams, routes, timeouts, limits); flags override it
  --listen HOST:PORT       where clients connect (default 127.0.0.1:8080)
  --upstream URL           http:// or https:// inference API; replaces configured upstreams
  --admin HOST:PORT        /dashboard /api/stats /metrics /healthz /readyz (default 127.0.0.1:9464)
  --admin-token-file FILE  require this bearer token (or Basic auth password) on the admin
                           endpoints except /healthz and /readyz; TOKENTAP_ADMIN_TOKEN works too
  --threads N              I/O threads (default: one per core)
  --reuse-port             share --listen with other tokentap processes (SO_REUSEPORT): the
                           kernel spreads connections over them (each needs its own --admin)
  --ca-file FILE           extra CA bundle to trust for the --upstream
  --insecure-skip-verify   do not verify the --upstream's TLS certificate (testing only)
  --log-level LEVEL        debug | info | warn | error (default info)
  --no-access-log          do not log one line per request
  --trace-dir DIR          write one JSON line per exchange (DESIGN.md §5) into DIR

SIGINT/SIGTERM stop accepting, let in-flight streams finish (timeouts.shutdown_grace_ms), exit 0.
)";

constexpr const char* sim_help = R"(usage: tokentap sim [flags]

  --listen HOST:PORT       (default 127.0.0.1:8081)
  --threads N              (default 1)
  --ttft-ms N              time to first token (default 150)
  --itl-ms N               mean inter-token latency (default 15)
  --itl-jitter-ms N        spread of the inter-token latency (default 0)
  --itl-dist D             fixed | uniform | normal | exponential (default fixed)
  --tokens N               answer tokens per response (default 48)
  --reasoning-tokens N     reasoning tokens before the answer (default 0)
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
  --tls-cert FILE --tls-key FILE   serve HTTPS
  --log-level LEVEL

Each request may override any of these with a header x-sim-NAME (e.g. x-sim-ttft-ms: 500,
x-sim-reset-after: 10, x-sim-hang: 1).  GET /sim/stats shows counters.
)";

constexpr const char* demo_help = R"(usage: tokentap demo [flags]

Starts the simulator, the proxy in front of it, and a steady mixed load (streamed and plain OpenAI
chat, Anthropic messages with thinking, reasoning models, a few faults).  Ctrl-C stops everything.

  --listen HOST:PORT       proxy address (default 127.0.0.1:8080)
  --admin HOST:PORT        admin address (default 127.0.0.1:9464)
  --sim-listen HOST:PORT   simulator address (default 127.0.0.1:8081)
  --concurrency N          simulated clients (default 16)
  --duration-s N           stop after N seconds (default: run until Ctrl-C)
  --trace-dir DIR          where the trace records go (default: a new directory under $TMPDIR
                           or /tmp, named at start; at most 8 files of 16 MiB are kept)
  --log-level LEVEL        (default warn: the access log of the load would drown the summary)

On stop it prints the 'tokentap analyze' and 'tokentap replay serve' commands for its traces.
)";

constexpr const char* replay_help = R"(usage: tokentap replay serve --trace FILE [FILE...] [flags]
       tokentap replay send  --trace FILE [FILE...] --target URL [flags]

replay send: re-issues the recorded requests (redacted headers dropped; --header adds credentials)
with the recorded arrival pattern, a fixed concurrency or a fixed rate, measures TTFT, answer TTFT,
ITL, end to end and tokens/s exactly as the proxy does, and prints recorded vs replayed
P50/P95/P99 with the change in percent.  Exit status 1 if any request failed.

  --target URL             http://host:port of the server under test
  --concurrency N          a closed loop of N clients (instead of the recorded arrival pattern)
  --rate R                 an open loop at R requests per second
  --speed X                recorded arrival pattern X times faster (default 1)
  --header "Name: value"   one header added to every request (e.g. credentials)
  --report FILE            also write the comparison as JSON

replay serve:

An upstream that answers each request with a recorded response from the trace files: status,
headers and body byte for byte, each recorded read sent at its recorded offset.

  --trace FILE|DIR         trace file (JSON Lines from --trace-dir), or a directory of them;
                           more may follow
  --listen HOST:PORT       (default 127.0.0.1:8082)
  --speed X                timing multiplier: 2 = twice as fast (default 1)
  --match body|sequence    body: by a hash of method, path and body (default); sequence: in
                           recorded order.  A request that matches nothing gets 404 naming its hash.
)";

constexpr const char* analyze_help =
    R"(usage: tokentap analyze FILE|DIR... [--format text|json] [--by model|route|provider]
       tokentap analyze --compare A B [--format text|json]
       tokentap analyze FILE... --export csv|aiperf

--compare: two trace files side by side (B against A) with deltas and a behaviour-drift score (KL
divergence of output-length and step-kind distributions).  --export: per-request rows for other
load tools (csv: timestamps, token counts, TTFT, end to end, the ITL list; aiperf: JSON Lines with
timestamp, input_length, output_length).

Counts, outcome mix, TTFT / answer TTFT / end-to-end / ITL / overhead percentiles, tokens, cache
hit ratio and events, reasoning steps per response and the redundant-token share, slowest requests.
A directory stands for its .jsonl files.  Malformed or truncated lines are skipped with a warning.
)";

bool want_help(const std::vector<std::string>& args) {
  for (const auto& a : args)
    if (a == "--help" || a == "-h") return true;
  return false;
}

// Parses HOST:PORT for a flag, as a usage error on failure.
config::host_port address_flag(const flags& f, std::string_view name, config::host_port fallback) {
  auto v = f.get(name);
  if (!v) return fallback;
  std::string err;
  auto hp = config::parse_host_port(*v, err);
  if (!hp) throw usage_error{"--" + std::string(name) + ": " + err};
  return *hp;
}

void apply_log_level(const flags& f, std::string_view fallback) {
  const auto v = f.get("log-level").value_or(std::string(fallback));
  log::level l;
  if (!log::parse_level(v, l)) throw usage_error{"--log-level must be debug, info, warn or error"};
  log::set_level(l);
}

// Runs until `wait_done` returns, handling SIGINT/SIGTERM meanwhile: the first signal (or the
// optional timeout) calls `on_first` (begin a graceful stop), a second one `on_second` (force).
// `wait_done` runs on its own thread and typically joins the servers' threads.
void run_until_stopped(const std::function<void()>& on_first,
                       const std::function<void()>& on_second,
                       const std::function<void()>& wait_done,
                       std::optional<double> timeout_s = std::nullopt) {
  asio::io_context ioc(1);
  auto guard = asio::make_work_guard(ioc);
  asio::signal_set signals(ioc, SIGINT, SIGTERM);
  int count = 0;
  std::function<void(error_code, int)> on_signal = [&](error_code ec, int sig) {
    if (ec) return;
    if (++count == 1) {
      TT_LOG(info) << "signal " << sig << ": shutting down gracefully (again to force)";
      on_first();
    } else {
      TT_LOG(warn) << "second signal: closing all connections now";
      on_second();
    }
    signals.async_wait(on_signal);
  };
  signals.async_wait(on_signal);
  asio::steady_timer timer(ioc);
  if (timeout_s) {
    timer.expires_after(std::chrono::milliseconds(static_cast<long>(*timeout_s * 1000)));
    timer.async_wait([&](error_code ec) {
      if (!ec && count++ == 0) on_first();
    });
  }
  std::thread waiter([&] {
    wait_done();
    asio::post(ioc, [&] {
      error_code ignored;
      signals.cancel(ignored);
      timer.cancel();
      guard.reset();
    });
  });
  ioc.run();
  waiter.join();
}

int cmd_check_config(const std::vector<std::string>& args) {
  auto f = flags::parse("check-config", args, {}, {});
  if (f.positional().size() != 1) throw usage_error{"usage: tokentap check-config FILE"};
  const auto cfg = config::load_config_file(f.positional()[0]);
  try {
    hooks::builtin_hooks().check(cfg);
  } catch (const config::config_error& e) {
    throw config::config_error(f.positional()[0] + ": " + e.what());
  }
  std::cout << f.positional()[0] << ": ok (" << cfg.upstreams.size() << " upstream(s), "
            << cfg.routes.size() << " route(s))\n";
  return 0;
}

// The admin bearer token: from the file named by --admin-token-file / admin_token_file, else the
// TOKENTAP_ADMIN_TOKEN environment variable, else none.  Never from argv (visible in ps).
std::string admin_token(const std::string& file) {
  std::string token;
  if (!file.empty()) {
    std::ifstream in(file);
    if (!in) throw config::config_error("cannot read admin token file '" + file + "'");
    std::getline(in, token);
  } else if (const char* env = std::getenv("TOKENTAP_ADMIN_TOKEN")) {
    token = env;
  } else {
    return {};
  }
  while (!token.empty() && (token.back() == '\r' || token.back() == ' ' || token.back() == '\t'))
    token.pop_back();
  if (token.size() < 16 || token.size() > 1024)
    throw config::config_error("the admin token must be 16 to 1024 characters on one line");
  for (const char c : token)
    if (static_cast<unsigned char>(c) < 0x21 || c == 0x7f)
      throw config::config_error("the admin token must be printable, without spaces");
  return token;
}

config::config proxy_config(const flags& f) {
  config::config cfg;
  if (auto path = f.get("config")) cfg = config::load_config_file(*path, /*check=*/false);
  if (auto up = f.get("upstream")) config::set_single_upstream(cfg, *up);
  cfg.listen = address_flag(f, "listen", cfg.listen);
  cfg.admin = address_flag(f, "admin", cfg.admin);
  if (f.has("threads")) cfg.threads = static_cast<unsigned>(f.number("threads", 0, 0, 1024));
  if (f.has("reuse-port")) cfg.reuse_port = true;
  if (f.has("insecure-skip-verify") || f.has("ca-file")) {
    if (!f.has("upstream"))
      throw usage_error{
          "--insecure-skip-verify and --ca-file apply to --upstream; set tls_verify/ca_file per "
          "upstream in the config"};
    cfg.upstreams[0].tls_verify = !f.has("insecure-skip-verify");
    cfg.upstreams[0].ca_file = f.get("ca-file").value_or("");
  }
  if (auto l = f.get("log-level")) cfg.log_level = *l;
  if (f.has("no-access-log")) cfg.access_log = false;
  if (auto d = f.get("trace-dir")) cfg.trace.dir = *d;
  if (auto t = f.get("admin-token-file")) cfg.admin_token_file = *t;
  cfg.admin_token = admin_token(cfg.admin_token_file);
  config::validate(cfg);
  return cfg;
}

int cmd_proxy(const std::vector<std::string>& args) {
  if (want_help(args)) return std::cout << proxy_help, 0;
  auto f = flags::parse("proxy", args,
                        {"config", "listen", "upstream", "admin", "admin-token-file", "threads",
                         "ca-file", "log-level", "trace-dir"},
                        {"insecure-skip-verify", "no-access-log", "reuse-port"});
  if (!f.positional().empty()) throw usage_error{"unexpected argument '" + f.positional()[0] + "'"};
  auto cfg = proxy_config(f);
  log::level l;
  log::parse_level(cfg.log_level, l);
  log::set_level(l);
  proxy::proxy_server server(cfg);
  server.start();
  TT_LOG(info) << "tokentap " << version_string << " proxy listening on "
               << server.endpoint().address().to_string() << ":" << server.endpoint().port()
               << ", admin on " << server.admin_endpoint().address().to_string() << ":"
               << server.admin_endpoint().port() << " (" << allocator_name() << ")";
  for (const auto& r : server.cfg().routes) {
    const auto& up = server.cfg().upstreams[r.upstream_index];
    // (An unverified TLS upstream gets its own warning from the server.)
    std::string endpoints;
    for (const auto& e : up.endpoints) endpoints += (endpoints.empty() ? "" : ", ") + e.to_string();
    TT_LOG(info) << "route " << r.name << ": " << r.prefix << " -> " << up.name << " (" << endpoints
                 << ")";
  }
  // Machine-readable readiness line for scripts and tests (ports may be ephemeral).
  std::printf("ready proxy=%s:%u admin=%s:%u\n", server.endpoint().address().to_string().c_str(),
              server.endpoint().port(), server.admin_endpoint().address().to_string().c_str(),
              server.admin_endpoint().port());
  std::fflush(stdout);
  run_until_stopped([&] { server.shutdown(); },
                    [&] { server.shutdown(std::chrono::milliseconds(0)); }, [&] { server.join(); });
  TT_LOG(info) << "proxy stopped";
  return 0;
}

sim::server_options sim_options(const flags& f) {
  sim::server_options o;
  auto hp = address_flag(f, "listen", {"127.0.0.1", 8081});
  o.host = hp.host;
  o.port = hp.port;
  o.threads = static_cast<unsigned>(f.number("threads", 1, 1, 64));
  // Every x-sim-* header has the same-named flag; apply_header validates both.
  for (const char* name : {"ttft-ms", "itl-ms", "itl-jitter-ms", "itl-dist", "tokens",
                           "reasoning-tokens", "reasoning-field", "seed", "error-after",
                           "reset-after", "stall-after", "stall-ms", "prefill-us-per-token"}) {
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
  o.tls_cert = f.get("tls-cert").value_or("");
  o.tls_key = f.get("tls-key").value_or("");
  if (o.tls_cert.empty() != o.tls_key.empty())
    throw usage_error{"--tls-cert and --tls-key go together"};
  return o;
}

int cmd_sim(const std::vector<std::string>& args) {
  if (want_help(args)) return std::cout << sim_help, 0;
  auto f = flags::parse("sim", args,
                        {"listen",
                         "threads",
                         "ttft-ms",
                         "itl-ms",
                         "itl-jitter-ms",
                         "itl-dist",
                         "tokens",
                         "reasoning-tokens",
                         "reasoning-field",
                         "seed",
                         "fault-status",
                         "error-after",
                         "reset-after",
                         "stall-after",
                         "stall-ms",
                         "tls-cert",
                         "tls-key",
                         "log-level",
                         "prefill-us-per-token",
                         "cache-capacity",
                         "cache-ttl-s",
                         "evict-rate",
                         "context-window"},
                        {});
  apply_log_level(f, "info");
  sim::server server(sim_options(f));
  server.start();
  TT_LOG(info) << "tokentap sim listening on " << server.endpoint().address().to_string() << ":"
               << server.endpoint().port();
  std::printf("ready sim=%s:%u\n", server.endpoint().address().to_string().c_str(),
              server.endpoint().port());
  std::fflush(stdout);
  run_until_stopped([&] { server.shutdown(std::chrono::milliseconds(2000)); },
                    [&] { server.shutdown(std::chrono::milliseconds(0)); }, [&] { server.join(); });
  return 0;
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

// This binary's path, for the commands the demo prints.
std::string self_path() {
  std::error_code ec;
  const auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string("tokentap") : p.string();
}

int cmd_demo(const std::vector<std::string>& args) {
  if (want_help(args)) return std::cout << demo_help, 0;
  auto f = flags::parse(
      "demo", args,
      {"listen", "admin", "sim-listen", "concurrency", "duration-s", "trace-dir", "log-level"}, {});
  apply_log_level(f, "warn");
  const auto trace_dir = demo_trace_dir(f.get("trace-dir"));
  const auto sim_addr = address_flag(f, "sim-listen", {"127.0.0.1", 8081});
  sim::server_options so;
  so.host = sim_addr.host;
  so.port = sim_addr.port;
  so.threads = 1;
  // A real prefix cache with a short TTL, some eviction and a prefill cost, so every cache
  // event kind shows up within a minute.
  so.cache.capacity_blocks = 50000;
  so.cache.ttl = std::chrono::seconds(20);
  so.cache.evict_rate = 0.03;
  so.defaults.prefill_us_per_token = 30;
  sim::server sim_server(so);
  sim_server.start();

  config::config cfg;
  cfg.listen = address_flag(f, "listen", cfg.listen);
  cfg.admin = address_flag(f, "admin", cfg.admin);
  cfg.log_level = f.get("log-level").value_or("warn");
  cfg.cache.ttl = std::chrono::seconds(20);
  cfg.cache.min_prefix_tokens = 256;
  cfg.cache.context_windows = {{"sim-chat", 2500}};
  cfg.trace.dir = trace_dir;
  cfg.trace.max_file_bytes = 16u << 20;
  cfg.trace.max_files = 8;
  config::set_single_upstream(
      cfg, "http://" + sim_addr.host + ":" + std::to_string(sim_server.endpoint().port()));
  config::validate(cfg);
  proxy::proxy_server proxy_server(cfg);
  proxy_server.start();

  const auto p = proxy_server.endpoint();
  const auto a = proxy_server.admin_endpoint();
  const std::string base = "http://" + p.address().to_string() + ":" + std::to_string(p.port());
  const std::string admin = "http://" + a.address().to_string() + ":" + std::to_string(a.port());
  std::printf(
      "\ntokentap %s demo\n"
      "  simulator  http://%s:%u   (OpenAI + Anthropic compatible)\n"
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
      version_string, sim_addr.host.c_str(), sim_server.endpoint().port(), base.c_str(),
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

  std::optional<double> duration;
  if (f.has("duration-s")) duration = f.number("duration-s", 0, 1, 1e7);
  std::promise<void> stop_requested;
  run_until_stopped([&] { stop_requested.set_value(); },
                    [&] {
                      proxy_server.shutdown(std::chrono::milliseconds(0));
                      sim_server.shutdown(std::chrono::milliseconds(0));
                    },
                    [&] {
                      stop_requested.get_future().wait();
                      done = true;
                      reporter.join();
                      // No new requests; what is in flight gets two seconds to finish through the
                      // proxy.
                      load.request_stop();
                      proxy_server.shutdown(std::chrono::milliseconds(2000));
                      load.stop();
                      proxy_server.join();
                      sim_server.shutdown(std::chrono::milliseconds(1000));
                      sim_server.join();
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

// The trace files (or directories of them: replay::read_traces) named by --trace and the
// arguments.
std::vector<std::string> trace_files(const flags& f) {
  std::vector<std::string> files;
  if (auto t = f.get("trace")) files.push_back(*t);
  for (const auto& p : f.positional()) files.push_back(p);
  if (files.empty()) throw usage_error{"no trace file given"};
  return files;
}

replay::read_result load_traces(const std::vector<std::string>& files) {
  auto r = replay::read_traces(files);
  for (const auto& w : r.warnings) TT_LOG(warn) << w;
  if (r.skipped > r.warnings.size())
    TT_LOG(warn) << (r.skipped - r.warnings.size()) << " more lines skipped";
  return r;
}

int cmd_replay_send(const std::vector<std::string>& args) {
  auto f = flags::parse(
      "replay send", args,
      {"trace", "target", "concurrency", "rate", "speed", "header", "report", "log-level"}, {});
  apply_log_level(f, "info");
  replay::send_options o;
  const auto target = f.get("target");
  if (!target) throw usage_error{"--target URL is required"};
  std::string err;
  const auto u = config::parse_url(*target, err);
  if (!u) throw usage_error{"--target: " + err};
  if (u->tls) throw usage_error{"--target: https is not supported by replay send yet"};
  o.host = u->host;
  o.port = u->port;
  o.concurrency = static_cast<unsigned>(f.number("concurrency", 0, 0, 100000));
  o.rate = f.number("rate", 0, 0, 1e6);
  o.speed = f.number("speed", 1, 0.001, 1000);
  if (auto h = f.get("header")) {
    const auto colon = h->find(':');
    if (colon == std::string::npos) throw usage_error{"--header must be \"Name: value\""};
    auto value = h->substr(colon + 1);
    while (!value.empty() && value.front() == ' ') value.erase(0, 1);
    o.headers.emplace_back(h->substr(0, colon), value);
  }
  o.progress = isatty(STDERR_FILENO);
  const auto traces = load_traces(trace_files(f));
  if (traces.records.empty()) throw usage_error{"no usable trace records in the given files"};
  const auto result = replay::send(traces.records, o);
  std::cout << result.table;
  std::cout << traces.records.size() << " requests, " << result.failed << " failed\n";
  if (auto report = f.get("report")) {
    std::ofstream out(*report);
    if (!out) throw usage_error{"--report: cannot write " + *report};
    out << result.json;
  }
  return result.failed == 0 ? 0 : 1;
}

int cmd_replay(const std::vector<std::string>& args) {
  if (args.empty() || want_help(args)) return std::cout << replay_help, args.empty() ? 2 : 0;
  if (args[0] == "send") return cmd_replay_send({args.begin() + 1, args.end()});
  if (args[0] != "serve")
    throw usage_error{"unknown replay command '" + args[0] + "' (available: serve, send)"};
  auto f = flags::parse("replay serve", {args.begin() + 1, args.end()},
                        {"trace", "listen", "speed", "match", "threads", "log-level"}, {});
  apply_log_level(f, "info");
  replay::serve_options o;
  const auto hp = address_flag(f, "listen", {"127.0.0.1", 8082});
  o.host = hp.host;
  o.port = hp.port;
  o.speed = f.number("speed", 1, 0.001, 1000);
  o.threads = static_cast<unsigned>(f.number("threads", 1, 1, 64));
  const auto m = f.get("match").value_or("body");
  if (m != "body" && m != "sequence") throw usage_error{"--match must be body or sequence"};
  o.match = m == "body" ? replay::match_mode::body : replay::match_mode::sequence;
  auto traces = load_traces(trace_files(f));
  if (traces.records.empty()) throw usage_error{"no usable trace records in the given files"};
  const auto n = traces.records.size();
  replay::replay_server server(std::move(traces.records), o);
  server.start();
  TT_LOG(info) << "replaying " << n << " recorded exchanges on "
               << server.endpoint().address().to_string() << ":" << server.endpoint().port();
  std::printf("ready replay=%s:%u records=%zu\n", server.endpoint().address().to_string().c_str(),
              server.endpoint().port(), n);
  std::fflush(stdout);
  run_until_stopped([&] { server.shutdown(std::chrono::milliseconds(2000)); },
                    [&] { server.shutdown(std::chrono::milliseconds(0)); }, [&] { server.join(); });
  return 0;
}

int cmd_analyze(const std::vector<std::string>& args) {
  if (want_help(args)) return std::cout << analyze_help, 0;
  auto f = flags::parse("analyze", args, {"format", "by", "trace", "compare", "export"}, {});
  replay::analyze_options o;
  const auto fmt = f.get("format").value_or("text");
  if (fmt != "text" && fmt != "json") throw usage_error{"--format must be text or json"};
  o.json = fmt == "json";
  const auto by = f.get("by").value_or("");
  if (by == "model")
    o.by = replay::group_by::model;
  else if (by == "route")
    o.by = replay::group_by::route;
  else if (by == "provider")
    o.by = replay::group_by::provider;
  else if (!by.empty())
    throw usage_error{"--by must be model, route or provider"};
  if (auto a = f.get("compare")) {
    if (f.positional().size() != 1)
      throw usage_error{"--compare A B: give exactly the two trace files"};
    const auto ta = load_traces({*a});
    const auto tb = load_traces({f.positional()[0]});
    std::cout << replay::compare(ta.records, tb.records, o.json);
    return 0;
  }
  const auto traces = load_traces(trace_files(f));
  if (auto e = f.get("export")) {
    if (*e != "csv" && *e != "aiperf") throw usage_error{"--export must be csv or aiperf"};
    std::cout << replay::export_rows(traces.records, *e);
    return 0;
  }
  std::cout << replay::analyze(traces.records, o);
  if (!o.json && traces.skipped) std::cout << traces.skipped << " malformed lines skipped\n";
  return 0;
}

}  // namespace

flags flags::parse(std::string_view command, const std::vector<std::string>& args,
                   std::vector<std::string_view> valued, std::vector<std::string_view> booleans) {
  flags f;
  f.command_ = command;
  auto is_in = [](const std::vector<std::string_view>& v, std::string_view s) {
    return std::find(v.begin(), v.end(), s) != v.end();
  };
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string_view a = args[i];
    if (!a.starts_with("--")) {
      f.positional_.emplace_back(a);
      continue;
    }
    a.remove_prefix(2);
    std::string name(a.substr(0, a.find('=')));
    std::optional<std::string> inline_value;
    if (a.find('=') != std::string_view::npos)
      inline_value = std::string(a.substr(a.find('=') + 1));
    if (is_in(booleans, name)) {
      if (inline_value) throw usage_error{"--" + name + " takes no value"};
      f.values_[name] = "1";
    } else if (is_in(valued, name)) {
      if (!inline_value) {
        if (i + 1 >= args.size()) throw usage_error{"--" + name + " needs a value"};
        inline_value = args[++i];
      }
      f.values_[name] = *inline_value;
    } else {
      throw usage_error{"unknown flag --" + name + " (see 'tokentap " + std::string(command) +
                        " --help')"};
    }
  }
  return f;
}

std::optional<std::string> flags::get(std::string_view name) const {
  auto it = values_.find(std::string(name));
  if (it == values_.end()) return std::nullopt;
  return it->second;
}

double flags::number(std::string_view name, double fallback, double min, double max) const {
  auto v = get(name);
  if (!v) return fallback;
  double d = 0;
  auto [p, ec] = std::from_chars(v->data(), v->data() + v->size(), d);
  if (ec != std::errc{} || p != v->data() + v->size() || d < min || d > max) {
    throw usage_error{"--" + std::string(name) + " must be a number between " +
                      std::to_string(static_cast<long long>(min)) + " and " +
                      std::to_string(static_cast<long long>(max))};
  }
  return d;
}

int run(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    std::cout << main_help;
    return args.empty() ? 2 : 0;
  }
  if (args[0] == "--version" || args[0] == "version") {
    std::cout << "tokentap " << version_string << "\nallocator: " << allocator_name() << "\n";
    return 0;
  }
  const std::string command = args[0];
  args.erase(args.begin());
  try {
    if (command == "proxy") return cmd_proxy(args);
    if (command == "sim") return cmd_sim(args);
    if (command == "demo") return cmd_demo(args);
    if (command == "check-config") return cmd_check_config(args);
    if (command == "replay") return cmd_replay(args);
    if (command == "analyze") return cmd_analyze(args);
    throw usage_error{"unknown command '" + command + "' (see 'tokentap --help')"};
  } catch (const usage_error& e) {
    std::fprintf(stderr, "tokentap %s: %s\n", command.c_str(), e.message.c_str());
    return 2;
  } catch (const config::config_error& e) {
    std::fprintf(stderr, "tokentap %s: config: %s\n", command.c_str(), e.what());
    return 2;
  } catch (const boost::system::system_error& e) {
    std::fprintf(stderr, "tokentap %s: %s\n", command.c_str(), e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tokentap %s: %s\n", command.c_str(), e.what());
    return 2;
  }
}

}  // namespace tokentap::app
