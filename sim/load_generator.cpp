#include "sim/load_generator.hpp"

// g++ 12 false positive on coroutines of asio's awaitable<T, io_context::executor_type>: the
// frame's own operator new/delete pair (thread-local recycling) is reported as mismatched once
// inlined.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif

#include <algorithm>
#include <charconv>
#include <optional>
#include <random>

#include <boost/beast/http.hpp>

#include "base/log.hpp"
#include "net/http_client.hpp"
#include "sim/generator.hpp"

namespace tokentap::sim {

namespace http = beast::http;

namespace {
constexpr std::size_t max_samples = 100000;
}  // namespace

load_generator::load_generator(load_options opts) : opts_(std::move(opts)) {
  for (unsigned i = 0; i < std::max(1u, opts_.threads); ++i)
    iocs_.push_back(std::make_unique<asio::io_context>(1));
}

load_generator::~load_generator() {
  stop();
}

void load_generator::start() {
  for (unsigned c = 0; c < opts_.concurrency; ++c) {
    auto& ioc = *iocs_[c % iocs_.size()];
    asio::co_spawn(ioc, client(c),
                   [](std::exception_ptr e) { net::log_escaped_exception(e, "load client"); });
  }
  for (auto& ioc : iocs_) threads_.emplace_back([&ioc] { ioc->run(); });
}

void load_generator::stop() {
  stop_ = true;
  // Streams in flight end now, not when their last token (or their timeout) comes: a run of
  // long or idle streams must stop at its deadline.
  for (auto& ioc : iocs_) ioc->stop();
  wait();
}

void load_generator::wait() {
  for (auto& t : threads_)
    if (t.joinable()) t.join();
  threads_.clear();
}

awaitable<void> load_generator::client(unsigned id) {
  auto ex = co_await asio::this_coro::executor;
  std::mt19937_64 rng(opts_.seed * 7919 + id);
  net::http_client client(ex);  // its reads carry the kernel's receive times
  std::vector<char> body(16 * 1024);
  error_code ec;
  if (opts_.start_spread.count() > 0) {
    std::uniform_int_distribution<long> d(0, opts_.start_spread.count());
    steady_timer t(ex, std::chrono::milliseconds(d(rng)));
    co_await t.async_wait(use_ec(ec));
    ec = {};
  }
  for (std::uint64_t n = 0; !stop_ && (opts_.max_requests == 0 || n < opts_.max_requests); ++n) {
    if (!client.is_open()) {
      ec = co_await client.connect(opts_.host, opts_.port, std::chrono::seconds(5));
      if (ec == asio::error::host_not_found || ec == asio::error::host_not_found_try_again)
        co_return;
      if (ec) {
        totals_.failed++;
        steady_timer t(ex, std::chrono::milliseconds(200));
        co_await t.async_wait(use_ec(ec));
        continue;
      }
      totals_.connects++;
    }
    const scenario sc = opts_.next(id, n);
    http::request<http::string_body> req{http::verb::post, sc.path, 11};
    req.set(http::field::host, opts_.host);
    req.set(http::field::content_type, "application/json");
    req.set(http::field::authorization, "Bearer sk-demo-not-a-real-key");
    for (const auto& [k, v] : sc.headers) req.set(k, v);
    req.body() = sc.body;
    req.prepare_payload();
    totals_.active++;
    const auto t0 = clock::now();
    ec = co_await client.send(req, std::chrono::seconds(120));
    std::optional<clock::time_point> first;
    std::uint64_t events = 0;
    char prev = '\n';   // the body starts at a line start
    std::string stamp;  // a `: t <ns>` comment being read (may span reads)
    bool in_stamp = false;
    std::vector<double> latencies, read_latencies;
    while (!ec && !client.done()) {
      const auto piece = co_await client.read_some(body, ec);
      const auto got = piece.size;
      if (got && !first) first = clock::now();
      const auto read_ns = piece.read_ns;
      // When the bytes reached the socket (the last of them, if the read took several packets).
      const auto arrival_ns = piece.arrived_ns;
      for (std::size_t i = 0; i < got; ++i) {  // SSE events end with a blank line
        const char c = body[i];
        if (c == '\n' && prev == '\n') ++events;
        if (in_stamp) {
          if (c == '\n') {
            in_stamp = false;
            // Other comments are not stamps.
            const char* const end = stamp.data() + stamp.size();
            long long sent_ns = 0;
            if (stamp.starts_with(stamp_prefix) && latencies.size() < 100000) {
              const auto r = std::from_chars(stamp.data() + stamp_prefix.size(), end, sent_ns);
              if (r.ec == std::errc{} && r.ptr == end) {
                latencies.push_back(static_cast<double>(arrival_ns - sent_ns) / 1000.0);
                read_latencies.push_back(static_cast<double>(read_ns - sent_ns) / 1000.0);
              }
            }
          } else {
            stamp.push_back(c);
          }
        } else if (c == ':' && prev == '\n') {
          in_stamp = true;
          stamp = ":";
        }
        prev = c;
      }
      totals_.bytes += got;
    }
    totals_.active--;
    const auto t1 = clock::now();
    if (ec || client.status() >= 400) {
      totals_.failed++;
    } else {
      totals_.ok++;
      totals_.events += std::max<std::uint64_t>(events, 1);
    }
    if (!ec) {
      std::lock_guard lk(totals_.mu);
      for (std::size_t i = 0; i < latencies.size(); ++i) {
        if (totals_.event_latency_us.size() >= 10 * max_samples) break;
        totals_.event_latency_us.push_back(latencies[i]);
        totals_.read_latency_us.push_back(read_latencies[i]);
      }
      if (totals_.ttfb_ms.size() < max_samples && first) {
        totals_.ttfb_ms.push_back(std::chrono::duration<double, std::milli>(*first - t0).count());
        totals_.total_ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
      }
    }
    if (ec || !client.keep_alive()) client.close();
    if (opts_.think_time.count() > 0) {
      std::uniform_int_distribution<long> d(0, opts_.think_time.count());
      steady_timer t(ex, std::chrono::milliseconds(d(rng)));
      co_await t.async_wait(use_ec(ec));
      ec = {};
    }
  }
}

namespace {

std::string chat_message(const std::string& role, const std::string& content) {
  return R"({"role":")" + role + R"(","content":")" + content + R"("})";
}

// A conversation of `turns` user/assistant exchanges after a long shared system prompt.
std::string conversation(unsigned client, std::size_t first_turn, std::size_t turns,
                         const std::string& system) {
  std::string b =
      R"({"model":"sim-chat","stream":true,"stream_options":{"include_usage":true},"messages":[)" +
      chat_message("system", system);
  for (std::size_t t = first_turn; t < first_turn + turns; ++t) {
    b += "," + chat_message("user",
                            "client " + std::to_string(client) + " question " + std::to_string(t));
    if (t + 1 < first_turn + turns)
      b += "," + chat_message("assistant",
                              "answer " + std::to_string(t) + " with some detail about latency");
  }
  return b + "]}";
}

const std::string& long_system_prompt() {
  static const std::string s = [] {
    std::string p = "You are a careful assistant for latency questions. ";
    while (p.size() < 6000) p += "Explain queueing, prefill, decode and caching precisely. ";
    return p;
  }();
  return s;
}

}  // namespace

scenario demo_scenario(unsigned client, std::uint64_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed * 1000003 + client * 7919 + n);
  std::uniform_int_distribution<int> pct(0, 99), ttft(60, 450), itl(8, 35), tokens(20, 120);
  scenario s;
  const int kind = pct(rng);
  const std::string question = "Explain where the latency of request " + std::to_string(n) +
                               " from client " + std::to_string(client) + " goes.";
  s.headers = {{"x-sim-ttft-ms", std::to_string(ttft(rng))},
               {"x-sim-itl-ms", std::to_string(itl(rng))},
               {"x-sim-itl-dist", "exponential"},
               {"x-sim-tokens", std::to_string(tokens(rng))}};
  // Every 12th request of a client returns to its first conversation: older than the cache TTL.
  if (n > 0 && n % 12 == 0) {
    s.name = "cache-returning";
    s.body = conversation(client, 0, 2, long_system_prompt());
    return s;
  }
  if (kind < 25) {
    s.name = "openai-stream";
    s.body =
        R"({"model":"sim-small","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"system","content":"You are terse."},{"role":"user","content":")" +
        question + "\"}]}";
  } else if (kind < 40) {
    s.name = "openai-reasoning";
    s.headers.push_back({"x-sim-reasoning-tokens", std::to_string(tokens(rng))});
    s.body =
        R"({"model":"sim-reasoner","stream":true,"reasoning_effort":"medium","stream_options":{"include_usage":true},"messages":[{"role":"user","content":")" +
        question + "\"}]}";
  } else if (kind < 52) {
    s.name = "anthropic-thinking";
    s.path = "/v1/messages";
    s.headers.push_back({"x-sim-reasoning-tokens", std::to_string(tokens(rng))});
    s.headers.push_back({"anthropic-version", "2023-06-01"});
    // A cached system prompt (cache_control): the first request writes it, the next ones read it.
    s.body =
        R"({"model":"claude-sim","max_tokens":1024,"stream":true,"thinking":{"type":"enabled","budget_tokens":512},"system":[{"type":"text","text":")" +
        long_system_prompt() +
        R"(","cache_control":{"type":"ephemeral"}}],"messages":[{"role":"user","content":")" +
        question + "\"}]}";
  } else if (kind < 62) {
    s.name = "openai-plain";
    s.body = R"({"model":"sim-small","messages":[{"role":"user","content":")" + question + "\"}]}";
  } else if (kind < 78) {
    // A growing chat session: each turn extends the last one, so the prefix cache hits.
    s.name = "cache-session";
    s.body = conversation(client, 0, 1 + n % 6, long_system_prompt());
    if (pct(rng) < 3) s.headers[0] = {"x-sim-ttft-ms", "2500"};  // a slow prefill now and then
  } else if (kind < 83) {
    // A timestamp in the system prompt: the conversation's head changes every turn.
    s.name = "cache-jittered-system";
    s.body = conversation(client, 0, 1 + n % 3,
                          long_system_prompt() + " Now: " + std::to_string(n) + ".");
  } else if (kind < 88) {
    // A sliding window over a long conversation: its oldest turns are dropped.
    s.name = "cache-sliding-window";
    s.body = conversation(client + 1000, n % 5, 3, long_system_prompt());
  } else if (kind < 92) {
    // The same long prompt served cold again and again (cache penetration).
    s.name = "cache-penetration";
    s.headers.push_back({"x-sim-cache-bypass", "1"});
    s.body = conversation(client + 2000, 0, 1, long_system_prompt());
  } else {
    s.name = "fault";
    s.body = R"({"model":"sim-small","stream":true,"messages":[{"role":"user","content":")" +
             question + "\"}]}";
    const int f = pct(rng);
    if (f < 40)
      s.headers.push_back({"x-sim-status", "503"});
    else if (f < 70)
      s.headers.push_back({"x-sim-error-after", "10"});
    else
      s.headers.push_back({"x-sim-stall-after", "5"}),
          s.headers.push_back({"x-sim-stall-ms", "1500"});
  }
  return s;
}

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  const auto k =
      static_cast<std::size_t>(std::clamp(q, 0.0, 1.0) * static_cast<double>(v.size() - 1) + 0.5);
  std::nth_element(v.begin(), v.begin() + static_cast<long>(k), v.end());
  return v[k];
}

}  // namespace tokentap::sim
