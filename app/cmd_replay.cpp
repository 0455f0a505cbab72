#include "app/commands.hpp"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <string>

#include "base/log.hpp"
#include "replay/analyze.hpp"
#include "replay/attribute.hpp"
#include "replay/replay_send.hpp"
#include "replay/replay_server.hpp"

namespace tokentap::app {

namespace {

constexpr const char* replay_help = R"(usage: tokentap replay serve --trace FILE [FILE...] [flags]
       tokentap replay send  --trace FILE [FILE...] --target URL [flags]

replay send: re-issues the recorded requests (redacted headers dropped; --header adds credentials)
with the recorded arrival pattern, a fixed concurrency or a fixed rate, measures TTFT, answer TTFT,
ITL, end to end and tokens/s exactly as the proxy does, and prints recorded vs replayed
P50/P95/P99 with the change in percent.  Each failure is listed with its id, how the record ended
and how the replay did: "failed as recorded" (the incident reproduced), "failed anew" (the record
was ok), "no longer fails".  Exit status 1 if a request failed anew.

  --target URL             http://host:port of the server under test
  --concurrency N          a closed loop of N clients (instead of the recorded arrival pattern)
  --rate R                 an open loop at R requests per second
  --speed X                recorded arrival pattern X times faster (default 1)
  --header "Name: value"   one header added to every request (e.g. credentials)
  --report FILE            also write the comparison as JSON
  --id ID[,ID...]          only the exchanges with these trace record ids

replay serve:

An upstream that answers each request with a recorded response from the trace files: status,
headers and body byte for byte, each recorded read sent at its recorded offset.

