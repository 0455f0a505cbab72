#include "replay/replay_send.hpp"

// g++ 12 false positive on coroutines of asio's awaitable<T, io_context::executor_type>: the
// frame's own operator new/delete pair (thread-local recycling) is reported as mismatched once
// inlined.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif

#include <algorithm>
#include <cstdio>
#include <mutex>

#include <boost/asio/detached.hpp>
#include <boost/beast/core/string.hpp>

#include "base/clock.hpp"
#include "base/json.hpp"
#include "net/http_rules.hpp"
#include "net/net.hpp"
#include "replay/analyze.hpp"
#include "replay/measure.hpp"

namespace tokentap::replay {

namespace {

// Headers a replayed request keeps: no secrets (they were redacted), nothing connection-specific.
bool replayable(std::string_view name, std::string_view value) {
  if (value == "[redacted]" || net::is_hop_by_hop(name)) return false;
  for (std::string_view skip :
       {"host", "content-length", "x-forwarded-for", "x-forwarded-proto", "accept-encoding"})
    if (beast::iequals(name, skip)) return false;
  return true;
}

awaitable<void> send_one(const measurer& meas, const record& r, const send_options& o,
                         measured& m) {
  outgoing out;
  out.method = r.method;
  out.target = r.path;
  for (const auto& [k, v] : r.request_headers)
    if (replayable(k, v)) out.headers.emplace_back(k, v);
  for (const auto& h : o.headers) out.headers.push_back(h);
  out.body = r.body.value_or("");
  measurement got;
  co_await meas.measure(out, got);
  m.status = got.status;
  m.ok = got.ok;
  m.outcome = got.outcome;
  m.error = got.error;
  m.ttft_ms = got.ttft_ms;
  m.ttft_answer_ms = got.ttfo_ms;
  m.e2e_ms = got.e2e_ms;
  m.itl_median_ms = got.itl_median_ms;
  m.tokens_per_s = got.tokens_per_s;
}

// "stream_error", "upstream_reset after 200", "status 503", "ok".
std::string ending(std::string_view outcome, int status) {
  std::string s(outcome);
  if (status >= 400 && outcome != "no_response")
    s = (outcome == "ok" ? "" : s + ", ") + "status " + std::to_string(status);
  return s;
}

}  // namespace

bool failed(const record& r) noexcept {
  return (!r.outcome.empty() && r.outcome != "ok") || r.status >= 400;
}

send_result send(const std::vector<record>& records, const send_options& o) {
  send_result res;
  res.replayed.resize(records.size());
  for (std::size_t i = 0; i < records.size(); ++i) {
    auto& m = res.replayed[i];
    m.id = records[i].id;
    m.recorded_ok = !failed(records[i]);
    m.recorded_outcome =
        ending(records[i].outcome.empty() ? "ok" : records[i].outcome, records[i].status);
  }
  const measurer meas({.host = o.host, .port = o.port});
  asio::io_context ioc(1);
  std::size_t done = 0;
  std::mutex mu;
  auto finished = [&] {
    std::lock_guard lk(mu);
    ++done;
    if (o.progress) {
      const int width = 30;
      const int filled = static_cast<int>(width * done / std::max<std::size_t>(1, records.size()));
      std::fprintf(stderr, "\r[%.*s%*s] %zu/%zu", filled, "##############################",
                   width - filled, "", done, records.size());
      if (done == records.size()) std::fprintf(stderr, "\n");
    }
  };
  if (o.concurrency > 0) {
    // A closed loop: N clients, each taking the next recorded request when done.
    auto next = std::make_shared<std::size_t>(0);
    for (unsigned c = 0; c < o.concurrency; ++c) {
      asio::co_spawn(
          ioc,
          [&, next]() -> awaitable<void> {
            while (*next < records.size()) {
              const auto i = (*next)++;
              co_await send_one(meas, records[i], o, res.replayed[i]);
              finished();
            }
          },
          asio::detached);
    }
  } else {
    // The recorded arrival pattern (scaled by speed), or a fixed rate.
    std::int64_t first = -1;
    for (const auto& r : records)
      if (r.start_us >= 0 && (first < 0 || r.start_us < first)) first = r.start_us;
    const auto t0 = clock::now();
    for (std::size_t i = 0; i < records.size(); ++i) {
      double offset_ms = 0;
      if (o.rate > 0)
        offset_ms = 1000.0 * static_cast<double>(i) / o.rate;
      else if (first >= 0)
        offset_ms = static_cast<double>(std::max<std::int64_t>(0, records[i].start_us - first)) /
                    1000.0 / o.speed;
      asio::co_spawn(
          ioc,
          // t0 by value: this block ends before ioc.run() runs the coroutines (found by ASan).
          [&, i, offset_ms, t0]() -> awaitable<void> {
            steady_timer t(co_await asio::this_coro::executor);
            t.expires_at(t0 +
                         std::chrono::microseconds(static_cast<std::int64_t>(offset_ms * 1000)));
            error_code ec;
            co_await t.async_wait(use_ec(ec));
            co_await send_one(meas, records[i], o, res.replayed[i]);
            finished();
          },
          asio::detached);
    }
  }
  ioc.run();

  // Replaying an incident reproduces its failures: those are expected; a failure where the
  // record was ok is news, and so is a recorded failure that no longer happens.
  std::string anew, as_recorded, recovered;
  auto line = [](std::string& to, const char* what, const measured& m) {
    to += "  " + std::string(what) + "  " + m.id + "  recorded: " + m.recorded_outcome +
          "  replayed: " + ending(m.outcome.empty() ? "no_response" : m.outcome, m.status);
    if (!m.error.empty()) to += " (" + m.error + ")";
    to += "\n";
  };
  for (const auto& m : res.replayed) {
    if (!m.ok) {
      ++res.failed;
      if (m.recorded_ok) {
        ++res.failed_anew;
        line(anew, "failed anew      ", m);
      } else {
        ++res.failed_as_recorded;
        line(as_recorded, "failed as recorded", m);
      }
    } else if (!m.recorded_ok) {
      ++res.recovered;
      line(recovered, "no longer fails  ", m);
    }
  }
  res.failures = anew + as_recorded + recovered;
  // Recorded vs replayed, side by side.
  struct metric {
    const char* name;
    std::vector<double> rec, rep;
  };
  std::vector<metric> metrics = {{"ttft_ms", {}, {}},
                                 {"ttft_answer_ms", {}, {}},
                                 {"itl_median_ms", {}, {}},
                                 {"e2e_ms", {}, {}},
                                 {"tokens_per_s", {}, {}}};
  for (std::size_t i = 0; i < records.size(); ++i) {
    const auto& r = records[i];
    const auto& m = res.replayed[i];
    const double rec[] = {r.ttft_ms, r.ttft_answer_ms, r.itl_p50, r.e2e_ms, r.tokens_per_s};
    const double rep[] = {m.ttft_ms, m.ttft_answer_ms, m.itl_median_ms, m.e2e_ms, m.tokens_per_s};
    for (std::size_t k = 0; k < metrics.size(); ++k) {
      metrics[k].rec.push_back(rec[k]);
      metrics[k].rep.push_back(rep[k]);
    }
  }
  res.json = "{\"requests\":" + std::to_string(records.size()) +
             ",\"failed\":" + std::to_string(res.failed) +
             ",\"failed_as_recorded\":" + std::to_string(res.failed_as_recorded) +
             ",\"failed_anew\":" + std::to_string(res.failed_anew) +
             ",\"recovered\":" + std::to_string(res.recovered) + ",\"metrics\":{";
  std::vector<comparison_row> table;
  for (std::size_t k = 0; k < metrics.size(); ++k) {
    const auto a = percentiles_of(metrics[k].rec), b = percentiles_of(metrics[k].rep);
    table.push_back({metrics[k].name, a, b});
    if (k) res.json += ",";
    res.json += "\"" + std::string(metrics[k].name) + "\":{";
    auto q = [&](const char* n, const percentiles3& x) {
      res.json += "\"" + std::string(n) + "\":{\"p50\":";
      base::json::append_ms(res.json, x.p50);
      res.json += ",\"p95\":";
      base::json::append_ms(res.json, x.p95);
      res.json += ",\"p99\":";
      base::json::append_ms(res.json, x.p99);
      res.json += "}";
    };
    q("recorded", a);
    res.json += ",";
    q("replayed", b);
    res.json += "}";
  }
  res.json += "},\"failures\":[";
  bool first = true;
  for (const auto& m : res.replayed) {
    if (m.ok && m.recorded_ok) continue;
    if (!first) res.json += ",";
    first = false;
    res.json += "{\"id\":";
    base::json::append_string(res.json, m.id);
    res.json += ",\"recorded\":";
    base::json::append_string(res.json, m.recorded_outcome);
    res.json += ",\"as_recorded\":";
    res.json += m.ok == m.recorded_ok ? "true" : "false";
    res.json += ",\"status\":" + std::to_string(m.status) + ",\"outcome\":";
    base::json::append_string(res.json, m.outcome.empty() ? "no_response" : m.outcome);
    res.json += ",\"error\":";
    base::json::append_string(res.json, m.error);
    res.json += "}";
  }
  res.json += "]}\n";
  res.table = side_by_side(table, "recorded", "replayed");
  return res;
}

}  // namespace tokentap::replay
