// The hook chain fed like the proxy feeds it: request phase, request, response head, upstream
// reads with their monotonic timestamps, end of stream.  Checks the request phase, provider errors,
// failure isolation, per-event calls, shaped reads, samples and the stream_info (the timing
// figures are test/hooks/observe/timing_hook_test.cpp's).
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

// ---- the request phase

// A request-phase hook scripted by a function; counts its calls.
struct phase_factory : hook_factory {
  using script = std::function<request_status(const request_view&, request_callbacks&)>;
  struct phase_hook : hook {
    explicit phase_hook(phase_factory& f) : f_(f) {}
    request_status on_request_phase(const request_view& r, request_callbacks& cb) override {
      ++f_.calls;
      return f_.run(r, cb);
    }
    bool rewrites_body() const noexcept override { return f_.rewrites; }
    void on_request(const request_view& r) override { f_.saw_request = std::string(r.body); }
    phase_factory& f_;
  };
  explicit phase_factory(script s, bool rewrites = false) : run(std::move(s)), rewrites(rewrites) {}
  std::unique_ptr<hook> create() override { return std::make_unique<phase_hook>(*this); }
  script run;
  bool rewrites;
  int calls = 0;
  std::string saw_request;
};

request_status proceed(const request_view&, request_callbacks&) {
  return request_status::proceed;
}

TEST(RequestPhase, AStopAnswersLocallyAndTheHooksAfterItAreNotAsked) {
  config::config cfg;
  auto limiter = std::make_shared<phase_factory>([](const request_view&, request_callbacks& cb) {
    cb.local_reply(429, "rate_limited", "tenant over its budget");
    cb.add_reply_header("retry-after", "3");
    return request_status::stop;
  });
  auto after = std::make_shared<phase_factory>(proceed);
  auto cap = std::make_shared<capture_factory>();
  hook_chain_factory f(cfg, {limiter, after, cap});
  auto tap = f.create();
  request_decision d;
  tap->decide(request(0), d);
  EXPECT_TRUE(d.stop);
  EXPECT_EQ(d.status, 429u);
  EXPECT_EQ(d.error_type, "rate_limited");
  EXPECT_EQ(d.error_message, "tenant over its budget");
  ASSERT_EQ(d.reply_headers.size(), 1u);
  EXPECT_EQ(d.reply_headers[0].name, "retry-after");
  EXPECT_EQ(d.reply_headers[0].value, "3");
  EXPECT_EQ(limiter->calls, 1);
  EXPECT_EQ(after->calls, 0);
  // The observers see the request end rejected with the reply's status.
  tap->on_request(request(0));
  tap->on_stream_end(stream_outcome::rejected, 5);
  EXPECT_EQ(cap->summary.outcome, stream_outcome::rejected);
  EXPECT_EQ(cap->summary.status, 429u);
  EXPECT_EQ(to_string(stream_outcome::rejected), "rejected");
}

TEST(RequestPhase, HooksAddUpstreamHeadersAndARouteKeyInOrder) {
  config::config cfg;
  auto first = std::make_shared<phase_factory>([](const request_view&, request_callbacks& cb) {
    EXPECT_TRUE(cb.set_upstream_header("traceparent", "00-aa-bb-01"));
    EXPECT_TRUE(cb.set_upstream_header("x-tier", "bronze"));
    cb.set_route_key("conversation-1");
    return request_status::proceed;
  });
  auto second = std::make_shared<phase_factory>([](const request_view&, request_callbacks& cb) {
    EXPECT_TRUE(cb.set_upstream_header("X-Tier", "gold"));  // replaces, whatever the case
    return request_status::proceed;
  });
  hook_chain_factory f(cfg, {first, second});
  auto tap = f.create();
  request_decision d;
  tap->decide(request(0), d);
  EXPECT_FALSE(d.stop);
  ASSERT_EQ(d.upstream_headers.size(), 2u);
  EXPECT_EQ(d.upstream_headers[0].name, "traceparent");
  EXPECT_EQ(d.upstream_headers[1].value, "gold");
  EXPECT_EQ(d.route_key, "conversation-1");
  EXPECT_EQ(second->calls, 1);
}

// Fields the proxy owns, and anything that would smuggle a line into the head, are refused.
TEST(RequestPhase, ProxyOwnedAndMalformedFieldsAreRefused) {
  config::config cfg;
  std::vector<bool> results;
  auto h = std::make_shared<phase_factory>([&](const request_view&, request_callbacks& cb) {
    for (auto [name, value] :
         std::vector<std::pair<std::string, std::string>>{{"Host", "evil"},
                                                          {"content-length", "1"},
                                                          {"Transfer-Encoding", "chunked"},
                                                          {"Connection", "close"},
                                                          {"x-ok", "fine\r\nx-injected: 1"},
                                                          {"bad name", "v"},
                                                          {"", "v"},
                                                          {"x-good", "v"}})
      results.push_back(cb.set_upstream_header(name, value));
    cb.add_reply_header("x-bad", "a\nb");
    return request_status::proceed;
  });
  hook_chain_factory f(cfg, {h});
  auto tap = f.create();
  request_decision d;
  tap->decide(request(0), d);
  EXPECT_EQ(results, (std::vector<bool>{false, false, false, false, false, false, false, true}));
  ASSERT_EQ(d.upstream_headers.size(), 1u);
  EXPECT_EQ(d.upstream_headers[0].name, "x-good");
  EXPECT_TRUE(d.reply_headers.empty());
}

