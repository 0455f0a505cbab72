// tokentap in front of a real engine: llama.cpp's llama-server (../shared/engines/llama.cpp, a
// tiny model on the CPU).  What a new user found wrong against it, each held to the engine's own
// answers: errors that end a 200 stream, Responses answers without a stream, the provider and
// model a series is counted under, and cache judgments on its real prompt-cache reuse.
#include <gtest/gtest.h>
#include <simdjson.h>

#include <filesystem>
#include <fstream>
#include <future>
#include <regex>
#include <thread>

#include "replay/trace_reader.hpp"
#include "test/support/http_client.hpp"
#include "test/support/llama_server.hpp"
#include "test/support/metrics_text.hpp"
#include "test/support/ports.hpp"
#include "test/support/process.hpp"
#include "test/support/tls_cert.hpp"

namespace tokentap::test {
namespace {

// One engine and one proxy (the real binary) for the whole suite: the engine loads in ~1 s.
class Engine : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!llama_server::available()) return;
    engine_ = new llama_server({"--metrics"});
    if (!engine_->ok()) return;
    traces_ = new std::string(temp_dir() + "/traces");
    const auto cfg = temp_dir() + "/engine.yaml";
    std::ofstream(cfg) << "listen: 127.0.0.1:0\nadmin: 127.0.0.1:0\nthreads: 2\n"
                          "upstreams:\n  llama: {url: "
                       << engine_->url()
                       << ", engine_metrics: {interval_ms: 200}}\nroutes:\n  - {name: engine, "
                          "prefix: /, upstream: llama}\n"
                          "trace: {dir: "
                       << *traces_ << "}\ncache: {prefill_min_samples: 5}\n";
    proxy_ = new proxy_process({"--config", cfg});
  }
  static void TearDownTestSuite() {
    if (proxy_) {
      proxy_->proc.signal(SIGTERM);
      proxy_->proc.wait(std::chrono::seconds(10));
    }
    delete proxy_;
    delete engine_;
    delete traces_;
    proxy_ = nullptr;
    engine_ = nullptr;
    traces_ = nullptr;
  }
  void SetUp() override {
    if (!llama_server::available()) GTEST_SKIP() << "no engine at " << llama_server::folder();
    if (engine_->built_for_another_cpu())
      GTEST_SKIP() << "llama-server at " << llama_server::folder()
                   << " dies of SIGILL here: built for another CPU (rebuild it on this host)";
    ASSERT_TRUE(engine_->ok()) << "llama-server did not start (exit status "
                               << engine_->exit_status() << "):\n"
                               << engine_->log();
    ASSERT_NE(proxy_->proxy.port(), 0) << proxy_->proc.err();
  }

  static response send(const std::string& target, const std::string& body) {
    request_options o;
    o.target = target;
    o.body = body;
    o.timeout = std::chrono::milliseconds(60000);
    return fetch(proxy_->proxy, o);
  }

  // Every trace line written so far, as text (the writer is asynchronous: waits for `n`).
  static std::vector<std::string> lines(std::size_t n) {
    std::vector<std::string> out;
    for (int i = 0; i < 500; ++i) {
      out.clear();
      std::error_code ec;
      std::vector<std::string> files;
      for (const auto& e : std::filesystem::directory_iterator(*traces_, ec))
        files.push_back(e.path().string());
      std::sort(files.begin(), files.end());
      for (const auto& f : files) {
        std::ifstream in(f);
        for (std::string l; std::getline(in, l);)
          if (!l.empty()) out.push_back(l);
      }
      if (out.size() >= n) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return out;
  }

  // The record of the exchange whose request body contains `marker`.
  static std::string record_with(const std::string& marker, std::size_t at_least) {
    for (const auto& l : lines(at_least))
      if (l.find(marker) != std::string::npos) return l;
    return {};
  }

  static std::string metrics() {
    request_options o;
    o.method = "GET";
    o.target = "/metrics";
    return fetch(proxy_->admin, o).body;
  }

  static std::size_t sent_;
  static llama_server* engine_;
  static proxy_process* proxy_;
  static std::string* traces_;
};

std::size_t Engine::sent_ = 0;
llama_server* Engine::engine_ = nullptr;
proxy_process* Engine::proxy_ = nullptr;
std::string* Engine::traces_ = nullptr;

std::string words(int n, const std::string& word = "word") {
  std::string s;
  for (int i = 0; i < n; ++i) s += word + " ";
  return s;
}

