// The fault matrix: the real `tokentap` binary between real sockets, one fault per case.
// Every case asserts what the client got (the forwarded bytes intact, or the failure reported the
// proxy's way: an HTTP error with a JSON body before the head, a truncated response after it), the
// trace record's outcome, the counters on /metrics, and that the proxy then still serves a normal
// request.
//
// The upstream is a scripted raw-TCP server: the request header `x-fault` picks what it does, so
// it can break HTTP framing in ways no real server library would.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/resource.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <thread>

#include <boost/asio/ip/address.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/write.hpp>

#include "replay/trace_reader.hpp"
#include "sim/sim_server.hpp"
#include "test/support/http_client.hpp"
#include "test/support/metrics_text.hpp"
#include "test/support/ports.hpp"
#include "test/support/process.hpp"
#include "test/support/tls_cert.hpp"

namespace tokentap::test {
namespace {

namespace asio = boost::asio;
using boost::system::error_code;

// ------------------------------------------------------------------ the scripted upstream

std::string chunk(std::string_view s) {
  char size[32];
  std::snprintf(size, sizeof size, "%zx\r\n", s.size());
  return std::string(size) + std::string(s) + "\r\n";
}

std::string token_event(int i) {
  return "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"t" + std::to_string(i) +
         " \"},\"finish_reason\":null}]}\n\n";
}

// The body of a normal streamed answer, and of each faulty one's healthy prefix.
std::string normal_body() {
  std::string b;
  for (int i = 0; i < 5; ++i) b += token_event(i);
  return b + "data: [DONE]\n\n";
}

constexpr std::string_view sse_head =
    "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n";

std::string garbage_body() {
  using namespace std::string_literals;  // the literals below carry NUL bytes
  std::string b = token_event(0);
  b += "data: {not json\n\n";
  b += "data: \x00\xff\xfe\x80 binary\n\n"s;
  b += "event: ???\ndata: [1,2\n\n";
  b += ":\r\nretry: soon\rid\0x\n\n"s;
  b += "data: {\"choices\":[{\"delta\":{\"content\":7}}]}\n\n";
  b += token_event(1);
  return b + "data: [DONE]\n\n";
}

class scripted_upstream {
 public:
  scripted_upstream() : acceptor_(ioc_, {asio::ip::make_address("127.0.0.1"), 0}) {
    thread_ = std::thread([this] { accept_loop(); });
  }
  ~scripted_upstream() {
    stop_ = true;
    {
      // A blocking accept() is not woken by closing the socket from another thread: connect.
      asio::io_context ioc;
      tcp::socket wake(ioc);
      error_code ec;
      wake.connect(acceptor_.local_endpoint(), ec);
    }
    thread_.join();
    error_code ec;
    acceptor_.close(ec);
    for (auto& t : conns_) t.join();
  }
  std::uint16_t port() const { return acceptor_.local_endpoint().port(); }
  std::atomic<int> requests{0};
  std::atomic<std::size_t> flood_written{0};
  std::atomic<bool> release_stall{false};

 private:
  void accept_loop() {
    while (!stop_) {
      tcp::socket s(ioc_);
      error_code ec;
      acceptor_.accept(s, ec);
      if (ec || stop_) return;
      std::lock_guard lk(mu_);
      conns_.emplace_back([this, s = std::move(s)]() mutable { serve(std::move(s)); });
    }
  }