TEST(RequestPhase, OnlyHooksThatSaySoMayRewriteTheBody) {
  config::config cfg;
  const auto rewrite = [](const request_view&, request_callbacks& cb) {
    cb.replace_body(R"({"model":"m","rewritten":true})");
    return request_status::proceed;
  };
  {
    hook_chain_factory f(cfg, {std::make_shared<phase_factory>(rewrite, false)});
    request_decision d;
    f.create()->decide(request(0), d);
    EXPECT_FALSE(d.body.has_value());
  }
  {
    hook_chain_factory f(cfg, {std::make_shared<phase_factory>(rewrite, true)});
    request_decision d;
    f.create()->decide(request(0), d);
    ASSERT_TRUE(d.body.has_value());
    EXPECT_EQ(*d.body, R"({"model":"m","rewritten":true})");
  }
}

// Fail open: a hook that throws is disabled and counted, a stop without a reply or a reply
// without a stop is not a stop; the request goes on to the next hook and upstream.
TEST(RequestPhase, UnclearOrFailingHooksLetTheRequestGoOn) {
  config::config cfg;
  auto thrower = std::make_shared<phase_factory>(
      [](const request_view&, request_callbacks&) -> request_status {
        throw std::runtime_error("admission store down");
      });
  auto silent_stop = std::make_shared<phase_factory>(
      [](const request_view&, request_callbacks&) { return request_status::stop; });
  auto reply_no_stop =
      std::make_shared<phase_factory>([](const request_view&, request_callbacks& cb) {
        cb.local_reply(503, "overloaded", "shed");
        cb.add_reply_header("retry-after", "1");
        return request_status::proceed;
      });
  auto last = std::make_shared<phase_factory>(proceed);
  hook_chain_factory f(cfg, {thrower, silent_stop, reply_no_stop, last});
  auto tap = f.create();
  request_decision d;
  tap->decide(request(0), d);
  EXPECT_FALSE(d.stop);
  EXPECT_EQ(d.status, 0u);
  EXPECT_TRUE(d.reply_headers.empty());
  EXPECT_EQ(last->calls, 1);
  EXPECT_EQ(f.stats().hook_failures.load(), 1u);
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

// Where the state of a stream's next event lies (stream_tap::add_hot_lines, which the relay
// prefetches): the chain's own fields, the hooks it calls at every read or token — not those
// it calls only per stream or per batch of samples, nor one disabled after it threw — and the
// decoder.
TEST(HookChainPerf, HotLinesAreTheChainThePerEventHooksAndTheDecoder) {
  struct marking : hook, hot_state {
    explicit marking(unsigned calls) : calls_(calls) {}
    unsigned per_event() const noexcept override { return calls_; }
    void on_token(const token_event&) override {
      if (throws) throw std::runtime_error("boom");
    }
    void add_hot_lines(parsers::hot_lines& l) const noexcept override { l.add(&marker); }
    unsigned calls_;
    bool throws = false;
    alignas(64) char marker = 0;
  };
  using factory = keeping_factory<marking>;
  auto body = std::make_shared<factory>(hook::body_calls);
  auto tokens = std::make_shared<factory>(hook::token_calls);
  auto samples = std::make_shared<factory>(hook::sample_calls);
  auto none = std::make_shared<factory>(0);
  auto failing = std::make_shared<factory>(hook::token_calls);
  // A hook from elsewhere knows nothing of hot lines: its object's first line is listed.
  struct plain : hook {
    unsigned per_event() const noexcept override { return token_calls; }
  };
  auto other = std::make_shared<plain_factory<plain>>();
  config::config cfg;
  hook_chain_factory f(cfg, {none, body, samples, tokens, failing, other});
  auto tap = f.create();
  failing->made->throws = true;
  auto listed = [&](const void* p) {
    parsers::hot_lines l;
    tap->add_hot_lines(l);
    bool found = false;
    const auto want = reinterpret_cast<std::uintptr_t>(p) & ~std::uintptr_t{63};
    l.for_each_line(
        [&](const void* q) { found = found || reinterpret_cast<std::uintptr_t>(q) == want; });
    return found;
  };
  auto count = [&] {
    parsers::hot_lines l;
    tap->add_hot_lines(l);
    std::size_t n = 0;
    l.for_each_line([&](const void*) { ++n; });
    return n;
  };
  tap->on_request(request(0));
  EXPECT_TRUE(listed(tap.get()));
  EXPECT_TRUE(listed(&body->made->marker));
  EXPECT_TRUE(listed(&tokens->made->marker));
  EXPECT_TRUE(listed(&failing->made->marker));
  EXPECT_FALSE(listed(&samples->made->marker));
  EXPECT_FALSE(listed(&none->made->marker));
  EXPECT_TRUE(listed(other->made));
  const auto before_decoder = count();
  tap->on_response_head({200, "text/event-stream", "", 1, {}});
  const auto with_decoder = count();
  EXPECT_GT(with_decoder, before_decoder);
  const std::string b = chunk("content", "a");
  tap->on_body({b.data(), b.size()}, {2, 2, 3});  // the failing hook throws: disabled
  EXPECT_FALSE(listed(&failing->made->marker));
  EXPECT_TRUE(listed(&tokens->made->marker));
  // One hook's line fewer; the chunk's shape is kept now (the next chunk like it is compared
  // with it, heap bytes of their own): its lines are listed too.
  EXPECT_GE(count(), with_decoder);
  tap->on_stream_end(stream_outcome::ok, 4);
}

// With every built-in hook on, a streaming chat response's hot lines — the chain's, the hooks'
// and the decoder's — leave room in the list for the relay's own five runs (its op, the
// exchange, the body decoder, the session's relay fields, the client socket; listed first):
// a full list silently drops whatever comes last (the decoder's).
TEST(HookChainPerf, EveryBuiltinHooksHotLinesFitTheListBesideTheRelays) {
  constexpr std::size_t relay_runs = 5;
  config::config cfg;
  cfg.trace.dir = test::temp_dir();
  hook_chain_factory f(cfg, builtin_hooks().build(cfg));
  auto tap = f.create();
  tap->on_request(request(0));
  tap->on_response_head({200, "text/event-stream", "", 1, {}});
  std::size_t most = 0;
  mono_ns t = ms;
  for (int i = 0; i < 40; ++i, t += ms) {
    const std::string b = i < 20 ? chunk("reasoning_content", i == 0 ? "First, " : "some thought ")
                                 : chunk("content", "Therefore the answer ");
    tap->on_body({b.data(), b.size()}, {t, t, t + 1});
    parsers::hot_lines l;
    tap->add_hot_lines(l);
    most = std::max(most, l.size());
  }
  EXPECT_GE(most, 10u);  // the chain, five hooks, the decoder: they list something
  EXPECT_LE(most + relay_runs, parsers::hot_lines::capacity) << most << " runs";
  tap->on_stream_end(stream_outcome::ok, t);
}

// The decoder is fed a read before the hooks see it: a read's tokens reach the hooks first.  A
// built-in hook that keeps reads (shaped_reads) gets a read that was one chat chunk shaped like
// the last one through on_shaped_body, with where the chunk lies in it — exactly, and only then;
// every other hook gets every read through on_body.
TEST(HookChain, HooksSeeAReadAfterItsTokensAndShapedReadsGoToTheHooksThatTakeThem) {
  struct observing : hook, shaped_reads {
    explicit observing(unsigned) {}
    void on_token(const token_event& e) override { tokens.emplace_back(e.text); }
    void on_body(std::string_view, const body_times&) override {
      tokens_before.push_back(tokens.size());
      shaped.push_back(false);
    }
    void on_shaped_body(std::string_view bytes, const body_times&,
                        const parsers::read_shape& s) override {
      tokens_before.push_back(tokens.size());
      shaped.push_back(true);
      ASSERT_LE(s.doc_at + s.doc_size, bytes.size());
      const auto doc = bytes.substr(s.doc_at, s.doc_size);
      const auto suffix = s.shape.size() - s.prefix;
      EXPECT_EQ(doc.substr(0, s.prefix), s.shape.substr(0, s.prefix));
      EXPECT_EQ(doc.substr(doc.size() - suffix), s.shape.substr(s.prefix));
    }
    std::vector<std::string> tokens;
    std::vector<std::size_t> tokens_before;
    std::vector<bool> shaped;
  };
  struct plain : hook {
    void on_body(std::string_view bytes, const body_times&) override { reads.emplace_back(bytes); }
    std::vector<std::string> reads;
  };
  auto made = std::make_shared<keeping_factory<observing>>(0);
  auto other = std::make_shared<plain_factory<plain>>();
  config::config cfg;
  hook_chain_factory f(cfg, {made, other});
  auto tap = f.create();
  tap->on_request(request(0));
  tap->on_response_head({200, "text/event-stream", "", 1, {}});
  const std::vector<std::string> reads = {chunk("content", "a"), chunk("content", "b"),
                                          chunk("content", "c") + chunk("content", "d"),
                                          "data: [DONE]\n\n"};
  mono_ns t = ms;
  for (const auto& r : reads) {
    tap->on_body({r.data(), r.size()}, {t, t, t + 1});
    t += ms;
  }
  tap->on_stream_end(stream_outcome::ok, t);
  const auto& h = *made->made;
  EXPECT_EQ(h.tokens, (std::vector<std::string>{"a", "b", "c", "d"}));
  EXPECT_EQ(h.tokens_before, (std::vector<std::size_t>{1, 2, 4, 4}));
  EXPECT_EQ(h.shaped, (std::vector<bool>{true, true, false, false}));
  EXPECT_EQ(other->made->reads, reads);
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