std::string cache_events_of(const std::string& line) {
  std::string out;
  for (auto at = line.find("{\"event\":\""); at != std::string::npos;
       at = line.find("{\"event\":\"", at + 1)) {
    const auto b = at + 10;
    out += line.substr(b, line.find('"', b) - b) + " ";
  }
  return out;
}

// Three long prompts at once fill the engine's 2048-token KV cache: it ends some of the streams
// with a bare `data: {"error":…}` event after tokens went out, in a 200 answer.
std::vector<response> overflow(const tcp::endpoint& proxy, const std::string& target,
                               const std::string& marker, bool responses_api) {
  std::vector<std::future<response>> f;
  for (int i = 0; i < 3; ++i) {
    const auto text = marker + std::to_string(i) + " " + words(900);
    const auto body =
        responses_api
            ? R"({"model":"tiny","stream":true,"max_output_tokens":400,"input":")" + text + "\"}"
            : R"({"model":"tiny","stream":true,"max_tokens":400,"messages":[{"role":"user","content":")" +
                  text + "\"}]}";
    f.push_back(std::async(std::launch::async, [proxy, target, body] {
      request_options o;
      o.target = target;
      o.body = body;
      o.timeout = std::chrono::milliseconds(60000);
      return fetch(proxy, o);
    }));
  }
  std::vector<response> out;
  for (auto& x : f) out.push_back(x.get());
  return out;
}

TEST_F(Engine, AResponsesStreamEndedByABareErrorIsAStreamError) {
  const auto answers = overflow(proxy_->proxy, "/v1/responses", "responses-overflow-", true);
  sent_ += answers.size();
  std::size_t errored = 0;
  for (std::size_t i = 0; i < answers.size(); ++i) {
    const auto& a = answers[i];
    ASSERT_EQ(a.status, 200u) << a.body.substr(0, 300);
    if (a.body.find("data: {\"error\":") == std::string::npos) continue;
    ++errored;
    EXPECT_EQ(a.body.find("response.completed"), std::string::npos);
    const auto line = record_with("responses-overflow-" + std::to_string(i) + " ", sent_);
    ASSERT_FALSE(line.empty());
    const auto r = replay::parse_record(line);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->outcome, "stream_error") << line.substr(0, 600);
    EXPECT_EQ(r->error_type, "server_error");
    EXPECT_EQ(r->provider, "openai-responses");
  }
  EXPECT_GE(errored, 1u) << "the engine's KV cache did not overflow: " << answers[0].body.size();
}

