// Streams that no server here writes, through the real binary: provider events whose keys come
// in another order than the providers' own (Go's sorted maps, Python dicts, re-serializing
// gateways), and several choices (n > 1).  Each one's trace record must say what the stream said.
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include <simdjson.h>

#include "test/support/canned_upstream.hpp"
#include "test/support/http_client.hpp"
#include "test/support/process.hpp"
#include "test/support/tls_cert.hpp"

namespace tokentap::test {
namespace {

namespace od = simdjson::ondemand;

// The Responses stream of reference §3b with every object's keys sorted: "type" comes last.
canned_response sorted_responses_stream() {
  canned_response r;
  r.gap = std::chrono::milliseconds(20);
  r.events = {
      "event: response.created\ndata: "
      R"({"response":{"id":"resp_1","status":"in_progress","usage":null},"sequence_number":0,"type":"response.created"})"
      "\n\n",
      "event: response.output_text.delta\ndata: "
      R"({"content_index":0,"delta":"Hel","item_id":"msg_1","output_index":0,"sequence_number":1,"type":"response.output_text.delta"})"
      "\n\n",
      "event: response.output_text.delta\ndata: "
      R"({"content_index":0,"delta":"lo","item_id":"msg_1","output_index":0,"sequence_number":2,"type":"response.output_text.delta"})"
      "\n\n",
      "event: response.completed\ndata: "
      R"({"response":{"id":"resp_1","status":"completed","usage":{"input_tokens":13,"input_tokens_details":{"cached_tokens":4},"output_tokens":2,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":15}},"sequence_number":3,"type":"response.completed"})"
      "\n\n"};
  return r;
}

// TGI's stream with the last event's "generated_text" (the whole answer) before its "token".
canned_response reordered_tgi_stream() {
  canned_response r;
  r.gap = std::chrono::milliseconds(20);
  r.events = {
      R"(data:{"details":null,"generated_text":null,"index":1,"token":{"id":1,"logprob":-0.5,"special":false,"text":"Hel"}})"
      "\n\n",
      R"(data:{"details":{"finish_reason":"eos_token","generated_tokens":2,"input_length":7,"seed":null},"generated_text":"Hello","index":2,"token":{"id":2,"logprob":-0.1,"special":false,"text":"lo"}})"
      "\n\n"};
  return r;
}

// Two choices, interleaved, 30 ms apart: each choice's tokens are 60 ms apart.
canned_response two_choices_stream() {
  canned_response r;
  r.gap = std::chrono::milliseconds(30);
  for (int i = 0; i < 6; ++i) {
    const int choice = i % 2;
    const std::string text = std::string(1, choice == 0 ? 'a' : 'x') + std::to_string(i / 2);
    const bool last = i >= 4;
    r.events.push_back(R"(data: {"choices":[{"delta":{"content":")" + text +
                       R"("},"finish_reason":)" +
                       (last ? (choice ? "\"length\"" : "\"stop\"") : std::string("null")) +
                       R"(,"index":)" + std::to_string(choice) + "}]}\n\n");
  }
  r.events.push_back(
      "data: {\"choices\":[],\"usage\":{\"completion_tokens\":6,\"prompt_tokens\":3}}\n\n"
      "data: [DONE]\n\n");
  return r;
}

