// OpenTelemetry export (DESIGN.md §12) against a real receiver, not against itself: the proxy
// exports to a strict OTLP/HTTP receiver (test/node/otlp_receiver.mjs: protobufjs with the
// official opentelemetry-proto files that @elastic/mockotlpserver ships), and each captured body
// is decoded again by Google's `protoc --decode` with the same files.  Checked: span names,
// kinds, parent/child ids, attributes, that the upstream saw the propagated trace, parent-based
// sampling, no secret on any span, OTLP/JSON with headers, retries on 503 with Retry-After, and
// a receiver that is down, slow or answers garbage costing the proxy nothing but counted drops.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <simdjson.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "test/support/canned_upstream.hpp"
#include "test/support/http_client.hpp"
#include "test/support/metrics_text.hpp"
#include "test/support/ports.hpp"
#include "test/support/process.hpp"
#include "test/support/stack.hpp"
#include "test/support/tls_cert.hpp"

namespace tokentap::test {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

const std::string node_dir = std::string(TOKENTAP_SOURCE_DIR) + "/test/node";
const std::string proto_dir = node_dir + "/node_modules/@elastic/mockotlpserver";

// A streamed OpenAI chat completion with usage (cached prompt tokens included).
canned_response chat_stream() {
  const std::string head =
      R"({"id":"chatcmpl-1","object":"chat.completion.chunk","model":"gpt-test-0125",)";
  canned_response r{
      "text/event-stream",
      {"data: " + head +
           R"("choices":[{"index":0,"delta":{"role":"assistant","content":"First, "}}]})"
           "\n\n",
       "data: " + head +
           R"("choices":[{"index":0,"delta":{"content":"hello"}}]})"
           "\n\n",
       "data: " + head +
           R"("choices":[{"index":0,"delta":{},"finish_reason":"stop"}]})"
           "\n\n",
       "data: " + head +
           R"("choices":[],"usage":{"prompt_tokens":12,"completion_tokens":2,"total_tokens":14,"prompt_tokens_details":{"cached_tokens":4}}})"
           "\n\n",
       "data: [DONE]\n\n"}};
  r.gap = 10ms;
  return r;
}

request_options chat(std::vector<std::pair<std::string, std::string>> headers = {}) {
  request_options o;
  o.body = R"({"model":"gpt-test","stream":true,"messages":[{"role":"user","content":"hi"}]})";
  o.headers = {{"content-type", "application/json"},
               {"authorization", "Bearer sk-secret-key-0042"}};
  for (auto& h : headers) o.headers.push_back(std::move(h));
  return o;
}

// The receiver, as a child process; each decoded request is one JSON line on its stdout.
struct receiver {
  explicit receiver(std::vector<std::pair<std::string, std::string>> env = {})
      : dir(temp_dir()), p(program{"node"}, {node_dir + "/otlp_receiver.mjs"}, with_dir(env, dir)) {
    const auto line = p.wait_for_line("listening ", 10s);
    port = line.empty() ? 0 : std::stoi(line.substr(10));
  }
  static std::vector<std::pair<std::string, std::string>> with_dir(
      std::vector<std::pair<std::string, std::string>> env, const std::string& dir) {
    env.emplace_back("RECEIVER_DIR", dir);
    return env;
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port); }
  // The next request it decoded (or refused), "" when none came within `within`.
  std::string next(std::chrono::milliseconds within = 10s) { return p.wait_for_line("{", within); }

  std::string dir;
  process p;
  int port = 0;
};

struct span_view {
  std::string trace_id, span_id, parent_id, trace_state, name;
  std::int64_t kind = 0, flags = 0, status = 0;
  std::map<std::string, std::string> attributes;  // values as JSON text
  std::vector<std::string> events;
};