TEST_F(Engine, AChatStreamEndedByAnErrorIsOneStreamErrorEverywhere) {
  const auto answers = overflow(proxy_->proxy, "/v1/chat/completions", "chat-overflow-", false);
  sent_ += answers.size();
  std::size_t errored = 0;
  for (std::size_t i = 0; i < answers.size(); ++i) {
    if (answers[i].body.find("data: {\"error\":") == std::string::npos) continue;
    ++errored;
    EXPECT_EQ(answers[i].body.find("[DONE]"), std::string::npos);
    const auto r =
        replay::parse_record(record_with("chat-overflow-" + std::to_string(i) + " ", sent_));
    ASSERT_TRUE(r);
    EXPECT_EQ(r->outcome, "stream_error");
    // The engine named itself in its head: the stream is llama.cpp's, timings or not.
    EXPECT_EQ(r->provider, "llamacpp");
  }
  ASSERT_GE(errored, 1u);
  // The access log says what the trace says.
  for (int i = 0; i < 100 && proxy_->proc.err().find("outcome=stream_error") == std::string::npos;
       ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_NE(proxy_->proc.err().find("status=200 outcome=stream_error"), std::string::npos)
      << proxy_->proc.err();
  // One provider for the route's chat series: the failed streams beside the good ones.
  const auto m = parse_metrics(metrics());
  EXPECT_GT(
      metric_sum(m, "tokentap_requests_total", {{"route", "engine"}, {"provider", "llamacpp"}}), 0);
  EXPECT_EQ(
      metric_sum(m, "tokentap_requests_total", {{"route", "engine"}, {"provider", "openai-chat"}}),
      0);
}

TEST_F(Engine, AResponsesAnswerWithoutAStreamHasItsUsageAndText) {
  const auto a = send(
      "/v1/responses",
      R"({"model":"tiny","temperature":0,"seed":1,"max_output_tokens":5,"input":"plain responses answer"})");
  ++sent_;
  ASSERT_EQ(a.status, 200u) << a.body;
  const auto line = record_with("plain responses answer", sent_);
  const auto r = replay::parse_record(line);
  ASSERT_TRUE(r) << line;
  EXPECT_EQ(r->outcome, "ok");
  // The engine's own figures.
  simdjson::dom::parser p;
  const auto body = p.parse(a.body);
  EXPECT_EQ(r->input_tokens, int64_t(body["usage"]["input_tokens"]));
  EXPECT_EQ(r->output_tokens, int64_t(body["usage"]["output_tokens"]));
  EXPECT_EQ(r->cached_input_tokens,
            int64_t(body["usage"]["input_tokens_details"]["cached_tokens"]));
  std::string_view text = body["output"].at(0)["content"].at(0)["text"];
  simdjson::dom::parser q;
  std::string_view recorded = q.parse(line)["text"]["content"];
  EXPECT_EQ(recorded, text);
  EXPECT_FALSE(recorded.empty());
}

// What differs per request in the engine's answers: ids, creation times, its timings, the cached
// part of the prompt.
std::string per_request_fields_masked(std::string body) {
  for (const auto& [pattern, with] : std::vector<std::pair<std::regex, std::string>>{
           {std::regex(R"re("id":"[^"]*")re"), R"("id":"-")"},
           {std::regex(R"re("created":[0-9]+)re"), R"("created":0)"},
           {std::regex(R"re("timings":\{[^}]*\})re"), R"("timings":{})"},
           // (the second of two equal requests finds the first's prompt in the engine's cache)
           {std::regex(R"re("cached_tokens":[0-9]+)re"), R"("cached_tokens":0)"}})
    body = std::regex_replace(body, pattern, with);
  return body;
}

// Streamed and whole answers through the proxy are the engine's, byte for byte but for what
// differs per request (greedy decoding makes the text repeat); the trace holds exactly what the
// client got; the usage is the engine's own; and the proxy never saw the first token before the
// engine's own prefill could have produced it.
TEST_F(Engine, AnswersAreTheEnginesByteForByte) {
  const tcp::endpoint engine(boost::asio::ip::make_address("127.0.0.1"), engine_->port());
  for (const bool stream : {true, false}) {
    const std::string body =
        std::string(R"({"model":"tiny","max_tokens":12,"temperature":0,"seed":7,"stream":)") +
        (stream ? "true" : "false") + R"(,"messages":[{"role":"user","content":"byte for byte )" +
        (stream ? "s" : "w") + R"("}]})";
    request_options o;
    o.body = body;
    o.timeout = std::chrono::milliseconds(60000);
    const auto direct = fetch(engine, o);
    const auto proxied = send("/v1/chat/completions", body);
    ++sent_;
    ASSERT_EQ(direct.status, 200u) << direct.body;
    ASSERT_EQ(proxied.status, 200u) << proxied.body;
    EXPECT_EQ(per_request_fields_masked(proxied.body), per_request_fields_masked(direct.body));
    const auto line = record_with(std::string("byte for byte ") + (stream ? "s" : "w"), sent_);
    const auto r = replay::parse_record(line);
    ASSERT_TRUE(r) << line;
    std::string recorded;
    for (const auto& e : r->events) recorded += e.bytes;
    EXPECT_EQ(recorded, proxied.body);
    // The engine's own account of this answer: its timings (the last object that has them).
    const auto t = proxied.body.rfind("\"timings\":");
    ASSERT_NE(t, std::string::npos);
    const auto timings = proxied.body.substr(t + 10, proxied.body.find('}', t) - t - 9);
    simdjson::dom::parser p;
    const auto tj = p.parse(timings);
    const int64_t prompt_n = tj["prompt_n"], cache_n = tj["cache_n"],
                  predicted_n = tj["predicted_n"];
    const double prompt_ms = tj["prompt_ms"];
    EXPECT_EQ(r->input_tokens, prompt_n + cache_n) << timings;  // prompt_n excludes the cached
    EXPECT_EQ(r->cached_input_tokens, cache_n);
    EXPECT_EQ(r->output_tokens, predicted_n);
    if (stream) {
      EXPECT_GE(r->ttft_ms, prompt_ms) << timings;
    }
    // Its timings, read into the record's engine account, and set against the proxy's wait.
    const double predicted_ms = tj["predicted_ms"];
    const auto& a = r->attribution;
    EXPECT_EQ(a.engine_source, "llama.cpp") << line;
    EXPECT_NEAR(a.engine_prefill_ms.value_or(-1), prompt_ms, 0.001) << timings;
    EXPECT_NEAR(a.engine_decode_ms.value_or(-1), predicted_ms, 0.001) << timings;
    EXPECT_FALSE(a.engine_queue_ms);  // llama.cpp reports no queue
    ASSERT_TRUE(a.unexplained_ms) << line;
    const double waited = a.phases[4].value_or(0) + a.phases[5].value_or(0);  // head, first token
    EXPECT_NEAR(*a.unexplained_ms, waited - prompt_ms - (stream ? 0 : predicted_ms), 0.01);
    double sum = 0;
    for (const auto& p : a.phases) sum += p.value_or(0);
    EXPECT_NEAR(sum, r->e2e_ms, 1.0);
  }
}

