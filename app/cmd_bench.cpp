#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <thread>

#include "app/commands.hpp"
#include "base/json.hpp"
#include "bench/compare.hpp"
#include "bench/recorded.hpp"
#include "bench/report.hpp"
#include "bench/run.hpp"
#include "bench/summary.hpp"
#include "bench/synthetic.hpp"
#include "bench/workload.hpp"
#include "tokentap/version.hpp"

namespace tokentap::app {

namespace {

constexpr const char* bench_help =
    R"(usage: tokentap bench run --target URL --workload FILE --out DIR [flags]
       tokentap bench compare A B [--format text|json] [--min-change PCT]
       tokentap bench report A [B] [--out FILE]

bench run: sends a workload to a target, level by level, measures every response with the
proxy's own decoders (TTFT, answer TTFT, gaps between events, TPOT, end to end, usage), and
writes DIR/run.json, DIR/requests.jsonl, DIR/summary.json and a trace record per request in
DIR/traces/ (tokentap analyze and replay read it; requests.jsonl names each one's trace_id).
docs/bench.md has the definitions.

  --target URL              http://host:port of the server under test
  --workload FILE           JSONL, one task per line: {"id", "category", "messages" | "prompt",
                            "answer", "grader": "exact|numeric|choice|regex", "max_tokens"};
                            or ShareGPT conversations (JSONL or one JSON array), each a
                            conversation whose turns resend their history with the server's
                            answers; or YAML with a `synthetic:` section (lengths, shared
                            system prompts, multi-turn conversations, cache breakers:
                            docs/bench.md); or a directory of trace records: their requests
                            as recorded, by default on their recorded schedule
  --speed S[,S...]          a recorded schedule played S times as fast; a list is a sweep
                            (default 1; one pass unless --requests or --duration-s say more)
  --out DIR                 the run directory (created; its files are replaced)
  --model NAME              the model every request names (default: default)
  --concurrency N[,N...]    closed loop: N clients; a list is a sweep (default 1)
                            (conversations: N at a time, each turn after the last answer)
  --rate R[,R...]           open loop: R requests per second; a list is a sweep
                            (conversations: R conversations started per second)
  --arrival KIND            constant | poisson | gamma (open loop; default poisson)
  --burstiness B            gamma's shape: 1 Poisson, below 1 burstier (default 1)
  --requests N              per level, warm-up excluded (a conversation's turns each count)
  --duration-s S            per level, warm-up excluded (one of --requests, --duration-s needed)
  --warmup-s S              sent first at each level, left out of its figures (default 0)
  --goodput SLOS            e.g. ttft_ms:500,itl_ms:50 (ttft_ms, ttfo_ms, itl_ms, tpot_ms, e2e_ms)
  --header "Name: value"    added to every request (e.g. credentials)
  --seed N                  open-loop schedules (default 1)
  --max-reasoning-steps K   count the responses whose reasoning ran past K steps
  --continuous-usage        ask for the usage in every chunk (vLLM's stream_options
                            .continuous_usage_stats): ITL then counts an event of k tokens as k
                            gaps (per token); without it ITL is one gap per event (OpenAI's API
                            refuses the option)

bench compare: for TTFT, answer TTFT, TPOT and end to end (P50, P99) and the accuracy of graded
tasks, B's change from A in percent with a bootstrap 95 % interval (requests paired by id when
both ran the same workload) and a verdict.  Exit status 1 when a metric is worse: a latency whose
whole interval lies above --min-change (default 5) percent, an accuracy whose interval lies
below 0.

bench report: one self-contained HTML page (no script, nothing fetched: it opens offline) of run
A, or of A against B — each level's figures, CDFs of TTFT, ITL and end to end, latency and
throughput against load for a sweep, accuracy per category with its 95 % interval, the prompt
cache's hit ratio and the events behind its misses.  Written to --out (default A/report.html).
)";

std::string read_file(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw usage_error{std::string(what) + ": cannot read " + path};
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_file(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out || !(out << text)) throw usage_error{"--out: cannot write " + path.string()};
}

// "1,4,16" as numbers in [min, max].
std::vector<double> number_list(const flags& f, std::string_view name, double min, double max) {
  std::vector<double> out;
  const auto text = *f.get(name);
  std::size_t at = 0;
  while (at <= text.size()) {
    const auto comma = std::min(text.find(',', at), text.size());
    const auto item = text.substr(at, comma - at);
    double v = 0;
    const auto r = std::from_chars(item.data(), item.data() + item.size(), v);
    if (item.empty() || r.ec != std::errc() || r.ptr != item.data() + item.size() || v < min ||
        v > max)
      throw usage_error{"--" + std::string(name) + " takes numbers from " +
                        std::to_string(static_cast<long long>(min)) + " to " +
                        std::to_string(static_cast<long long>(max)) + ", comma-separated"};
    out.push_back(v);
    at = comma + 1;
  }
  return out;
}

const char* load_name(bench::level::kind k) {
  switch (k) {
    case bench::level::kind::rate:
      return "rate";
    case bench::level::kind::schedule:
      return "schedule";
    case bench::level::kind::concurrency:
      break;
  }
  return "concurrency";
}

// "2026-12-07T19:30:00Z"
std::string now_rfc3339() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

int cmd_bench_run(const std::vector<std::string>& args) {
  const auto f =
      flags::parse("bench run", args,
                   {"target", "workload", "out", "model", "concurrency", "rate", "arrival",
                    "burstiness", "requests", "duration-s", "warmup-s", "goodput", "header", "seed",
                    "log-level", "max-reasoning-steps", "speed"},
                   {"continuous-usage"});
  apply_log_level(f, "warn");
  bench::run_options o;
  const auto workload = f.get("workload");
  const auto out_dir = f.get("out");
  if (!f.has("target") || !workload || !out_dir)
    throw usage_error{"--target URL, --workload FILE and --out DIR are required"};
  const auto target = target_flag(f, "bench");
  o.host = target.host;
  o.port = target.port;
  std::string err;
  if (auto m = f.get("model")) o.model = *m;
  if (f.has("concurrency") && f.has("rate"))
    throw usage_error{"--concurrency (closed loop) and --rate (open loop) exclude each other"};
  if (f.has("rate")) {
    o.load = bench::level::kind::rate;
    o.values = number_list(f, "rate", 0.001, 1e6);
  } else if (f.has("concurrency")) {
    o.values = number_list(f, "concurrency", 1, 100000);
    for (const double v : o.values)
      if (v != static_cast<double>(static_cast<long long>(v)))
        throw usage_error{"--concurrency takes whole numbers"};
  }
  if (auto a = f.get("arrival")) {
    const auto kind = bench::arrival_of(*a);
    if (!kind) throw usage_error{"--arrival must be constant, poisson or gamma"};
    o.arrivals = *kind;
  }
  o.burstiness = f.number("burstiness", 1, 0.01, 100);
  o.requests = static_cast<std::size_t>(f.number("requests", 0, 0, 1e9));
  o.duration_s = f.number("duration-s", 0, 0, 86400 * 7);
  o.warmup_s = f.number("warmup-s", 0, 0, 86400);
  o.seed = static_cast<std::uint64_t>(f.number("seed", 1, 0, 1e15));
  o.continuous_usage = f.has("continuous-usage");
  const auto max_steps = static_cast<std::uint32_t>(f.number("max-reasoning-steps", 0, 0, 1e6));
  // A directory of trace records is a recorded workload: its requests as they were sent, by
  // default on their recorded schedule (--speed), one pass unless told more.
  std::error_code ec;
  const bool recorded = std::filesystem::is_directory(*workload, ec);
  if (f.has("speed")) {
    if (!recorded) throw usage_error{"--speed replays a recorded workload (a trace directory)"};
    if (f.has("concurrency") || f.has("rate"))
      throw usage_error{"--speed (the recorded schedule) excludes --concurrency and --rate"};
  }
  if (recorded && !f.has("concurrency") && !f.has("rate")) {
    o.load = bench::level::kind::schedule;
    o.values = f.has("speed") ? number_list(f, "speed", 0.001, 1e6) : std::vector<double>{1};
  } else if (o.requests == 0 && o.duration_s == 0) {
    throw usage_error{"a level needs --requests N or --duration-s S"};
  }
  bench::slo goodput;
  if (auto g = f.get("goodput")) {
    const auto s = bench::parse_slo(*g, err);
    if (!s) throw usage_error{err};
    goodput = *s;
  }
  if (auto h = header_flag(f)) o.headers.push_back(std::move(*h));
  std::size_t skipped = 0, unasked = 0;
  const auto tasks = [&]() -> std::optional<std::vector<bench::task>> {
    if (recorded) return bench::recorded_tasks(*workload, skipped, err);
    const auto text = read_file(*workload, "--workload");
    if (!bench::is_synthetic(text)) return bench::read_tasks(text, *workload, err, &unasked);
    const auto spec = bench::read_synthetic(text, *workload, err);
    if (!spec) return std::nullopt;
    return bench::synthetic_tasks(*spec);
  }();
  if (!tasks) throw usage_error{err};
  if (skipped > 0)
    std::fprintf(stderr, "tokentap bench: %zu line(s) of %s were not trace records; left out\n",
                 skipped, workload->c_str());
  if (unasked > 0)
    std::fprintf(stderr,
                 "tokentap bench: %zu conversation(s) of %s have no human message; left out\n",
                 unasked, workload->c_str());
  std::filesystem::create_directories(*out_dir, ec);
  if (ec) throw usage_error{"--out: cannot create " + *out_dir + " (" + ec.message() + ")"};
  // The run's trace records (what `tokentap analyze` and `replay` read), a fresh set per run.
  const auto traces = std::filesystem::path(*out_dir) / "traces";
  std::filesystem::remove_all(traces, ec);
  std::filesystem::create_directories(traces, ec);
  if (ec) throw usage_error{"--out: cannot create " + traces.string() + " (" + ec.message() + ")"};
  o.trace_dir = traces.string();

  // A progress line on a terminal: level, requests done, errors, TTFT P50 of the last ones.
  const bool tty = isatty(STDOUT_FILENO) != 0;
  std::size_t done = 0, errors = 0, level = 0;
  std::vector<double> recent;
  auto shown = std::chrono::steady_clock::now();
  o.on_request = [&](const bench::request_result& r) {
    ++done;
    errors += r.ok ? 0 : 1;
    if (r.level != level) level = r.level, done = 1, errors = r.ok ? 0 : 1, recent.clear();
    if (r.ttft_ms >= 0) {
      if (recent.size() == 256) recent.erase(recent.begin());
      recent.push_back(r.ttft_ms);
    }
    const auto now = std::chrono::steady_clock::now();
    if (!tty || now - shown < std::chrono::milliseconds(200)) return;
    shown = now;
    auto sorted = recent;
    std::sort(sorted.begin(), sorted.end());
    std::printf("\r\x1b[Klevel %zu/%zu (%s %g): %zu requests, %zu errors, TTFT P50 %.1f ms",
                level + 1, o.values.size(), load_name(o.load), o.values[level], done, errors,
                sorted.empty() ? 0.0 : bench::percentile(sorted, 50));
    std::fflush(stdout);
  };
  const auto started = now_rfc3339();
  const auto result = bench::run(*tasks, o);
  if (tty) std::printf("\r\x1b[K");

  std::string requests;
  for (const auto& r : result.requests) requests += bench::request_json(r) + "\n";
  const std::filesystem::path dir(*out_dir);
  write_file(dir / "requests.jsonl", requests);
  write_file(dir / "summary.json", bench::summary_json(result.levels, goodput, max_steps) + "\n");
  std::string run_json;
  {
    base::json::writer w(run_json);
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    w.begin_object()
        .field("tokentap", version_string)
        .field("started", started)
        .field("target", *f.get("target"))
        .field("workload", *workload)
        .field("tasks", tasks->size())
        .field("model", o.model)
        .key("load")
        .begin_object()
        .field("kind", load_name(o.load))
        .key("values")
        .begin_array();
    for (const double v : o.values) w.significant(v, 6);
    w.end();
    if (o.load == bench::level::kind::rate) {
      w.field("arrival", o.arrivals == bench::arrival::constant  ? "constant"
                         : o.arrivals == bench::arrival::poisson ? "poisson"
                                                                 : "gamma");
      w.key("burstiness").significant(o.burstiness, 6);
    }
    w.end().field("requests", o.requests);
    w.key("duration_s").significant(o.duration_s, 6);
    w.key("warmup_s").significant(o.warmup_s, 6);
    w.field("seed", o.seed).field("goodput", f.get("goodput").value_or(""));
    w.field("continuous_usage", o.continuous_usage);
    w.key("machine")
        .begin_object()
        .field("host", std::string(host))
        .field("cores", std::thread::hardware_concurrency())
        .end()
        .end();
  }
  write_file(dir / "run.json", run_json + "\n");
  // What a person reads: each level in a line.
  for (const auto& l : result.levels) {
    std::size_t n = 0, ok = 0;
    std::vector<double> ttft, e2e;
    for (const auto& r : l.requests) {
      if (r.warmup) continue;
      ++n;
      if (!r.ok) continue;
      ++ok;
      if (r.ttft_ms >= 0) ttft.push_back(r.ttft_ms);
      if (r.e2e_ms >= 0) e2e.push_back(r.e2e_ms);
    }
    const auto t = bench::summarize(ttft), e = bench::summarize(e2e);
    std::printf(
        "%s %g: %zu requests, %zu ok, %.2f req/s, TTFT P50 %.1f P99 %.1f ms, end to end "
        "P50 %.1f P99 %.1f ms\n",
        load_name(l.load), l.value, n, ok,
        l.duration_s > 0 ? static_cast<double>(ok) / l.duration_s : 0.0, t.p50, t.p99, e.p50,
        e.p99);
  }
  std::printf("wrote %s/{run.json,requests.jsonl,summary.json,traces/}\n", out_dir->c_str());
  return 0;
}

int cmd_bench_compare(const std::vector<std::string>& args) {
  const auto f = flags::parse("bench compare", args, {"format", "min-change"}, {});
  if (f.positional().size() != 2) throw usage_error{"usage: tokentap bench compare A B"};
  const auto format = f.get("format").value_or("text");
  if (format != "text" && format != "json") throw usage_error{"--format must be text or json"};
  bench::compare_options o;
  o.min_change_pct = f.number("min-change", 5, 0, 1000);
  std::vector<bench::request_result> runs[2];
  for (int i = 0; i < 2; ++i) {
    const auto file = (std::filesystem::path(f.positional()[i]) / "requests.jsonl").string();
    std::string err;
    auto r = bench::read_requests(read_file(file, "bench compare"), file, err);
    if (!r) throw usage_error{err};
    runs[i] = std::move(*r);
  }
  const auto c = bench::compare_runs(runs[0], runs[1], o);
  std::cout << (format == "json" ? bench::comparison_json(c) + "\n" : bench::comparison_text(c));
  return c.regressed() ? 1 : 0;
}

int cmd_bench_report(const std::vector<std::string>& args) {
  const auto f = flags::parse("bench report", args, {"out"}, {});
  const auto& dirs = f.positional();
  if (dirs.empty() || dirs.size() > 2) throw usage_error{"usage: tokentap bench report A [B]"};
  std::vector<bench::report_run> runs;
  for (const auto& d : dirs) {
    const std::filesystem::path dir(d);
    bench::report_run r;
    r.name = std::filesystem::absolute(dir).lexically_normal().filename().string();
    if (r.name.empty()) r.name = dir.lexically_normal().parent_path().filename().string();
    r.run_json = read_file((dir / "run.json").string(), "bench report");
    r.summary_json = read_file((dir / "summary.json").string(), "bench report");
    const auto file = (dir / "requests.jsonl").string();
    std::string err;
    auto requests = bench::read_requests(read_file(file, "bench report"), file, err);
    if (!requests) throw usage_error{err};
    r.requests = std::move(*requests);
    runs.push_back(std::move(r));
  }
  if (runs.size() == 2 && runs[0].name == runs[1].name) runs[1].name += " (2)";
  std::string err;
  const auto html = bench::report_html(runs, err);
  if (!html) throw usage_error{err};
  const auto out = f.get("out").value_or((std::filesystem::path(dirs[0]) / "report.html").string());
  write_file(out, *html);
  std::printf("wrote %s\n", out.c_str());
  return 0;
}

}  // namespace

int cmd_bench(const std::vector<std::string>& args) {
  if (args.empty() || want_help(args)) return std::cout << bench_help, args.empty() ? 2 : 0;
  if (args[0] == "run") return cmd_bench_run({args.begin() + 1, args.end()});
  if (args[0] == "compare") return cmd_bench_compare({args.begin() + 1, args.end()});
  if (args[0] == "report") return cmd_bench_report({args.begin() + 1, args.end()});
  throw usage_error{"bench takes run, compare or report (see 'tokentap bench --help')"};
}

}  // namespace tokentap::app