  void serve(tcp::socket s) {
    std::string buf;
    for (;;) {
      error_code ec;
      const auto head_end = asio::read_until(s, asio::dynamic_buffer(buf), "\r\n\r\n", ec);
      if (ec) return;
      const std::string head = buf.substr(0, head_end);
      buf.erase(0, head_end);
      std::size_t length = 0;
      std::string fault = "normal";
      std::istringstream lines(head);
      for (std::string line; std::getline(lines, line);) {
        if (!line.empty() && line.back() == '\r') line.pop_back();
        const auto colon = line.find(':');
        if (colon == std::string::npos) continue;
        std::string name = line.substr(0, colon);
        for (auto& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        const auto value = line.substr(line.find_first_not_of(' ', colon + 1));
        if (name == "content-length") length = std::stoul(value);
        if (name == "x-fault") fault = value;
      }
      if (buf.size() < length)
        asio::read(s, asio::dynamic_buffer(buf), asio::transfer_exactly(length - buf.size()), ec);
      if (ec) return;
      buf.erase(0, length);
      ++requests;
      if (!act(s, fault)) return;
    }
  }

  // Returns whether the connection stays open for another request.
  bool act(tcp::socket& s, const std::string& fault) {
    error_code ec;
    auto send = [&](std::string_view bytes) {
      asio::write(s, asio::buffer(bytes), ec);
      return !ec;
    };
    if (fault == "normal") {
      std::string out(sse_head);
      out += chunk(normal_body()) + "0\r\n\r\n";
      return send(out);
    }
    if (fault == "reset") {
      send(std::string(sse_head) + chunk(token_event(0)) + chunk(token_event(1)));
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      s.set_option(asio::socket_base::linger(true, 0), ec);  // close() now sends RST
      s.close(ec);
      return false;
    }
    if (fault == "stall") {
      send(std::string(sse_head) + chunk(token_event(0)));
      for (int i = 0; i < 300 && !release_stall && !stop_; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      return false;
    }
    if (fault == "bad_chunked") {
      send(std::string(sse_head) + chunk(token_event(0)) + "zz\r\nnot a chunk size\r\n");
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      return false;
    }
    if (fault == "garbage") {
      return send(std::string(sse_head) + chunk(garbage_body()) + "0\r\n\r\n");
    }
    if (fault == "big_event") {
      std::string out(sse_head);
      out += chunk(token_event(0));
      const std::string big = "data: " + std::string(10u << 20, 'x') + "\n\n";
      for (std::size_t at = 0; at < big.size(); at += 1u << 20)
        out += chunk(std::string_view(big).substr(at, 1u << 20));
      out += chunk(token_event(1) + "data: [DONE]\n\n") + "0\r\n\r\n";
      return send(out);
    }
    if (fault == "no_last_chunk") {
      send(std::string(sse_head) + chunk(token_event(0)) + chunk(token_event(1)));
      s.shutdown(tcp::socket::shutdown_send, ec);  // FIN without the terminating chunk
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      return false;
    }
    if (fault == "eof_mid_event") {
      // A body delimited by the connection's end (legal HTTP/1.1) that stops mid-event, without
      // [DONE]: a clean HTTP end, a cut stream.
      send("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n" +
           token_event(0) + "data: {\"choices\":[{\"delta\":{\"content\":\"par");
      s.shutdown(tcp::socket::shutdown_send, ec);
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      return false;
    }
    if (fault == "flood") {
      constexpr std::size_t total = 64u << 20;
      send("HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: " +
           std::to_string(total) + "\r\n\r\n");
      std::string block(64 * 1024, 'f');
      for (std::size_t i = 0; i < total / block.size() && !stop_; ++i) {
        block[0] = static_cast<char>('a' + i % 26);
        if (!send(block)) return false;
        flood_written += block.size();
      }
      return true;
    }
    if (fault == "slow_events") {
      // 40 events, 25 ms apart (SIGTERM drain).
      if (!send(sse_head)) return false;
      for (int i = 0; i < 40; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(25));
        if (!send(chunk(token_event(i)))) return false;
      }
      return send(chunk("data: [DONE]\n\n") + "0\r\n\r\n");
    }
    return false;
  }

  asio::io_context ioc_;
  tcp::acceptor acceptor_;
  std::thread thread_;
  std::mutex mu_;
  std::vector<std::thread> conns_;
  std::atomic<bool> stop_{false};
};

// ------------------------------------------------------------------ the binary under test

long rss_kib(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  return -1;
}

struct proxy_binary {
  proxy_binary(std::uint16_t upstream_port, const std::string& trace_dir,
               const std::string& extra_yaml = "") {
    dir = temp_dir();
    std::ofstream(dir + "/c.yaml")
        << "listen: 127.0.0.1:0\nadmin: 127.0.0.1:0\nthreads: 2\n"
        << "upstreams:\n  s: {url: http://127.0.0.1:" << upstream_port << "}\n"
        << "  dead: {url: http://127.0.0.1:" << closed_port() << "}\n"
        << "routes:\n  - {prefix: /v1/, upstream: s}\n  - {prefix: /dead/, upstream: dead}\n"
        << "timeouts: {connect_ms: 1000, upstream_header_ms: 2000, idle_ms: 500,\n"
        << "           client_header_ms: 1500, client_write_ms: 5000}\n"
        << "log: {level: warn, access_log: false}\n"
        << (trace_dir.empty() ? "" : "trace: {dir: '" + trace_dir + "'}\n") << extra_yaml;
    proc =
        std::make_unique<process>(std::vector<std::string>{"proxy", "--config", dir + "/c.yaml"});
    const auto line = proc->wait_for_line("ready ", std::chrono::seconds(10));
    proxy = ready_address(line, "proxy");
    admin = ready_address(line, "admin");
  }
  ~proxy_binary() {
    proc->signal(SIGTERM);
    proc->wait(std::chrono::seconds(10));
  }
  std::vector<sample> metrics() const {
    request_options o;
    o.method = "GET";
    o.target = "/metrics";
    return parse_metrics(fetch(admin, o).body);
  }
  std::string dir;
  std::unique_ptr<process> proc;
  tcp::endpoint proxy, admin;
};

request_options faulty(const std::string& fault, const std::string& path = "/v1/chat/completions") {
  request_options o;
  o.target = path;
  o.body = chat_body(true, "fault " + fault);
  o.headers = {{"x-fault", fault}};
  o.timeout = std::chrono::milliseconds(15000);
  return o;
}

class FaultMatrix : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // 1,000 idle sockets on each side need more descriptors than some defaults allow.
    rlimit rl{};
    getrlimit(RLIMIT_NOFILE, &rl);
    rl.rlim_cur = std::min<rlim_t>(rl.rlim_max, 65536);
    setrlimit(RLIMIT_NOFILE, &rl);
    upstream_ = new scripted_upstream();
    traces_ = new std::string(temp_dir() + "/traces");
    std::filesystem::create_directories(*traces_);
    proxy_ = new proxy_binary(upstream_->port(), *traces_);
  }
  static void TearDownTestSuite() {
    delete proxy_;
    delete upstream_;
    delete traces_;
  }