std::vector<span_view> spans_of(const std::string& line) {
  simdjson::dom::parser parser;
  std::vector<span_view> out;
  simdjson::dom::element doc;
  if (parser.parse(line).get(doc)) return out;
  simdjson::dom::array spans;
  if (doc["spans"].get_array().get(spans)) return out;
  for (auto s : spans) {
    span_view v;
    v.trace_id = std::string(s["traceId"].get_string().value());
    v.span_id = std::string(s["spanId"].get_string().value());
    v.parent_id = std::string(s["parentSpanId"].get_string().value());
    v.trace_state = std::string(s["traceState"].get_string().value());
    v.name = std::string(s["name"].get_string().value());
    v.kind = s["kind"].get_int64().value();
    v.flags = s["flags"].get_int64().value();
    v.status = s["status"]["code"].get_int64().value();
    simdjson::dom::object attributes;
    simdjson::dom::array events;
    if (s["attributes"].get_object().get(attributes) || s["events"].get_array().get(events))
      return {};
    for (auto [k, val] : attributes) v.attributes[std::string(k)] = simdjson::minify(val);
    for (auto e : events) v.events.emplace_back(e["name"].get_string().value());
    out.push_back(std::move(v));
  }
  return out;
}

// A string attribute's value (the receiver prints values as JSON).
std::string unquoted(const std::string& json_text) {
  simdjson::dom::parser parser;
  std::string_view v;
  if (parser.parse(json_text).get_string().get(v)) return "(not a string: " + json_text + ")";
  return std::string(v);
}