class ProviderStreams : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = temp_dir();
    traces_ = dir_ + "/traces";
    std::ofstream(dir_ + "/c.yaml")
        << "listen: 127.0.0.1:0\nadmin: 127.0.0.1:0\nthreads: 2\n"
        << "upstreams:\n  canned: {url: http://127.0.0.1:" << upstream_.port() << "}\n"
        << "routes:\n  - {prefix: /, upstream: canned}\n"
        << "log: {level: warn, access_log: false}\n"
        << "trace: {dir: '" << traces_ << "'}\n";
    proc_ =
        std::make_unique<process>(std::vector<std::string>{"proxy", "--config", dir_ + "/c.yaml"});
    const auto ep =
        ready_endpoint(proc_->wait_for_line("ready ", std::chrono::seconds(10)), "proxy");
    ASSERT_FALSE(ep.empty()) << proc_->err();
    const auto colon = ep.rfind(':');
    proxy_ = {boost::asio::ip::make_address(ep.substr(0, colon)),
              static_cast<unsigned short>(std::stoi(ep.substr(colon + 1)))};
  }
  void TearDown() override {
    if (proc_) {
      proc_->signal(SIGTERM);
      EXPECT_EQ(proc_->wait(std::chrono::seconds(10)), 0);
    }
  }

  // Sends one request and returns its trace record.
  std::string exchange(const std::string& target, const std::string& body) {
    request_options o;
    o.target = target;
    o.body = body;
    o.headers = {{"Content-Type", "application/json"}};
    const auto r = fetch(proxy_, o);
    EXPECT_TRUE(r.complete);
    EXPECT_EQ(r.status, 200u);
    for (int i = 0; i < 500; ++i) {
      if (std::filesystem::exists(traces_)) {
        for (const auto& e : std::filesystem::directory_iterator(traces_)) {
          // Only complete lines: the writer may be in the middle of appending one.
          std::ifstream in(e.path());
          const std::string all((std::istreambuf_iterator<char>(in)),
                                std::istreambuf_iterator<char>());
          for (std::size_t at = 0, nl; (nl = all.find('\n', at)) != std::string::npos; at = nl + 1)
            if (all.find(target, at) < nl) return all.substr(at, nl - at);
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ADD_FAILURE() << "no trace record for " << target;
    return {};
  }

  canned_upstream upstream_{{{"/v1/responses", sorted_responses_stream()},
                             {"/generate_stream", reordered_tgi_stream()},
                             {"/v1/chat/completions", two_choices_stream()}}};
  std::string dir_, traces_;
  std::unique_ptr<process> proc_;
  tcp::endpoint proxy_;
};

struct parsed {
  explicit parsed(const std::string& line) : json(line) {}
  simdjson::padded_string json;
  od::parser parser;
  od::document doc;
};

TEST_F(ProviderStreams, ResponsesStreamWithTheTypeLast) {
  const auto line = exchange("/v1/responses", R"({"input":"hi","model":"gpt-x","stream":true})");
  parsed p(line);
  ASSERT_FALSE(p.parser.iterate(p.json).get(p.doc)) << line;
  std::string_view sv;
  std::int64_t n = 0;
  double d = 0;
  ASSERT_FALSE(p.doc["outcome"].get_string().get(sv));
  EXPECT_EQ(sv, "ok");
  ASSERT_FALSE(p.doc["provider"].get_string().get(sv));
  EXPECT_EQ(sv, "openai-responses");
  ASSERT_FALSE(p.doc["model"].get_string().get(sv));
  EXPECT_EQ(sv, "gpt-x");
  ASSERT_FALSE(p.doc["finish_reason"].get_string().get(sv)) << line;
  EXPECT_EQ(sv, "completed");
  ASSERT_FALSE(p.doc["timing"]["ttft_ms"].get_double().get(d)) << line;
  EXPECT_GE(d, 15.0);  // the first delta came 20 ms after the head
  ASSERT_FALSE(p.doc["usage"]["input_tokens"].get_int64().get(n)) << line;
  EXPECT_EQ(n, 13);
  ASSERT_FALSE(p.doc["usage"]["cached_input_tokens"].get_int64().get(n)) << line;
  EXPECT_EQ(n, 4);
  ASSERT_FALSE(p.doc["text"]["content"].get_string().get(sv)) << line;
  EXPECT_EQ(sv, "Hello");
}

TEST_F(ProviderStreams, TgiStreamWithTheGeneratedTextFirst) {
  const auto line =
      exchange("/generate_stream", R"({"inputs":"hi","parameters":{"max_new_tokens":2}})");
  parsed p(line);
  ASSERT_FALSE(p.parser.iterate(p.json).get(p.doc)) << line;
  std::string_view sv;
  std::int64_t n = 0;
  ASSERT_FALSE(p.doc["provider"].get_string().get(sv));
  EXPECT_EQ(sv, "tgi");
  ASSERT_FALSE(p.doc["usage"]["output_tokens"].get_int64().get(n)) << line;
  EXPECT_EQ(n, 2);
  ASSERT_FALSE(p.doc["text"]["content"].get_string().get(sv)) << line;
  EXPECT_EQ(sv, "Hello");  // once, not "Hello" + "Hello"
}

TEST_F(ProviderStreams, TwoChoicesKeepTheirTextsAndGaps) {
  const auto line =
      exchange("/v1/chat/completions",
               R"({"model":"m","n":2,"stream":true,"messages":[{"role":"user","content":"hi"}]})");
  parsed p(line);
  ASSERT_FALSE(p.parser.iterate(p.json).get(p.doc)) << line;
  std::string_view sv;
  std::int64_t n = 0;
  double d = 0;
  ASSERT_FALSE(p.doc["choices"].get_int64().get(n)) << line;
  EXPECT_EQ(n, 2);
  ASSERT_FALSE(p.doc["text"]["content"].get_string().get(sv)) << line;
  EXPECT_EQ(sv, "a0a1a2");  // the first choice's
  // Gaps within a choice (~60 ms), never across the interleaved choices (~30 ms).
  ASSERT_FALSE(p.doc["timing"]["itl_ms"]["p50"].get_double().get(d)) << line;
  EXPECT_GE(d, 55.0) << line;
  ASSERT_FALSE(p.doc["timing"]["itl_ms"]["n"].get_int64().get(n)) << line;
  EXPECT_EQ(n, 4);  // 2 gaps in each choice
  od::array rows;
  ASSERT_FALSE(p.doc["by_choice"].get_array().get(rows)) << line;
  std::vector<std::string> seen;
  for (auto row : rows) {
    std::int64_t index = 0, tokens = 0;
    std::string_view content, finish;
    ASSERT_FALSE(row["index"].get_int64().get(index));
    ASSERT_FALSE(row["token_events"].get_int64().get(tokens));
    ASSERT_FALSE(row["finish_reason"].get_string().get(finish));
    ASSERT_FALSE(row["content"].get_string().get(content));
    seen.push_back(std::to_string(index) + ":" + std::to_string(tokens) + ":" +
                   std::string(finish) + ":" + std::string(content));
  }
  EXPECT_EQ(seen, (std::vector<std::string>{"0:3:stop:a0a1a2", "1:3:length:x0x1x2"}));
}

}  // namespace
}  // namespace tokentap::test