// Its /metrics (llamacpp:*) scraped: recognized by its names, its load on the proxy's metrics.
TEST_F(Engine, ItsOwnMetricsAreScrapedByTheirNames) {
  std::vector<sample> m;
  for (int i = 0; i < 100; ++i) {
    m = parse_metrics(metrics());
    if (metric_sum(m, "tokentap_engine_scrapes_total", {{"result", "ok"}}) >= 2) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_GE(metric_sum(m, "tokentap_engine_scrapes_total", {{"result", "ok"}}), 2);
  EXPECT_EQ(metric_sum(m, "tokentap_engine_scrapes_total", {{"result", "garbage"}}), 0);
  EXPECT_EQ(metric_sum(m, "tokentap_engine_scrapes_total", {{"result", "error"}}), 0);
  // Idle between tests: nothing running, nothing deferred (llama.cpp's own words).
  EXPECT_EQ(metric_sum(m, "tokentap_engine_requests", {{"state", "running"}}), 0);
  EXPECT_EQ(metric_sum(m, "tokentap_engine_requests", {{"state", "waiting"}}), 0);
  EXPECT_NE(proxy_->proc.err().find("engine metrics read (llama.cpp)"), std::string::npos)
      << proxy_->proc.err();
}

TEST_F(Engine, NativeCompletionIsCountedUnderTheEnginesModel) {
  const auto a =
      send("/completion",
           R"({"prompt":"native completion model","n_predict":3,"temperature":0,"seed":1})");
  ++sent_;
  ASSERT_EQ(a.status, 200u) << a.body;
  simdjson::dom::parser p;
  const std::string model(std::string_view(p.parse(a.body)["model"]));
  ASSERT_FALSE(model.empty());
  const auto r = replay::parse_record(record_with("native completion model", sent_));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->model, model);
  EXPECT_EQ(r->provider, "llamacpp");
  const auto m = parse_metrics(metrics());
  EXPECT_GT(metric_sum(m, "tokentap_requests_total", {{"route", "engine"}, {"model", model}}), 0);
}