std::string file_text(const fs::path& p) {
  std::ifstream in(p);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

const span_view* find_kind(const std::vector<span_view>& spans, std::int64_t kind) {
  for (const auto& s : spans)
    if (s.kind == kind) return &s;
  return nullptr;
}

// The `traceparent` an upstream request carried.
std::string traceparent_of(const canned_upstream::request& r) {
  const auto at = r.head.find("\ntraceparent: ");
  if (at == std::string::npos) return "";
  return r.head.substr(at + 14, 55);
}

std::string header_of(const canned_upstream::request& r, const std::string& name) {
  const auto at = r.head.find("\n" + name + ": ");
  if (at == std::string::npos) return "";
  const auto start = at + name.size() + 3;
  return r.head.substr(start, r.head.find('\r', start) - start);
}

std::function<void(config::config&)> exporting_to(
    const canned_upstream& up, const receiver& rx,
    std::function<void(config::otel_config&)> more = {}) {
  return [&up, &rx, more](config::config& cfg) {
    std::string err;
    cfg.upstreams.front().endpoints = {
        *config::parse_url("http://127.0.0.1:" + std::to_string(up.port()), err)};
    cfg.otel.endpoint = rx.url() + "/v1/traces";
    cfg.otel.batch_delay = 100ms;
    cfg.otel.service_name = "tokentap-test";
    if (more) more(cfg.otel);
  };
}

// A listening socket that never accepts: connects complete in the backlog, no byte comes back.
struct silent_listener {
  silent_listener() {
    fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
    ::listen(fd, 64);
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    port = ntohs(a.sin_port);
  }
  ~silent_listener() { ::close(fd); }
  int fd = -1;
  std::uint16_t port = 0;
};

// A listener that answers every connection with bytes that are not HTTP, then closes it.
struct garbage_listener : silent_listener {
  garbage_listener()
      : t([this] {
          for (;;) {
            const int c = ::accept(fd, nullptr, nullptr);
            if (c < 0) return;  // (shut down)
            char buf[4096];
            (void)::recv(c, buf, sizeof buf, 0);
            const char junk[] = "\x16\x03\x01 not HTTP at all\r\n\r\n\xff\xfe";
            (void)::send(c, junk, sizeof junk - 1, MSG_NOSIGNAL);
            ::close(c);
          }
        }) {}
  ~garbage_listener() {
    ::shutdown(fd, SHUT_RDWR);
    t.join();
  }
  std::thread t;
};

double metric(const stack& s, const std::string& name,
              const std::map<std::string, std::string>& labels) {
  request_options o;
  o.method = "GET";
  o.target = "/metrics";
  return metric_sum(parse_metrics(fetch(s.proxy->admin_endpoint(), o).body), name, labels);
}

// The metric once it reached `want` (an export is counted when its answer is in, just after the
// receiver printed what it got), or its value after 5 s.
double metric_reaching(const stack& s, const std::string& name,
                       const std::map<std::string, std::string>& labels, double want) {
  double v = metric(s, name, labels);
  for (int i = 0; i < 100 && v < want; ++i) {
    std::this_thread::sleep_for(50ms);
    v = metric(s, name, labels);
  }
  return v;
}

TEST(Otel, SpansReachARealReceiverAndTheUpstreamJoinsTheClientsTrace) {
  receiver rx;
  ASSERT_GT(rx.port, 0) << rx.p.err();
  canned_upstream up({{"/v1/chat/completions", chat_stream()}});
  stack s(exporting_to(up, rx));

  // A client in a trace: the proxy continues it.
  const std::string client_trace = "4bf92f3577b34da6a3ce929d0e0e4736";
  const std::string client_span = "00f067aa0ba902b7";
  const auto r =
      fetch(s.proxy_ep(), chat({{"traceparent", "00-" + client_trace + "-" + client_span + "-01"},
                                {"tracestate", "congo=t61rcWkgMzE"},
                                {"baggage", "userId=alice"}}));
  ASSERT_EQ(r.status, 200);
  ASSERT_TRUE(r.complete);
  const auto line = rx.next();
  ASSERT_FALSE(line.empty()) << rx.p.err();
  EXPECT_EQ(line.find("sk-secret"), std::string::npos) << "a credential reached a span: " << line;
  EXPECT_NE(line.find(R"("service.name":"tokentap-test")"), std::string::npos) << line;
  const auto spans = spans_of(line);
  ASSERT_EQ(spans.size(), 2u) << line;
  const auto* server = find_kind(spans, 2);
  const auto* client = find_kind(spans, 3);
  ASSERT_TRUE(server && client) << line;

  // The SERVER span continues the client's trace; the CLIENT span is its child.
  EXPECT_EQ(server->trace_id, client_trace);
  EXPECT_EQ(server->parent_id, client_span);
  EXPECT_EQ(server->trace_state, "congo=t61rcWkgMzE");
  EXPECT_EQ(server->flags, 0x301) << "sampled, parent known to be remote";
  EXPECT_EQ(server->name, "POST /v1/chat/completions");
  EXPECT_EQ(server->attributes.at("http.request.method"), "\"POST\"");
  EXPECT_EQ(server->attributes.at("http.response.status_code"), "\"200\"");
  EXPECT_EQ(server->status, 0);
  EXPECT_EQ(client->trace_id, client_trace);
  EXPECT_EQ(client->parent_id, server->span_id);
  EXPECT_EQ(client->flags, 0x101);
  EXPECT_EQ(client->name, "chat gpt-test");
  const auto& a = client->attributes;
  EXPECT_EQ(a.at("gen_ai.operation.name"), "\"chat\"");
  EXPECT_EQ(a.at("gen_ai.provider.name"), "\"openai\"");
  EXPECT_EQ(a.at("gen_ai.request.model"), "\"gpt-test\"");
  EXPECT_EQ(a.at("gen_ai.request.stream"), "true");
  EXPECT_EQ(a.at("gen_ai.response.finish_reasons"), "[\"stop\"]");
  EXPECT_EQ(a.at("gen_ai.response.id"), "\"chatcmpl-1\"");
  EXPECT_EQ(a.at("gen_ai.response.model"), "\"gpt-test-0125\"");
  EXPECT_EQ(a.at("gen_ai.usage.input_tokens"), "\"12\"");  // cached included (DESIGN.md §6)
  EXPECT_EQ(a.at("gen_ai.usage.output_tokens"), "\"2\"");
  EXPECT_EQ(a.at("gen_ai.usage.cache_read.input_tokens"), "\"4\"");
  EXPECT_EQ(a.at("server.address"), "\"127.0.0.1\"");
  EXPECT_EQ(a.at("server.port"), "\"" + std::to_string(up.port()) + "\"");
  EXPECT_GT(std::stod(a.at("gen_ai.response.time_to_first_chunk")), 0.0);
  EXPECT_EQ(a.at("tokentap.outcome"), "\"ok\"");
  EXPECT_TRUE(a.contains("tokentap.itl.p50_ms")) << line;
  EXPECT_EQ(a.count("gen_ai.output.messages"), 0u) << "content without capture_content";
  EXPECT_EQ(a.count("gen_ai.input.messages"), 0u) << "content without capture_content";
  EXPECT_EQ(a.count("tokentap.trace.record_id"), 0u) << "no trace record without a trace dir";
  EXPECT_NE(std::find(client->events.begin(), client->events.end(), "tokentap.step"),
            client->events.end())
      << "the 'First,' step as a span event: " << line;

  // The upstream request carried the CLIENT span's traceparent; tracestate and baggage as sent.
  const auto received = up.received();
  ASSERT_EQ(received.size(), 1u);
  const auto& sent = received.front();
  EXPECT_EQ(traceparent_of(sent), "00-" + client_trace + "-" + client->span_id + "-01");
  EXPECT_EQ(header_of(sent, "tracestate"), "congo=t61rcWkgMzE");
  EXPECT_EQ(header_of(sent, "baggage"), "userId=alice");

  // Without a traceparent: a new trace, which the upstream joins.
  ASSERT_EQ(fetch(s.proxy_ep(), chat()).status, 200);
  const auto fresh = spans_of(rx.next());
  ASSERT_EQ(fresh.size(), 2u);
  const auto* root = find_kind(fresh, 2);
  ASSERT_TRUE(root);
  EXPECT_EQ(root->parent_id, "");
  EXPECT_EQ(root->flags, 0x101);
  EXPECT_EQ(traceparent_of(up.received().back()).substr(3, 32), root->trace_id);

  // A client trace that is not sampled: propagated, not exported.
  const std::string unsampled = "0af7651916cd43dd8448eb211c80319c";
  ASSERT_EQ(fetch(s.proxy_ep(), chat({{"traceparent", "00-" + unsampled + "-b7ad6b7169203331-00"}}))
                .status,
            200);
  EXPECT_EQ(traceparent_of(up.received().back()).substr(0, 36), "00-" + unsampled + "-");
  EXPECT_TRUE(traceparent_of(up.received().back()).ends_with("-00"));
  ASSERT_EQ(fetch(s.proxy_ep(), chat()).status, 200);  // (one more, sampled, to wait for)
  const auto after = rx.next();
  EXPECT_EQ(after.find(unsampled), std::string::npos) << after;
  EXPECT_EQ(spans_of(after).size(), 2u);
  EXPECT_EQ(metric_reaching(s, "tokentap_otel_spans_total", {{"result", "exported"}}, 6), 6);

  // Google's protoc decodes the same bodies with the official .proto files.
  const auto body = rx.dir + "/request-0.bin";
  ASSERT_TRUE(fs::exists(body));
  const auto cmd =
      "protoc --decode=opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest -I " +
      proto_dir + " opentelemetry/proto/collector/trace/v1/trace_service.proto < " + body + " 2>&1";
  std::string decoded;
  FILE* f = popen(cmd.c_str(), "r");
  ASSERT_NE(f, nullptr);
  char buf[4096];
  while (const auto n = fread(buf, 1, sizeof buf, f)) decoded.append(buf, n);
  EXPECT_EQ(pclose(f), 0) << decoded;
  EXPECT_NE(decoded.find("name: \"POST /v1/chat/completions\""), std::string::npos) << decoded;
  EXPECT_NE(decoded.find("kind: SPAN_KIND_SERVER"), std::string::npos) << decoded;
  EXPECT_NE(decoded.find("kind: SPAN_KIND_CLIENT"), std::string::npos) << decoded;
  EXPECT_NE(
      decoded.find("key: \"gen_ai.usage.input_tokens\"\n        value {\n          int_value: 12"),
      std::string::npos)
      << decoded;
  EXPECT_NE(decoded.find("flags: 769"), std::string::npos) << decoded;  // 0x301
}

// capture_content: the conversation and the answer in the conventions' structure; with traces
// on, the CLIENT span names the exchange's trace record.
TEST(Otel, ContentWhenAskedForAndTheTraceRecordOfTheExchange) {
  receiver rx;
  ASSERT_GT(rx.port, 0) << rx.p.err();
  canned_upstream up({{"/v1/chat/completions", chat_stream()}});
  const auto dir = temp_dir() + "/traces";
  const auto to_rx = exporting_to(up, rx, [](config::otel_config& o) { o.capture_content = true; });
  stack s([&](config::config& cfg) {
    to_rx(cfg);
    cfg.trace.dir = dir;
  });
  auto o = chat();
  o.body = R"({"model":"gpt-test","stream":true,"messages":[)"
           R"({"role":"system","content":"Be brief."},{"role":"user","content":"hi \"there\""}]})";
  ASSERT_EQ(fetch(s.proxy_ep(), o).status, 200);
  const auto line = rx.next();
  const auto spans = spans_of(line);
  ASSERT_EQ(spans.size(), 2u) << line << rx.p.err();
  const auto& a = find_kind(spans, 3)->attributes;
  EXPECT_EQ(unquoted(a.at("gen_ai.input.messages")),
            R"([{"role":"system","parts":[{"type":"text","content":"Be brief."}]},)"
            R"({"role":"user","parts":[{"type":"text","content":"hi \"there\""}]}])");
  EXPECT_EQ(unquoted(a.at("gen_ai.output.messages")),
            R"([{"role":"assistant","parts":[{"type":"text","content":"First, hello"}]}])");
  EXPECT_EQ(a.count("tokentap.content.truncated"), 0u);
  EXPECT_EQ(line.find("sk-secret"), std::string::npos) << line;

  // The record the trace hook wrote for this exchange has the id on the span.
  ASSERT_TRUE(a.contains("tokentap.trace.record_id")) << line;
  std::string records;
  for (int i = 0; i < 200 && records.empty(); ++i) {
    if (fs::exists(dir))
      for (const auto& f : fs::directory_iterator(dir)) records += file_text(f.path());
    if (records.empty()) std::this_thread::sleep_for(10ms);
  }
  const auto at = records.find(R"({"v":1,"id":")");
  ASSERT_NE(at, std::string::npos) << records;
  EXPECT_EQ(a.at("tokentap.trace.record_id"), "\"" + records.substr(at + 13, 16) + "\"");
}

