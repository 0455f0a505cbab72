// The request phase as hooks/hook.hpp defines it, run by the chain: a stop answers locally and
// the hooks after it are not asked; upstream headers and route keys add up in order; fields the
// proxy owns and malformed ones are refused; only hooks that say so rewrite the body; an unclear
// or failing hook lets the request go on.
#include "hooks/hook.hpp"

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>

#include "hooks/hook_chain.hpp"
#include "test/hooks/chain_helpers.hpp"

namespace tokentap::hooks {
namespace {

using namespace chain_test;

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

}  // namespace
}  // namespace tokentap::hooks