  --trace FILE|DIR         trace file (JSON Lines from --trace-dir), or a directory of them;
                           more may follow
  --listen HOST:PORT       (default 127.0.0.1:8090, clear of the demo's ports)
  --speed X                timing multiplier: 2 = twice as fast (default 1)
  --match body|sequence    body: by a hash of method, path and body (default); sequence: in
                           recorded order.  A request that matches nothing gets 404 naming its hash.
  --id ID[,ID...]          only the exchanges with these trace record ids (with --match sequence:
                           every request gets that one, e.g. the slowest of an incident)
)";

constexpr const char* analyze_help =
    R"(usage: tokentap analyze FILE|DIR... [--format text|json] [--by model|route|provider]
       tokentap analyze --compare A B [--format text|json]
       tokentap analyze FILE|DIR... --export csv|aiperf
       tokentap analyze FILE|DIR... --id ID[,ID...] [--format text|json]
       tokentap analyze FILE|DIR... --attribute [--format text|json]
       tokentap analyze --attribute --compare A B [--format text|json]

--compare: two trace files side by side (B against A) with deltas and a behaviour-drift score (KL
divergence of output-length and step-kind distributions).  --export: per-request rows for other
load tools (csv: timestamps, token counts, TTFT, end to end, the ITL list; aiperf: JSON Lines with
timestamp, input_length, output_length).  --id: the exchanges with those trace record ids in full
(the dashboard's slowest requests show theirs): request, outcome, timing, usage, cache events,
steps, reads, and the commands that replay it; with --format json, the records as written.
--attribute: where TTFT and end to end went at P50 / P95 / P99 — each phase's mean over the
requests around the quantile and its share (tokentap's own work, connecting, failed attempts,
injected faults, the wait for the head and the first token or, where the engine reported its
timings, its queue, prefill and what neither explains), with the turns that lost their cached
prefix and why; with --compare A B, the phases that grew from A to B, largest first, one line
per quantile to paste into an incident.

Counts, outcome mix, TTFT / answer TTFT / end-to-end / ITL / overhead percentiles, tokens, cache
hit ratio and events, reasoning steps per response and the redundant-token share, slowest requests.
A directory stands for its .jsonl files.  Malformed or truncated lines are skipped with a warning.
)";

// The trace files (or directories of them: replay::read_traces) named by --trace and the
// arguments.
std::vector<std::string> trace_files(const flags& f) {
  std::vector<std::string> files;
  if (auto t = f.get("trace")) files.push_back(*t);
  for (const auto& p : f.positional()) files.push_back(p);
  if (files.empty()) throw usage_error{"no trace file given"};
  return files;
}

// --id ID[,ID...]: the records to keep (empty: all).
std::vector<std::string> ids_of(const flags& f) {
  std::vector<std::string> ids;
  if (auto v = f.get("id")) {
    for (std::size_t at = 0; at <= v->size();) {
      const auto comma = std::min(v->find(',', at), v->size());
      if (comma > at) ids.push_back(v->substr(at, comma - at));
      at = comma + 1;
    }
    if (ids.empty()) throw usage_error{"--id needs a record id"};
  }
  return ids;
}

// The records of those files (only those named by `ids`, when any); none at all is a usage error
// (exit 2) naming where it looked.
replay::read_result load_traces(const std::vector<std::string>& files,
                                const std::vector<std::string>& ids = {}) {
  auto r = replay::read_traces(files, ids);
  if (r.records.empty()) {
    std::string where;
    for (const auto& f : files) where += (where.empty() ? "" : ", ") + f;
    std::string which = "no trace records";
    if (!ids.empty()) {
      which = "no trace record with id";
      for (const auto& id : ids) which += " " + id;
    }
    throw usage_error{which + " found in " + where +
                      (r.warnings.empty() ? "" : " (" + r.warnings.front() + ")")};
  }
  for (const auto& w : r.warnings) TT_LOG(warn) << w;
  if (r.skipped > r.warnings.size())
    TT_LOG(warn) << (r.skipped - r.warnings.size()) << " more lines skipped";
  return r;
}

int cmd_replay_send(const std::vector<std::string>& args) {
  auto f = flags::parse(
      "replay send", args,
      {"trace", "target", "concurrency", "rate", "speed", "header", "report", "id", "log-level"},
      {});
  apply_log_level(f, "info");
  replay::send_options o;
  const auto target = target_flag(f, "replay send");
  o.host = target.host;
  o.port = target.port;
  o.concurrency = static_cast<unsigned>(f.number("concurrency", 0, 0, 100000));
  o.rate = f.number("rate", 0, 0, 1e6);
  o.speed = f.number("speed", 1, 0.001, 1000);
  if (auto h = header_flag(f)) o.headers.push_back(std::move(*h));
  o.progress = isatty(STDERR_FILENO);
  const auto traces = load_traces(trace_files(f), ids_of(f));
  const auto result = replay::send(traces.records, o);
  std::cout << result.table;
  std::cout << traces.records.size() << " requests, " << result.failed << " failed ("
            << result.failed_as_recorded << " as recorded, " << result.failed_anew << " anew), "
            << result.recovered << " recorded failures no longer fail\n";
  // The failures a person looks at first: anew, then as recorded; a long list is cut.
  std::size_t shown = 0, at = 0;
  for (; at < result.failures.size() && shown < 50; ++shown)
    at = result.failures.find('\n', at) + 1;
  std::cout << result.failures.substr(0, at);
  if (at < result.failures.size()) std::cout << "  … (--report FILE lists them all)\n";
  if (auto report = f.get("report")) {
    std::ofstream out(*report);
    if (!out) throw usage_error{"--report: cannot write " + *report};
    out << result.json;
  }
  return result.failed_anew == 0 ? 0 : 1;
}

}  // namespace

int cmd_replay(const std::vector<std::string>& args) {
  if (args.empty() || want_help(args)) return std::cout << replay_help, args.empty() ? 2 : 0;
  if (args[0] == "send") return cmd_replay_send({args.begin() + 1, args.end()});
  if (args[0] != "serve")
    throw usage_error{"unknown replay command '" + args[0] + "' (available: serve, send)"};
  auto f = flags::parse("replay serve", {args.begin() + 1, args.end()},
                        {"trace", "listen", "speed", "match", "threads", "id", "log-level"}, {});
  apply_log_level(f, "info");
  replay::serve_options o;
  const auto hp = address_flag(f, "listen", {"127.0.0.1", 8090});
  o.host = hp.host;
  o.port = hp.port;
  o.speed = f.number("speed", 1, 0.001, 1000);
  o.threads = static_cast<unsigned>(f.number("threads", 1, 1, 64));
  const auto m = f.get("match").value_or("body");
  if (m != "body" && m != "sequence") throw usage_error{"--match must be body or sequence"};
  o.match = m == "body" ? replay::match_mode::body : replay::match_mode::sequence;
  auto traces = load_traces(trace_files(f), ids_of(f));
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
  auto f = flags::parse("analyze", args, {"format", "by", "trace", "compare", "export", "id"},
                        {"attribute"});
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
    if (f.has("attribute")) {
      std::cout << replay::attribute_compare(replay::summarize_attribution(ta.records),
                                             replay::summarize_attribution(tb.records), o.json);
      return 0;
    }
    std::cout << replay::compare(ta.records, tb.records, o.json);
    return 0;
  }
  if (f.get("id")) {
    // One exchange (or a few) in full: for a person, or its record as written (json).
    const auto files = trace_files(f);
    const auto traces = load_traces(files, ids_of(f));
    for (const auto& r : traces.records)
      std::cout << (o.json ? r.raw + "\n" : replay::describe(r, files.front()));
    return 0;
  }
  const auto traces = load_traces(trace_files(f));
  if (auto e = f.get("export")) {
    if (*e != "csv" && *e != "aiperf") throw usage_error{"--export must be csv or aiperf"};
    std::cout << replay::export_rows(traces.records, *e);
    return 0;
  }
  if (f.has("attribute")) {
    std::cout << replay::attribute_report(replay::summarize_attribution(traces.records), o.json);
    return 0;
  }
  std::cout << replay::analyze(traces.records, o);
  if (!o.json && traces.skipped) std::cout << traces.skipped << " malformed lines skipped\n";
  return 0;
}

}  // namespace tokentap::app
