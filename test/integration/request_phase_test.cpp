// The hooks' request phase through the real proxy: a hook registered by name answers locally
// (nothing reaches the upstream, the answer is counted), or adds upstream headers and rewrites
// the body that the upstream then receives.
#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "hooks/hook.hpp"
#include "hooks/registry.hpp"
#include "test/support/canned_upstream.hpp"
#include "test/support/http_client.hpp"
#include "test/support/metrics_text.hpp"
#include "test/support/stack.hpp"

namespace tokentap::test {
namespace {

std::string scrape(const tcp::endpoint& admin) {
  request_options o;
  o.method = "GET";
  o.target = "/metrics";
  return fetch(admin, o).body;
}

// Rejects requests for model "blocked" with 429 and a retry-after; tags the others for the
// upstream and rewrites their body.
class gatekeeper final : public hooks::hook {
 public:
  hooks::request_status on_request_phase(const hooks::request_view& r,
                                         hooks::request_callbacks& cb) override {
    if (r.model == "blocked") {
      cb.local_reply(429, "rate_limit_exceeded", "model blocked for this tenant");
      cb.add_reply_header("retry-after", "7");
      return hooks::request_status::stop;
    }
    cb.set_upstream_header("x-tokentap-tier", "gold");
    cb.set_upstream_header("host", "evil.example");  // refused: the proxy owns Host
    cb.replace_body(R"({"model":"rewritten","stream":true,"messages":[]})");
    return hooks::request_status::proceed;
  }
  bool rewrites_body() const noexcept override { return true; }
  unsigned per_event() const noexcept override { return 0; }
};

struct gatekeeper_factory final : hooks::hook_factory {
  std::unique_ptr<hooks::hook> create() override { return std::make_unique<gatekeeper>(); }
};

class RequestPhase : public ::testing::Test {
 protected:
  RequestPhase()
      : upstream_({{"/v1/chat/completions",
                    {"text/event-stream",
                     {"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"}}]}\n\n",
                      "data: [DONE]\n\n"}}}}),
        stack_(
            [this](config::config& cfg) {
              config::set_single_upstream(cfg,
                                          "http://127.0.0.1:" + std::to_string(upstream_.port()));
              cfg.hooks = {"metrics", "gatekeeper", "timing", "trace"};  // any order: reordered
              cfg.trace.dir = trace_dir_.string();
            },
            {}, nullptr,
            [](hooks::hook_registry& r) {
              r.add("gatekeeper",
                    [](const config::config&) { return std::make_shared<gatekeeper_factory>(); });
            }) {}

  // The trace records written so far, a line each.
  std::vector<std::string> records() const {
    std::vector<std::string> out;
    if (!std::filesystem::exists(trace_dir_)) return out;
    for (const auto& f : std::filesystem::directory_iterator(trace_dir_)) {
      std::ifstream in(f.path());
      for (std::string line; std::getline(in, line);) out.push_back(line);
    }
    return out;
  }

  // Removed after the proxy (declared before it): its trace writer may still be writing there.
  struct temp_dir : std::filesystem::path {
    using std::filesystem::path::path;
    ~temp_dir() {
      std::error_code ec;
      std::filesystem::remove_all(*this, ec);
    }
  };
  const temp_dir trace_dir_{std::filesystem::temp_directory_path() /
                            ("tokentap-request-phase-" + std::to_string(::getpid()) + "-" +
                             ::testing::UnitTest::GetInstance()->current_test_info()->name())};
  canned_upstream upstream_;
  stack stack_;
};

TEST_F(RequestPhase, AHookAnswersLocallyAndNothingIsForwarded) {
  request_options o;
  o.body = chat_body(true, "hello", true, "blocked");
  const auto r = fetch(stack_.proxy_ep(), o);
  EXPECT_EQ(r.status, 429);
  EXPECT_EQ(r.header("retry-after"), "7");
  EXPECT_EQ(r.header("content-type"), "application/json");
  EXPECT_NE(r.body.find(R"("type":"rate_limit_exceeded")"), std::string::npos) << r.body;
  EXPECT_NE(r.body.find(R"("message":"model blocked for this tenant")"), std::string::npos);
  EXPECT_EQ(upstream_.requests.load(), 0);

  // The connection stays usable (a 429 is not the client's fault), and the next request passes.
  o.body = chat_body(true, "hello", true, "sim-small");
  const auto ok = fetch(stack_.proxy_ep(), o);
  EXPECT_EQ(ok.status, 200);
  EXPECT_EQ(upstream_.requests.load(), 1);

  // Counted: among the proxy's own answers, and by code among the requests.
  double rejected = 0, by_code = 0;
  for (int i = 0; i < 200 && (rejected < 1 || by_code < 1); ++i) {
    const auto m = parse_metrics(scrape(stack_.proxy->admin_endpoint()));
    rejected = metric_sum(m, "tokentap_rejected_requests_total");
    by_code = metric_sum(m, "tokentap_requests_total", {{"code", "429"}});
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(rejected, 1);
  EXPECT_EQ(by_code, 1);

  // The trace has both: the rejected one with its status and no response.
  std::vector<std::string> lines;
  for (int i = 0; i < 200 && lines.size() < 2; ++i) {
    lines = records();
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(lines.size(), 2u);
  const auto rejected_line =
      lines[0].find(R"("outcome":"rejected")") != std::string::npos ? lines[0] : lines[1];
  EXPECT_NE(rejected_line.find(R"("outcome":"rejected")"), std::string::npos) << rejected_line;
  EXPECT_NE(rejected_line.find(R"("status":429)"), std::string::npos) << rejected_line;
  EXPECT_NE(rejected_line.find(R"("model":"blocked")"), std::string::npos) << rejected_line;
}

// The local answer speaks the path's provider: an Anthropic client gets Anthropic's error shape.
TEST_F(RequestPhase, TheLocalAnswerIsShapedForThePathsProvider) {
  request_options o;
  o.target = "/v1/messages";
  o.body = R"({"model":"blocked","max_tokens":16,"messages":[{"role":"user","content":"hi"}]})";
  const auto r = fetch(stack_.proxy_ep(), o);
  EXPECT_EQ(r.status, 429);
  EXPECT_EQ(r.body.rfind(R"({"type":"error","error":{"type":"rate_limit_exceeded",)", 0), 0u)
      << r.body;
  EXPECT_EQ(upstream_.requests.load(), 0);
}

TEST_F(RequestPhase, UpstreamHeadersAndARewrittenBodyReachTheUpstream) {
  request_options o;
  o.body = chat_body(true, "hello", true, "sim-small");
  const auto r = fetch(stack_.proxy_ep(), o);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_NE(r.body.find("\"hi\""), std::string::npos);
  const auto got = upstream_.received();
  ASSERT_EQ(got.size(), 1u);
  const auto& head = got[0].head;
  EXPECT_NE(head.find("\r\nx-tokentap-tier: gold"), std::string::npos) << head;
  EXPECT_EQ(head.find("evil.example"), std::string::npos) << head;
  EXPECT_EQ(got[0].body, R"({"model":"rewritten","stream":true,"messages":[]})");
  const auto length = std::to_string(got[0].body.size());
  EXPECT_NE(head.find("Content-Length: " + length), std::string::npos) << head;
}

}  // namespace
}  // namespace tokentap::test