TEST(Otel, JsonGzipWithHeadersAndResourceAndRetriesAfterA503) {
  receiver rx({{"RECEIVER_FAIL", "1"}, {"RECEIVER_STATUS", "503"}, {"RECEIVER_RETRY_AFTER", "1"}});
  ASSERT_GT(rx.port, 0) << rx.p.err();
  canned_upstream up({{"/v1/chat/completions", chat_stream()}});
  stack s(exporting_to(up, rx, [](config::otel_config& o) {
    o.protocol = config::otel_config::protocol_kind::json;
    o.headers = {{"x-tenant", "team-a"}};
    o.compression = config::otel_config::compression_kind::gzip;
    o.resource_attributes = {{"deployment.environment", "test"}, {"host.name", "gw-a"}};
  }));
  ASSERT_EQ(fetch(s.proxy_ep(), chat()).status, 200);
  const auto refused = rx.next();
  EXPECT_NE(refused.find(R"("refused":503)"), std::string::npos) << refused;
  const auto t0 = std::chrono::steady_clock::now();
  const auto line = rx.next();
  const auto waited = std::chrono::steady_clock::now() - t0;
  EXPECT_GE(waited, 800ms) << "the retry did not wait for Retry-After";
  EXPECT_NE(line.find(R"("content_type":"application/json")"), std::string::npos) << line;
  EXPECT_NE(line.find(R"("x-tenant":"team-a")"), std::string::npos) << line;
  // Compressed (the receiver gunzips what says Content-Encoding: gzip), the Resource as configured:
  // a configured host.name wins over the machine's.
  EXPECT_NE(line.find(R"("content_encoding":"gzip")"), std::string::npos) << line;
  EXPECT_NE(line.find(R"("deployment.environment":"test")"), std::string::npos) << line;
  EXPECT_NE(line.find(R"("host.name":"gw-a")"), std::string::npos) << line;
  EXPECT_NE(line.find(R"("service.name":"tokentap-test")"), std::string::npos) << line;
  const auto spans = spans_of(line);
  ASSERT_EQ(spans.size(), 2u) << line;
  EXPECT_EQ(find_kind(spans, 3)->attributes.at("gen_ai.usage.output_tokens"), "\"2\"");
  EXPECT_EQ(metric_reaching(s, "tokentap_otel_spans_total", {{"result", "exported"}}, 2), 2);
  EXPECT_EQ(metric(s, "tokentap_otel_spans_total", {{"result", "failed"}}), 0);
}