  // The trace record of the exchange sent with request header `name: value` (default: the
  // `x-fault` it was sent with); waits for the writer.
  static std::optional<replay::record> trace_of(const std::string& value,
                                                const std::string& name = "x-fault") {
    for (int i = 0; i < 300; ++i) {
      for (const auto& e : std::filesystem::directory_iterator(*traces_)) {
        std::ifstream in(e.path());
        for (std::string line; std::getline(in, line);) {
          auto r = replay::parse_record(line);
          if (!r) continue;
          for (const auto& [k, v] : r->request_headers)
            if (k == name && v == value) return r;
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return std::nullopt;
  }

  static double counter(const std::string& name, const std::map<std::string, std::string>& l = {}) {
    return metric_sum(proxy_->metrics(), name, l);
  }

  // A normal request right after the fault: served whole.
  static void still_serves() {
    const auto r = fetch(proxy_->proxy, faulty("normal"));
    EXPECT_EQ(r.status, 200u);
    EXPECT_TRUE(r.complete) << r.error.message();
    EXPECT_EQ(r.body, normal_body());
    settle();
  }

  // Until no stream is in flight.  A request is counted when its exchange ends, a moment after
  // its client has the last byte; the same hook then lowers the active-streams gauge — so a
  // counter read after this includes every request before it.
  static void settle() {
    for (int i = 0; i < 1000 && counter("tokentap_active_streams") > 0; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }

  static scripted_upstream* upstream_;
  static std::string* traces_;
  static proxy_binary* proxy_;
};

scripted_upstream* FaultMatrix::upstream_ = nullptr;
std::string* FaultMatrix::traces_ = nullptr;
proxy_binary* FaultMatrix::proxy_ = nullptr;

// ------------------------------------------------------------------ upstream faults

TEST_F(FaultMatrix, UpstreamRefusesIs502JsonAndCounted) {
  const double before = counter("tokentap_upstream_errors_total", {{"reason", "connect"}});
  const auto r = fetch(proxy_->proxy, faulty("refused", "/dead/v1/chat/completions"));
  EXPECT_EQ(r.status, 502u);
  EXPECT_EQ(r.header("content-type"), "application/json");
  EXPECT_NE(r.body.find("\"type\":\"upstream_connect_error\""), std::string::npos) << r.body;
  const auto t = trace_of("refused");
  ASSERT_TRUE(t);
  EXPECT_EQ(t->outcome, "upstream_error");
  EXPECT_EQ(counter("tokentap_upstream_errors_total", {{"reason", "connect"}}), before + 1);
  still_serves();
}

TEST_F(FaultMatrix, UpstreamResetMidStreamTruncatesTheClient) {
  const double before = counter("tokentap_upstream_errors_total", {{"reason", "reset"}});
  const auto r = fetch(proxy_->proxy, faulty("reset"));
  EXPECT_EQ(r.status, 200u);
  EXPECT_FALSE(r.complete) << "a broken upstream must never look like a clean end";
  EXPECT_EQ(r.body, token_event(0) + token_event(1));  // everything sent before the reset
  const auto t = trace_of("reset");
  ASSERT_TRUE(t);
  EXPECT_EQ(t->outcome, "upstream_reset");
  EXPECT_EQ(counter("tokentap_upstream_errors_total", {{"reason", "reset"}}), before + 1);
  still_serves();
}

TEST_F(FaultMatrix, UpstreamStallHitsTheIdleTimeout) {
  const double before = counter("tokentap_upstream_errors_total", {{"reason", "timeout"}});
  const double t0 = now_ms();
  const auto r = fetch(proxy_->proxy, faulty("stall"));
  const double took = now_ms() - t0;
  EXPECT_EQ(r.status, 200u);
  EXPECT_FALSE(r.complete);
  EXPECT_EQ(r.body, token_event(0));
  EXPECT_GE(took, 450);  // idle_ms: 500
  EXPECT_LT(took, 2500);
  const auto t = trace_of("stall");
  ASSERT_TRUE(t);
  EXPECT_EQ(t->outcome, "timeout");
  EXPECT_EQ(counter("tokentap_upstream_errors_total", {{"reason", "timeout"}}), before + 1);
  still_serves();
}

TEST_F(FaultMatrix, InvalidChunkedFramingTruncatesTheClient) {
  const double before = counter("tokentap_upstream_errors_total");
  const auto r = fetch(proxy_->proxy, faulty("bad_chunked"));
  EXPECT_EQ(r.status, 200u);
  EXPECT_FALSE(r.complete);
  EXPECT_EQ(r.body, token_event(0));  // the valid prefix, nothing invented after it
  const auto t = trace_of("bad_chunked");
  ASSERT_TRUE(t);
  EXPECT_EQ(t->outcome, "upstream_reset");
  EXPECT_EQ(counter("tokentap_upstream_errors_total"), before + 1);
  still_serves();
}

TEST_F(FaultMatrix, GarbageEventsAreForwardedByteExactAndCounted) {
  const double before = counter("tokentap_parse_errors_total", {{"stage", "json"}});
  const auto r = fetch(proxy_->proxy, faulty("garbage"));
  EXPECT_EQ(r.status, 200u);
  EXPECT_TRUE(r.complete);
  EXPECT_EQ(r.body, garbage_body());
  const auto t = trace_of("garbage");
  ASSERT_TRUE(t);
  EXPECT_EQ(t->outcome, "ok");
  std::string rebuilt;
  for (const auto& e : t->events) rebuilt += e.bytes;
  EXPECT_EQ(rebuilt, garbage_body()) << "the trace keeps the exact bytes, binary included";
  EXPECT_GE(counter("tokentap_parse_errors_total", {{"stage", "json"}}), before + 3);
  EXPECT_EQ(t->output_tokens, 2) << "decoding resumed after each bad event";
  still_serves();
}

TEST_F(FaultMatrix, TenMegabyteEventIsForwardedWholeAndSkippedByTheParser) {
  const double before = counter("tokentap_parse_errors_total", {{"stage", "oversize"}});
  const auto r = fetch(proxy_->proxy, faulty("big_event"));
  EXPECT_EQ(r.status, 200u);
  EXPECT_TRUE(r.complete);
  const std::string expected = token_event(0) + "data: " + std::string(10u << 20, 'x') + "\n\n" +
                               token_event(1) + "data: [DONE]\n\n";
  EXPECT_EQ(r.body.size(), expected.size());
  EXPECT_TRUE(r.body == expected);
  const auto t = trace_of("big_event");
  ASSERT_TRUE(t);
  EXPECT_EQ(t->outcome, "ok");
  EXPECT_EQ(t->output_tokens, 2);
  EXPECT_EQ(counter("tokentap_parse_errors_total", {{"stage", "oversize"}}), before + 1);
  still_serves();
}

TEST_F(FaultMatrix, UpstreamClosingWithoutTheLastChunkTruncatesTheClient) {
  const auto r = fetch(proxy_->proxy, faulty("no_last_chunk"));
  EXPECT_EQ(r.status, 200u);
  EXPECT_FALSE(r.complete);
  EXPECT_EQ(r.body, token_event(0) + token_event(1));
  const auto t = trace_of("no_last_chunk");
  ASSERT_TRUE(t);
  EXPECT_EQ(t->outcome, "upstream_reset");
  still_serves();
}

TEST_F(FaultMatrix, StreamEndingMidEventIsForwardedAndMarkedCut) {
  const double before = counter("tokentap_parse_errors_total", {{"stage", "framing"}});
  const auto r = fetch(proxy_->proxy, faulty("eof_mid_event"));
  EXPECT_EQ(r.status, 200u);
  EXPECT_TRUE(r.complete) << "the upstream ended its body legally (connection close)";
  EXPECT_EQ(r.body, token_event(0) + "data: {\"choices\":[{\"delta\":{\"content\":\"par");
  const auto t = trace_of("eof_mid_event");
  ASSERT_TRUE(t);
  EXPECT_EQ(t->output_tokens, 1);
  EXPECT_EQ(counter("tokentap_parse_errors_total", {{"stage", "framing"}}), before + 1);
  still_serves();
}

// ------------------------------------------------------------------ client faults

TEST_F(FaultMatrix, ClientDisconnectMidStreamIsTracedAndCounted) {
  settle();  // the request before this test's is counted
  const double before = counter("tokentap_requests_total");
  const double disconnects = counter("tokentap_client_disconnects_total");
  upstream_->release_stall = false;
  // The client leaves in the middle of a stalled stream.
  {
    connection c(proxy_->proxy);
    const auto body = chat_body(true, "fault stall");
    c.send_raw(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nx-fault: stall\r\n"
        "x-trace-tag: client-left\r\nContent-Length: " +
        std::to_string(body.size()) + "\r\n\r\n" + body);
    std::this_thread::sleep_for(std::chrono::milliseconds(150));
    c.close();
  }
  const auto left = trace_of("client-left", "x-trace-tag");
  ASSERT_TRUE(left);
  EXPECT_EQ(left->outcome, "client_disconnect");
  EXPECT_EQ(counter("tokentap_requests_total"), before + 1);
  EXPECT_EQ(counter("tokentap_client_disconnects_total"), disconnects + 1);
  still_serves();
}

TEST_F(FaultMatrix, SlowReaderGetsBackpressureNotBuffering) {
  upstream_->flood_written = 0;
  const long rss_before = rss_kib(proxy_->proc->pid());
  connection c(proxy_->proxy);
  const auto body = chat_body(false, "flood");
  c.send_raw("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nx-fault: flood\r\nContent-Length: " +
             std::to_string(body.size()) + "\r\n\r\n" + body);
  // Do not read: the upstream must be paused by TCP, the proxy must not hoard.  Wait until what
  // the upstream managed to write stops growing (the buffers on the way are full).
  std::size_t written_while_stalled = 0;
  for (int i = 0; i < 100; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    const std::size_t now = upstream_->flood_written;
    if (now > 0 && now == written_while_stalled) break;
    written_while_stalled = now;
  }
  const long rss_stalled = rss_kib(proxy_->proc->pid());
  EXPECT_LT(written_while_stalled, 32u << 20) << "64 MiB offered; socket buffers hold a few MiB";
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
  // (Sanitizer builds shadow every allocation, so their RSS says nothing about buffering.)
  EXPECT_LT(rss_stalled - rss_before, 16 * 1024)
      << "proxy RSS grew by " << rss_stalled - rss_before << " KiB while the client did not read";
#else
  (void)rss_stalled;
  (void)rss_before;
#endif
  // Now read slowly-then-fast to the end: every byte arrives, in order.
  const auto r = c.read_response(std::chrono::seconds(30));
  EXPECT_EQ(r.status, 200u);
  EXPECT_TRUE(r.complete) << r.error.message();
  ASSERT_EQ(r.body.size(), 64u << 20);
  bool intact = true;
  for (std::size_t i = 0; i < r.body.size(); i += 64 * 1024)
    intact = intact && r.body[i] == static_cast<char>('a' + (i / (64 * 1024)) % 26) &&
             r.body[i + 1] == 'f';
  EXPECT_TRUE(intact);
  still_serves();
}

TEST_F(FaultMatrix, SlowlorisIsCutOffAtTheHeaderTimeout) {
  connection c(proxy_->proxy);
  const std::string head = "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n";
  const double t0 = now_ms();
  bool cut = false;
  for (char ch : head) {
    error_code ec;
    asio::write(c.socket(), asio::buffer(&ch, 1), ec);
    if (ec) {
      cut = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (now_ms() - t0 > 4000) break;
  }
  const auto rest = c.read_raw_until_close(std::chrono::seconds(3));
  const double took = now_ms() - t0;
  EXPECT_LT(took, 4000) << "client_header_ms is 1500";
  EXPECT_TRUE(cut || rest.rfind("HTTP/1.1 408", 0) == 0 || rest.empty()) << rest;
  still_serves();
}

TEST_F(FaultMatrix, OversizedHeadersAre431) {
  const double before = counter("tokentap_rejected_requests_total");
  connection c(proxy_->proxy);
  c.send_raw("GET /v1/models HTTP/1.1\r\nHost: x\r\nx-big: " + std::string(20000, 'a') +
             "\r\n\r\n");
  const auto r = c.read_response();
  EXPECT_EQ(r.status, 431u);
  EXPECT_NE(r.body.find("\"error\""), std::string::npos);
  EXPECT_EQ(counter("tokentap_rejected_requests_total"), before + 1);
  still_serves();
}

// The proxy's own answers are counted twice over: among its rejections, and among the requests
// by code (route "" when none matched, model and provider `unknown`).
TEST_F(FaultMatrix, NoRouteIs404AndCounted) {
  const double before = counter("tokentap_rejected_requests_total");
  const double by_code = counter("tokentap_requests_total", {{"code", "404"}, {"route", ""}});
  const int upstream_before = upstream_->requests;
  request_options o;
  o.target = "/nowhere/v1/chat/completions";
  o.body = chat_body(true);
  const auto r = fetch(proxy_->proxy, o);
  EXPECT_EQ(r.status, 404u);
  EXPECT_NE(r.body.find("no_route"), std::string::npos) << r.body;
  EXPECT_EQ(upstream_->requests, upstream_before);
  EXPECT_EQ(counter("tokentap_rejected_requests_total"), before + 1);
  EXPECT_EQ(counter("tokentap_requests_total", {{"code", "404"}, {"route", ""}}), by_code + 1);
  still_serves();
}

TEST_F(FaultMatrix, MalformedRequestIs400) {
  const double before = counter("tokentap_rejected_requests_total");
  const double by_code = counter("tokentap_requests_total", {{"code", "400"}});
  const int upstream_before = upstream_->requests;
  connection c(proxy_->proxy);
  c.send_raw("POST /v1/chat/completions HTTP/1.1\r\nHost x\r\n\r\n");
  const auto r = c.read_response();
  EXPECT_EQ(r.status, 400u);
  EXPECT_NE(r.body.find("\"error\""), std::string::npos);
  EXPECT_EQ(upstream_->requests, upstream_before);
  EXPECT_EQ(counter("tokentap_rejected_requests_total"), before + 1);
  EXPECT_EQ(counter("tokentap_requests_total", {{"code", "400"}}), by_code + 1);
  still_serves();
}

TEST_F(FaultMatrix, ContentLengthWithTransferEncodingIsRejectedNeverSmuggled) {
  const int upstream_before = upstream_->requests;
  connection c(proxy_->proxy);
  // The classic CL.TE smuggling shape: a second request hidden in the body.
  const std::string smuggled = "GET /v1/smuggled HTTP/1.1\r\nHost: x\r\n\r\n";
  const std::string body = "0\r\n\r\n" + smuggled;
  c.send_raw("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: " +
             std::to_string(body.size()) + "\r\nTransfer-Encoding: chunked\r\n\r\n" + body);
  const auto r = c.read_response();
  EXPECT_EQ(r.status, 400u) << r.body;
  const auto after = c.read_raw_until_close(std::chrono::milliseconds(1000));
  EXPECT_EQ(after.find("HTTP/1.1"), std::string::npos) << "a second response: " << after;
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(upstream_->requests, upstream_before) << "nothing may reach the upstream";
  still_serves();
}

TEST_F(FaultMatrix, ThousandIdleSocketsDoNotDelayARealRequest) {
  asio::io_context ioc;
  std::vector<tcp::socket> idle;
  idle.reserve(1000);
  for (int i = 0; i < 1000; ++i) {
    idle.emplace_back(ioc);
    error_code ec;
    idle.back().connect(proxy_->proxy, ec);
    ASSERT_FALSE(ec) << "socket " << i << ": " << ec.message();
  }
  const double t0 = now_ms();
  const auto r = fetch(proxy_->proxy, faulty("normal"));
  const double took = now_ms() - t0;
  EXPECT_EQ(r.status, 200u);
  EXPECT_TRUE(r.complete);
  EXPECT_LT(took, 500) << "a real request waited " << took << " ms behind 1,000 idle sockets";
  // The idle ones are cut at the header timeout, not kept forever.
  std::this_thread::sleep_for(std::chrono::milliseconds(2000));
  int closed = 0;
  for (auto& s : idle) {
    char b;
    error_code ec;
    s.non_blocking(true);
    s.read_some(asio::buffer(&b, 1), ec);
    if (ec == asio::error::eof || ec == asio::error::connection_reset) ++closed;
  }
  EXPECT_EQ(closed, 1000);
  still_serves();
}

// ------------------------------------------------------------------ admin token

TEST(AdminToken, GuardsEverythingButTheProbes) {
  scripted_upstream up;
  const auto dir = temp_dir();
  std::ofstream(dir + "/token") << "s3cret-admin-token-0123456789\n";
  proxy_binary p(up.port(), "", "admin_token_file: '" + dir + "/token'\n");
  ASSERT_NE(p.admin.port(), 0) << p.proc->err();
  request_options o;
  o.method = "GET";
  for (const char* path : {"/metrics", "/api/stats", "/dashboard", "/"}) {
    o.target = path;
    o.headers = {};
    auto r = fetch(p.admin, o);
    EXPECT_EQ(r.status, 401u) << path;
    EXPECT_NE(r.body.find("\"unauthorized\""), std::string::npos);
    o.headers = {{"Authorization", "Bearer wrong-token-wrong-token"}};
    EXPECT_EQ(fetch(p.admin, o).status, 401u) << path;
    o.headers = {{"Authorization", "Bearer s3cret-admin-token-0123456789"}};
    EXPECT_EQ(fetch(p.admin, o).status, 200u) << path;
    // What a browser sends after the Basic prompt: any user, the token as password.
    // base64("me:s3cret-admin-token-0123456789")
    o.headers = {{"Authorization", "Basic bWU6czNjcmV0LWFkbWluLXRva2VuLTAxMjM0NTY3ODk="}};
    EXPECT_EQ(fetch(p.admin, o).status, 200u) << path;
  }
  o.headers = {};
  for (const char* path : {"/healthz", "/readyz"}) {
    o.target = path;
    EXPECT_EQ(fetch(p.admin, o).status, 200u) << path;
  }
  // The token never reaches the logs.
  EXPECT_EQ(p.proc->err().find("s3cret"), std::string::npos);
}

TEST(AdminToken, BadTokenFileIsExitTwo) {
  const auto dir = temp_dir();
  std::ofstream(dir + "/short") << "abc\n";
  auto r = run({"proxy", "--upstream", "http://127.0.0.1:1", "--admin-token-file", dir + "/short"});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("16 to 1024"), std::string::npos) << r.err;
  r = run({"proxy", "--upstream", "http://127.0.0.1:1", "--admin-token-file", dir + "/missing"});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("cannot read admin token file"), std::string::npos) << r.err;
}

// ------------------------------------------------------------------ trace storage faults

TEST(TraceStorage, UnwritableDirectoryDropsAndCountsTracesNotTraffic) {
  scripted_upstream up;
  const auto dir = temp_dir();
  std::ofstream(dir + "/file") << "not a directory";
  proxy_binary p(up.port(), dir + "/file/traces");
  ASSERT_NE(p.proxy.port(), 0) << p.proc->err();
  for (int i = 0; i < 5; ++i) {
    const auto r = fetch(p.proxy, faulty("normal"));
    EXPECT_EQ(r.status, 200u);
    EXPECT_EQ(r.body, normal_body());
  }
  double dropped = 0;
  for (int i = 0; i < 100 && dropped < 5; ++i) {
    dropped = metric_sum(p.metrics(), "tokentap_trace_dropped_total");
    if (dropped < 5) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(dropped, 5);
  EXPECT_EQ(metric_sum(p.metrics(), "tokentap_trace_records_total"), 0);
}

TEST(TraceStorage, FullDiskDropsAndCountsTracesNotTraffic) {
  scripted_upstream up;
  const auto dir = temp_dir();
  // A file-size limit stands in for a full disk: write() fails with EFBIG (SIGXFSZ is ignored).
  rlimit old{};
  getrlimit(RLIMIT_FSIZE, &old);
  rlimit small = old;
  small.rlim_cur = 8 * 1024;
  setrlimit(RLIMIT_FSIZE, &small);
  std::unique_ptr<proxy_binary> p;
  p = std::make_unique<proxy_binary>(up.port(), dir);
  setrlimit(RLIMIT_FSIZE, &old);
  ASSERT_NE(p->proxy.port(), 0) << p->proc->err();
  for (int i = 0; i < 20; ++i) {
    const auto r = fetch(p->proxy, faulty("normal"));
    ASSERT_EQ(r.status, 200u);
    EXPECT_EQ(r.body, normal_body());
  }
  double written = 0, dropped = 0;
  for (int i = 0; i < 100 && written + dropped < 20; ++i) {
    const auto m = p->metrics();
    written = metric_sum(m, "tokentap_trace_records_total");
    dropped = metric_sum(m, "tokentap_trace_dropped_total");
    if (written + dropped < 20) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(written + dropped, 20);
  EXPECT_GT(dropped, 0);
  EXPECT_GT(written, 0);
  // What was written is whole records only: a partial write is taken back.
  std::size_t lines = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    std::ifstream in(e.path());
    const std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_TRUE(all.empty() || all.back() == '\n') << e.path();
    for (std::size_t at = 0, nl; (nl = all.find('\n', at)) != std::string::npos; at = nl + 1) {
      EXPECT_TRUE(replay::parse_record(all.substr(at, nl - at)).has_value());
      ++lines;
    }
  }
  EXPECT_EQ(lines, static_cast<std::size_t>(written));
}

// ------------------------------------------------------------------ shutdown under load

TEST(Shutdown, SigtermDuring500LiveStreamsLetsThemAllFinish) {
  rlimit rl{};
  getrlimit(RLIMIT_NOFILE, &rl);
  rl.rlim_cur = std::min<rlim_t>(rl.rlim_max, 65536);
  setrlimit(RLIMIT_NOFILE, &rl);
  sim::server_options so;
  so.host = "127.0.0.1";
  so.port = 0;
  so.threads = 1;
  sim::server sim(so);
  sim.start();
  const auto dir = temp_dir();
  std::ofstream(dir + "/c.yaml") << "listen: 127.0.0.1:0\nadmin: 127.0.0.1:0\nthreads: 2\n"
                                 << "upstreams:\n  s: {url: http://127.0.0.1:"
                                 << sim.endpoint().port() << "}\n"
                                 << "routes:\n  - {prefix: /, upstream: s}\n"
                                 << "timeouts: {shutdown_grace_ms: 20000}\n"
                                 << "log: {level: warn, access_log: false}\n";
  proxy_process binary({"--config", dir + "/c.yaml"});
  auto& proc = binary.proc;
  const auto ep = binary.proxy, admin = binary.admin;
  ASSERT_NE(ep.port(), 0) << proc.err();

  constexpr int streams = 500;
  std::atomic<int> started{0};
  std::vector<std::future<response>> results;
  for (int i = 0; i < streams; ++i)
    results.push_back(std::async(std::launch::async, [&] {
      request_options o;
      o.body = chat_body(true, "drain");
      o.headers = {{"x-sim-tokens", "60"}, {"x-sim-itl-ms", "50"}, {"x-sim-ttft-ms", "5"}};
      o.timeout = std::chrono::seconds(30);
      connection c(ep);
      ++started;
      return c.request(o);
    }));
  // SIGTERM once all 500 are live streams (a connection whose request has not arrived yet is idle,
  // and idle connections are rightly closed by the drain).
  request_options m;
  m.method = "GET";
  m.target = "/metrics";
  double active = 0;
  for (int i = 0; i < 600 && active < streams; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    active = metric_sum(parse_metrics(fetch(admin, m).body), "tokentap_active_streams");
  }
  ASSERT_EQ(active, streams) << "started " << started;
  const double t0 = now_ms();
  proc.signal(SIGTERM);
  int complete = 0;
  for (auto& f : results) {
    const auto r = f.get();
    if (r.status == 200 && r.complete && sse_data(r.body).back() == "[DONE]") ++complete;
  }
  EXPECT_EQ(complete, streams);
  EXPECT_EQ(proc.wait(std::chrono::seconds(25)), 0);
  EXPECT_LT(now_ms() - t0, 20000);
}

}  // namespace
}  // namespace tokentap::test
