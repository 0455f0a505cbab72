// The chain's private seams with the built-in hooks (hooks/builtin_seams.hpp): where the state of
// a stream's next event lies (the hot lines the relay prefetches), and shaped reads — a read that
// was one chat chunk shaped like the last one, handed to the hooks that keep reads.
#include "hooks/builtin_seams.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>

#include "hooks/export/trace_hook.hpp"
#include "hooks/hook_chain.hpp"
#include "hooks/observe/timing_hook.hpp"
#include "hooks/registry.hpp"
#include "test/hooks/chain_helpers.hpp"
#include "test/support/tls_cert.hpp"

namespace tokentap::hooks {
namespace {

using namespace chain_test;

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

}  // namespace
}  // namespace tokentap::hooks