// A reload that names another receiver: new exchanges' spans go there, and the old exporter
// sends what it had before it goes (on the control thread, not an I/O thread).
TEST(Otel, AReloadMovesTheExportToTheNewReceiver) {
  receiver first, second;
  ASSERT_GT(first.port, 0);
  ASSERT_GT(second.port, 0);
  canned_upstream up({{"/v1/chat/completions", chat_stream()}});
  stack s(exporting_to(up, first, [](config::otel_config& o) { o.batch_delay = 60s; }));
  ASSERT_EQ(fetch(s.proxy_ep(), chat()).status, 200);  // waits in the first exporter's queue
  auto next = s.proxy->cfg();
  next.otel.endpoint = second.url() + "/v1/traces";
  next.otel.batch_delay = 100ms;
  ASSERT_TRUE(s.proxy->reload(next).applied);
  ASSERT_EQ(fetch(s.proxy_ep(), chat()).status, 200);
  EXPECT_EQ(spans_of(second.next()).size(), 2u);
  // The first exporter flushed its queue when its generation went (the next exchange let the
  // session's hold on it go).
  ASSERT_EQ(fetch(s.proxy_ep(), chat()).status, 200);
  EXPECT_EQ(spans_of(first.next()).size(), 2u);
  EXPECT_EQ(spans_of(second.next()).size(), 2u);
}

