// The hook chain fed like the proxy feeds it: request, response head, upstream reads with their
// monotonic timestamps, end of stream.  Checks provider errors, failure isolation, per-event
// calls, samples and the stream_info (the request phase is test/hooks/hook_test.cpp's, the
// private seams test/hooks/builtin_seams_test.cpp's, the timing figures
// test/hooks/observe/timing_hook_test.cpp's).
#include "hooks/hook_chain.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "hooks/builtin_seams.hpp"
#include "hooks/export/trace_hook.hpp"
#include "hooks/observe/timing_hook.hpp"
#include "hooks/registry.hpp"
#include "test/hooks/chain_helpers.hpp"
#include "test/support/tls_cert.hpp"

namespace tokentap::hooks {
namespace {

using namespace chain_test;

TEST(HookChain, ProviderErrorInA200StreamIsTheOutcome) {
  config::config cfg;
  auto cap = std::make_shared<capture_factory>();
  hook_chain_factory f(cfg, {cap});
  const std::string b =
      "event: error\ndata: "
      "{\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}"
      "\n\n";
  request_view r = request(0);
  r.target = "/v1/messages";
  auto tap = f.create();
  tap->on_request(r);
  tap->on_response_head({200, "text/event-stream", "", 1, {}});
  tap->on_body({b.data(), b.size()}, {2, 2, 3});
  tap->on_stream_end(stream_outcome::ok, 4);
  EXPECT_EQ(cap->summary.outcome, stream_outcome::stream_error);
  EXPECT_EQ(cap->summary.error_type, "overloaded_error");
  EXPECT_EQ(cap->summary.provider, parsers::provider::anthropic);
  EXPECT_EQ(f.stats().stream_errors.load(), 1u);
}

TEST(HookChain, AFailingHookIsDisabledForItsStreamAndCounted) {
  config::config cfg;
  auto cap = std::make_shared<capture_factory>();
  hook_chain_factory f(cfg, {std::make_shared<throwing_factory>(), cap});
  stream_two_tokens(f);
  EXPECT_EQ(f.stats().hook_failures.load(), 1u);  // once, then disabled
  EXPECT_EQ(cap->tokens.size(), 2u);              // the next hook still saw everything
}

// A chain runs at most max_hooks hooks; one that throws is skipped for the rest of its stream
// wherever it sits, the others go on.
TEST(HookChain, AFailingHookAnywhereIsSkippedAndHooksPastTheLimitAreNotCreated) {
  static_assert(hook_chain_factory::max_hooks == 64);
  config::config cfg;
  auto counted = std::make_shared<capture_factory>();
  auto past_limit = std::make_shared<capture_factory>();
  std::vector<std::shared_ptr<hook_factory>> hooks(40, counted);
  hooks.push_back(std::make_shared<throwing_factory>());  // index 40
  hooks.insert(hooks.end(), 23, counted);                 // up to index 63
  hooks.push_back(past_limit);                            // index 64: not created
  hook_chain_factory f(cfg, hooks);
  stream_two_tokens(f);
  EXPECT_EQ(f.stats().hook_failures.load(), 1u);  // once, then skipped
  EXPECT_EQ(counted->tokens.size(), 63u * 2);
  EXPECT_TRUE(past_limit->tokens.empty());
}

// A hook that declares only token calls gets no on_body, one that declares none gets neither;
// every hook still sees the request and the end.
TEST(HookChain, PerEventCallsGoOnlyToHooksThatDeclareThem) {
  struct counting : hook {
    explicit counting(unsigned calls) : calls_(calls) {}
    unsigned per_event() const noexcept override { return calls_; }
    void on_request(const request_view&) override { ++requests; }
    void on_body(std::string_view, const hooks::body_times&) override { ++bodies; }
    void on_token(const token_event&) override { ++tokens; }
    void on_stream_end(const stream_info&) override { ++ends; }
    unsigned calls_;
    int requests = 0, bodies = 0, tokens = 0, ends = 0;
  };
  using factory = keeping_factory<counting>;
  auto both = std::make_shared<factory>(hook::body_calls | hook::token_calls);
  auto tokens_only = std::make_shared<factory>(hook::token_calls);
  auto none = std::make_shared<factory>(0);
  config::config cfg;
  hook_chain_factory f(cfg, {none, tokens_only, both});
  auto tap = f.create();
  tap->on_request(request(0));
  tap->on_response_head({200, "text/event-stream", "", 1, {}});
  const std::string b = chunk("content", "a") + chunk("content", "b");
  tap->on_body({b.data(), b.size()}, {2, 2, 3});
  tap->on_body({b.data(), b.size()}, {4, 4, 5});
  tap->on_stream_end(stream_outcome::ok, 6);
  for (auto* h : {both->made, tokens_only->made, none->made}) {
    EXPECT_EQ(h->requests, 1);
    EXPECT_EQ(h->ends, 1);
  }
  EXPECT_EQ(both->made->bodies, 2);
  EXPECT_EQ(both->made->tokens, 4);
  EXPECT_EQ(tokens_only->made->bodies, 0);
  EXPECT_EQ(tokens_only->made->tokens, 4);
  EXPECT_EQ(none->made->bodies + none->made->tokens, 0);
}

// Samples are measured once by the chain and reach every hook that takes them exactly once, in
// order, in batches of at most 32, at least once a second while events come, all before the
// stream's end; a non-streamed body gives no token gaps; hooks that do not ask get none.
TEST(HookChain, SamplesReachTheHooksThatTakeThemInBatches) {
  struct sampling : hook {
    explicit sampling(unsigned calls) : calls_(calls) {}
    unsigned per_event() const noexcept override { return calls_; }
    void on_samples(std::span<const sample> b, mono_ns now) override {
      EXPECT_FALSE(ended);
      batches.push_back({b.size(), now});
      got.insert(got.end(), b.begin(), b.end());
    }
    void on_stream_end(const stream_info& s) override {
      ended = true;
      summary = s;
    }
    unsigned calls_;
    bool ended = false;
    std::vector<std::pair<std::size_t, mono_ns>> batches;
    std::vector<sample> got;
    stream_info summary;
  };
  using factory = keeping_factory<sampling>;
  auto takes = std::make_shared<factory>(hook::sample_calls);
  auto also = std::make_shared<factory>(hook::sample_calls | hook::token_calls);
  auto not_asked = std::make_shared<factory>(hook::token_calls);
  config::config cfg;
  hook_chain_factory f(cfg, {takes, not_asked, also});
  auto tap = f.create();
  tap->on_request(request(0));
  tap->on_response_head({200, "text/event-stream", "", 1 * ms, {}});
  // 60 reads 10 ms apart (each one content token, every third a reasoning one), relayed in
  // read / 100 µs + i ns; then a quiet 2.5 s and one more read.
  std::vector<sample> want;
  mono_ns last_token = -1;
  auto read = [&](mono_ns at, int i) {
    const auto b = chunk(i % 3 ? "content" : "reasoning_content", "t");
    const mono_ns cost = 100000 + i;
    tap->on_body({b.data(), b.size()}, {at, at, at + cost});
    want.emplace_back(sample::overhead, cost);
    if (last_token >= 0)
      want.emplace_back(i % 3 ? sample::itl_content : sample::itl_reasoning, at - last_token);
    last_token = at;
  };
  for (int i = 0; i < 60; ++i) read(10 * ms + i * 10 * ms, i);
  read(10 * ms + 59 * 10 * ms + 2500 * ms, 60);
  tap->on_stream_end(stream_outcome::ok, 3200 * ms);
  for (auto* h : {takes->made, also->made}) {
    ASSERT_EQ(h->got.size(), want.size());
    for (std::size_t i = 0; i < want.size(); ++i) {
      EXPECT_EQ(h->got[i].kind(), want[i].kind()) << i;
      EXPECT_EQ(h->got[i].ns(), want[i].ns()) << i;
    }
    for (const auto& [n, now] : h->batches) EXPECT_LE(n, 32u);
    // The read after the quiet spell was handed over when it was written (with what waited
    // since the last full batch), not held until the end; the end handed over the rest.
    ASSERT_GE(h->batches.size(), 3u);
    const auto quiet = h->batches[h->batches.size() - 2];
    EXPECT_EQ(quiet.second, 10 * ms + 59 * 10 * ms + 2500 * ms + 100060);
    EXPECT_GT(quiet.first, 1u);
    EXPECT_EQ(h->batches.back(), std::make_pair(std::size_t{1}, 3200 * ms));
    EXPECT_TRUE(h->ended);
    EXPECT_EQ(h->summary.first_token_ns, 10 * ms);
    EXPECT_EQ(h->summary.first_content_ns, 20 * ms);
    EXPECT_EQ(h->summary.last_token_ns, 10 * ms + 59 * 10 * ms + 2500 * ms);
    EXPECT_EQ(h->summary.token_events, 61u);
  }
  EXPECT_TRUE(not_asked->made->got.empty());
  // A whole-JSON body: its tokens arrive together, so no gaps (only the read's overhead).
  auto json = f.create();
  json->on_request(request(0));
  json->on_response_head({200, "application/json", "", 1 * ms, {}});
  const std::string body = R"({"choices":[{"index":0,"message":{"content":"one two three"}}]})";
  json->on_body({body.data(), body.size()}, {2 * ms, 2 * ms, 3 * ms});
  json->on_stream_end(stream_outcome::ok, 4 * ms);
  ASSERT_EQ(takes->made->got.size(), 1u);
  EXPECT_EQ(takes->made->got[0].kind(), sample::overhead);
  EXPECT_EQ(takes->made->summary.first_token_ns, -1);
  EXPECT_EQ(takes->made->summary.token_events, 1u);
}

TEST(HookChain, CompressedBodiesAreNotDecoded) {
  config::config cfg;
  auto cap = std::make_shared<capture_factory>();
  hook_chain_factory f(cfg, {cap});
  auto tap = f.create();
  tap->on_request(request(0));
  tap->on_response_head({200, "text/event-stream", "gzip", 1, {}});
  const std::string b = "\x1f\x8b\x08\x00garbage";
  tap->on_body({b.data(), b.size()}, {2, 2, 3});
  tap->on_stream_end(stream_outcome::ok, 4);
  EXPECT_TRUE(cap->tokens.empty());
  EXPECT_EQ(f.stats().parse_errors[1].load(), 0u);
}

// At the stream's end every provider fills its piece before any hook reads the info: a hook
// listed before the provider of what it reads sees the piece too, and providers fill in
// dependency order (the second provider reads what the first filled).
TEST(HookChain, ProvidersFillTheInfoBeforeAnyHookReadsIt) {
  struct filler : hook {
    void fill(stream_info& s) override { s.timing.stalls = 7; }
  };
  struct second : hook {
    void fill(stream_info& s) override { s.redundant_tokens = s.timing.stalls + 1; }
  };
  struct reader : hook {
    void on_stream_end(const stream_info& s) override {
      stalls = s.timing.stalls;
      redundant = s.redundant_tokens;
    }
    std::uint64_t stalls = 0, redundant = 0;
  };
  auto r = std::make_shared<plain_factory<reader>>();
  hook_registry reg;
  reg.add("reader", [&](const config::config&) { return r; },
          {.provides = {}, .needs = {}, .reads = {"timing"}});
  reg.add("second", [](const config::config&) { return std::make_shared<plain_factory<second>>(); },
          {.provides = {"steps"}, .needs = {"timing"}, .reads = {}});
  reg.add("filler", [](const config::config&) { return std::make_shared<plain_factory<filler>>(); },
          {.provides = {"timing"}, .needs = {}, .reads = {}});
  config::config cfg;
  cfg.hooks = {"second", "reader", "filler"};
  EXPECT_EQ(reg.order(cfg), (std::vector<std::string>{"filler", "second", "reader"}));
  cfg.hooks = {"reader", "second", "filler"};
  hook_chain_factory f(cfg, reg.build(cfg));
  auto tap = f.create();
  tap->on_request(request(0));
  tap->on_stream_end(stream_outcome::ok, 4);
  EXPECT_EQ(r->made->stalls, 7u);
  EXPECT_EQ(r->made->redundant, 8u);
}

}  // namespace
}  // namespace tokentap::hooks