// A conversation's second turn repeats the first whole: the engine reuses all it had (its
// `cache_n`), which is a hit however long the new message is, and its 1-2 uncached tokens take
// the engine's fixed TTFT floor: no prefill anomaly.  A new conversation that opens with the same
// user message under another system prompt is a new conversation, not a diverged one.
TEST_F(Engine, CacheJudgedAgainstWhatTheEngineCouldReuse) {
  // Cold prompts first, so the prefill median has its samples (streamed: TTFT is measured on
  // streams).
  for (int i = 0; i < 8; ++i) {
    const auto a = send(
        "/v1/chat/completions",
        R"({"model":"tiny","temperature":0,"seed":1,"stream":true,"max_tokens":2,"messages":[{"role":"user","content":"cold )" +
            std::to_string(i) + " " + words(40, "sample") + "\"}]}");
    ++sent_;
    ASSERT_EQ(a.status, 200u) << a.body;
  }
  const std::string first =
      R"({"role":"system","content":"You answer briefly."},{"role":"user","content":"turn one of the cache conversation )" +
      words(30, "alpha") + "\"}";
  auto a = send(
      "/v1/chat/completions",
      R"({"model":"tiny","temperature":0,"seed":1,"max_tokens":4,"messages":[)" + first + "]}");
  ++sent_;
  ASSERT_EQ(a.status, 200u);
  simdjson::dom::parser p;
  const std::string reply(std::string_view(p.parse(a.body)["choices"].at(0)["message"]["content"]));
  // The second turn: the first whole, the engine's answer, and a long new message.
  std::string reply_json;
  for (char c : reply) {
    if (c == '"' || c == '\\') reply_json += '\\';
    if (static_cast<unsigned char>(c) >= 0x20) reply_json += c;
  }
  a = send("/v1/chat/completions",
           R"({"model":"tiny","temperature":0,"seed":1,"max_tokens":4,"messages":[)" + first +
               R"(,{"role":"assistant","content":")" + reply_json +
               R"("},{"role":"user","content":"second turn )" + words(60, "beta") + "\"}]}");
  ++sent_;
  ASSERT_EQ(a.status, 200u) << a.body;
  const auto body = p.parse(a.body);
  const int64_t cached = body["timings"]["cache_n"];
  const int64_t uncached = body["timings"]["prompt_n"];
  ASSERT_GT(cached, 0) << a.body;  // the engine reused the first turn
  ASSERT_GT(uncached, cached / 2) << "the new part should be long: " << a.body;
  const auto second = record_with("second turn", sent_);
  const auto events = cache_events_of(second);
  EXPECT_NE(events.find("hit "), std::string::npos) << second.substr(second.find("\"cache\":"));
  EXPECT_EQ(events.find("partial"), std::string::npos) << events;
  // The third turn under a changed system prompt: the engine can reuse only the template's
  // first tokens, and the record says why it missed.
  const std::string changed_first =
      R"({"role":"system","content":"Answer at length, with examples."},{"role":"user","content":"turn one of the cache conversation )" +
      words(30, "alpha") + "\"}";
  a = send(
      "/v1/chat/completions",
      R"({"model":"tiny","temperature":0,"seed":1,"max_tokens":4,"messages":[)" + changed_first +
          R"(,{"role":"assistant","content":")" + reply_json +
          R"("},{"role":"user","content":"second turn )" + words(60, "beta") +
          R"("},{"role":"assistant","content":"ok"},{"role":"user","content":"third turn"}]})");
  ++sent_;
  ASSERT_EQ(a.status, 200u) << a.body;
  const auto third_body = p.parse(a.body);
  const int64_t third_cached = third_body["timings"]["cache_n"];
  const int64_t third_uncached = third_body["timings"]["prompt_n"];
  EXPECT_LT(third_cached * 10, third_cached + third_uncached) << a.body;  // under 10 % reused
  const auto third = record_with("third turn", sent_);
  const auto cause = third.find(R"("event":"prefix_divergence")");
  ASSERT_NE(cause, std::string::npos) << third.substr(third.find("\"cache\":"));
  EXPECT_NE(third.find(R"("role":"system")", cause), std::string::npos)
      << third.substr(third.find("\"cache\":"));
  EXPECT_NE(third.find("\"cached_tokens\":" + std::to_string(third_cached), cause),
            std::string::npos)
      << third.substr(third.find("\"cache\":"));
  const auto third_events = cache_events_of(third);
  EXPECT_EQ(third_events.find("hit "), std::string::npos) << third_events;
  // The same request again: all but the last token cached, TTFT at the engine's floor.
  a = send(
      "/v1/chat/completions",
      R"({"model":"tiny","temperature":0,"seed":1,"stream":true,"max_tokens":2,"messages":[{"role":"user","content":"cold 0 )" +
          words(40, "sample") + "\"}]}");
  ++sent_;
  const auto again = lines(sent_).back();
  ASSERT_NE(cache_events_of(again).find("hit "), std::string::npos) << again;
  EXPECT_EQ(cache_events_of(again).find("prefill_anomaly"), std::string::npos)
      << again.substr(again.find("\"cache\":"));
  // Another system prompt, the same first user message, a first turn: no divergence.
  a = send(
      "/v1/chat/completions",
      R"({"model":"tiny","temperature":0,"seed":1,"max_tokens":2,"messages":[{"role":"system","content":"Another app."},{"role":"user","content":"turn one of the cache conversation )" +
          words(30, "alpha") + "\"}]}");
  ++sent_;
  const auto fresh = record_with("Another app.", sent_);
  ASSERT_FALSE(fresh.empty());
  EXPECT_EQ(cache_events_of(fresh).find("prefix_divergence"), std::string::npos)
      << fresh.substr(fresh.find("\"cache\":"));
}

}  // namespace
}  // namespace tokentap::test