TEST(Otel, AReceiverThatIsDownSlowOrAnswersGarbageCostsOnlyCountedDrops) {
  // Slow: connections complete (the kernel's backlog), nothing is ever answered.  Export requests
  // time out after 1.5 s; meanwhile the queue (4 spans) fills and the rest is dropped — the
  // requests themselves do not wait.
  silent_listener slow;
  canned_upstream up({{"/v1/chat/completions", chat_stream()}});
  stack s([&](config::config& cfg) {
    std::string err;
    cfg.upstreams.front().endpoints = {
        *config::parse_url("http://127.0.0.1:" + std::to_string(up.port()), err)};
    cfg.otel.endpoint = "http://127.0.0.1:" + std::to_string(slow.port) + "/v1/traces";
    cfg.otel.batch_delay = 50ms;
    cfg.otel.batch_spans = 2;
    cfg.otel.queue_spans = 4;
    cfg.otel.export_timeout = 1500ms;
  });
  for (int i = 0; i < 6; ++i) {
    const auto r = fetch(s.proxy_ep(), chat());
    EXPECT_EQ(r.status, 200);
    EXPECT_LT(r.total_ms, 500) << "request " << i;
    if (i == 0) std::this_thread::sleep_for(200ms);  // its batch is being sent
  }
  EXPECT_GE(metric(s, "tokentap_otel_spans_total", {{"result", "queue_full"}}), 2);
  // Down: nothing listens.  Every span ends counted, none retried (no status to retry on).
  canned_upstream up2({{"/v1/chat/completions", chat_stream()}});
  const refusing_port refusing;
  const auto closed = refusing.port();
  stack d([&](config::config& cfg) {
    std::string err;
    cfg.upstreams.front().endpoints = {
        *config::parse_url("http://127.0.0.1:" + std::to_string(up2.port()), err)};
    cfg.otel.endpoint = "http://127.0.0.1:" + std::to_string(closed) + "/v1/traces";
    cfg.otel.batch_delay = 50ms;
  });
  for (int i = 0; i < 3; ++i) EXPECT_EQ(fetch(d.proxy_ep(), chat()).status, 200);
  EXPECT_EQ(metric_reaching(d, "tokentap_otel_spans_total", {{"result", "failed"}}, 6), 6);
  EXPECT_EQ(metric(d, "tokentap_otel_spans_total", {{"result", "exported"}}), 0);
  // Garbage: a receiver that answers bytes that are not HTTP.  Counted, never retried.
  garbage_listener junk;
  canned_upstream up3({{"/v1/chat/completions", chat_stream()}});
  stack g([&](config::config& cfg) {
    std::string err;
    cfg.upstreams.front().endpoints = {
        *config::parse_url("http://127.0.0.1:" + std::to_string(up3.port()), err)};
    cfg.otel.endpoint = "http://127.0.0.1:" + std::to_string(junk.port) + "/v1/traces";
    cfg.otel.batch_delay = 50ms;
  });
  for (int i = 0; i < 2; ++i) {
    const auto r = fetch(g.proxy_ep(), chat());
    EXPECT_EQ(r.status, 200);
    EXPECT_TRUE(r.complete);
  }
  EXPECT_EQ(metric_reaching(g, "tokentap_otel_spans_total", {{"result", "failed"}}, 4), 4);
  EXPECT_EQ(metric(g, "tokentap_otel_spans_total", {{"result", "exported"}}), 0);
}

}  // namespace
}  // namespace tokentap::test
