// The attempts of one exchange over its upstream's endpoints, on real clusters: a failed attempt
// moves to an endpoint not tried yet, its head written for that endpoint; the upstream's
// `retries` bound the moves; an upstream with none left hands over to its fallback; every
// endpoint out, a client gone or a response begun ends them; the retry budget is held while the
// exchange lasts and given back when it ends; each attempt's outcome reaches outlier detection
// and the endpoint's response counts.
#include "proxy/attempts.hpp"

#include <gtest/gtest.h>

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "hooks/observe/metrics.hpp"
#include "proxy/exchange.hpp"
#include "test/proxy/upstreams.hpp"
#include "test/support/metrics_text.hpp"

namespace tokentap::proxy {
namespace {

using test::upstream_of;

http::request_header<> chat_request() {
  http::request_header<> h;
  h.method(http::verb::post);
  h.target("/v1/chat/completions");
  h.version(11);
  h.set(http::field::host, "proxy.local");
  h.set(http::field::content_type, "application/json");
  return h;
}

// An exchange on `c`'s first pick, its attempts begun.
struct started {
  started(cluster& c, hooks::metrics_registry* metrics = nullptr) {
    ex.upstream_cluster = &c;
    ex.upstream_endpoint = c.pick({});
    ex.in_flight.reset(ex.upstream_endpoint);
    ex.tries.begin(ex, c, chat_request(), 42, "10.1.2.3", true, metrics);
  }
  // Fails the attempt under way for `why` and moves on, if the attempts allow.
  bool fail(retry_reason why = retry_reason::connect, bool client_there = true) {
    ex.tries.outcome(ex, *ex.upstream_cluster, *ex.upstream_endpoint, true, to_string(why));
    return ex.tries.fail_over(ex, why, client_there);
  }
  exchange ex;
};

std::string host_of(const std::string& head) {
  const auto at = head.find("\r\nHost: ");
  if (at == std::string::npos) return {};
  const auto from = at + 8;
  return head.substr(from, head.find("\r\n", from) - from);
}

TEST(Attempts, AFailedAttemptMovesToAnEndpointNotTriedWithItsHeadWrittenForIt) {
  const auto up = upstream_of("fleet", {"http://a:1/v1", "http://b:2/v2", "http://c:3"}, 2);
  cluster c(up, 0, nullptr);
  started s(c);
  EXPECT_EQ(s.ex.tries.made(), 1u);
  std::set<const endpoint*> seen{s.ex.upstream_endpoint};
  EXPECT_EQ(host_of(s.ex.request_head), s.ex.upstream_endpoint->host_header);
  EXPECT_NE(s.ex.request_head.find("Content-Length: 42\r\n"), std::string::npos);
  EXPECT_NE(s.ex.request_head.find("X-Forwarded-For: 10.1.2.3\r\n"), std::string::npos)
      << s.ex.request_head;
  for (int moves = 1; moves <= 2; ++moves) {
    ASSERT_TRUE(s.fail(retry_reason::reset)) << moves;
    EXPECT_EQ(s.ex.tries.made(), 1u + moves);
    EXPECT_TRUE(seen.insert(s.ex.upstream_endpoint).second) << "an endpoint tried again";
    // The head names the new endpoint: its Host, its base path before the target.
    const auto& e = *s.ex.upstream_endpoint;
    EXPECT_EQ(host_of(s.ex.request_head), e.host_header);
    EXPECT_TRUE(s.ex.request_head.starts_with("POST " + e.target.base_path +
                                              "/v1/chat/completions HTTP/1.1\r\n"))
        << s.ex.request_head;
    EXPECT_EQ(e.active.load(), 1u) << "the exchange is counted on the endpoint it is on";
  }
  EXPECT_EQ(c.retries(retry_reason::reset), 2u);
  // Every endpoint out: no move.
  EXPECT_FALSE(s.fail());
  for (const auto& e : c.endpoints()) EXPECT_EQ(e->consecutive_failures.load(), 1u) << e->label;
}

TEST(Attempts, TheUpstreamsRetriesBoundTheMoves) {
  for (unsigned retries : {0u, 1u, 3u}) {
    const auto up =
        upstream_of("fleet", {"http://a", "http://b", "http://c", "http://d", "http://e"}, retries);
    cluster c(up, 0, nullptr);
    started s(c);
    unsigned moves = 0;
    while (s.fail()) ++moves;
    EXPECT_EQ(moves, retries);
    EXPECT_EQ(s.ex.tries.made(), 1u + retries);
  }
}

TEST(Attempts, WithNoEndpointLeftTheFallbackTakesTheRequest) {
  const auto main_up = upstream_of("main", {"http://a"}, 2);
  const auto spare_up = upstream_of("spare", {"http://s1", "http://s2"}, 0);
  cluster primary(main_up, 0, nullptr), spare(spare_up, 1, nullptr);
  primary.set_fallback(&spare);
  started s(primary);
  ASSERT_TRUE(s.fail(retry_reason::status_503));
  EXPECT_EQ(s.ex.upstream_cluster, &spare);
  EXPECT_EQ(s.ex.decision.reason, routing_reason::fallback);
  EXPECT_EQ(primary.decisions(routing_reason::fallback), 1u);
  EXPECT_EQ(primary.retries(retry_reason::status_503), 1u);
  EXPECT_EQ(host_of(s.ex.request_head), s.ex.upstream_endpoint->host_header);
  // The primary's retries still bound the moves (the fallback's own are 0), within the spare.
  ASSERT_TRUE(s.fail(retry_reason::timeout));
  EXPECT_EQ(s.ex.upstream_cluster, &spare);
  EXPECT_EQ(spare.retries(retry_reason::timeout), 1u);
  EXPECT_FALSE(s.fail());  // 1 + 2 attempts made
}

TEST(Attempts, AClientGoneOrAResponseBegunEndsThem) {
  const auto up = upstream_of("fleet", {"http://a", "http://b"}, 1);
  cluster c(up, 0, nullptr);
  {
    started s(c);
    EXPECT_FALSE(s.fail(retry_reason::reset, false));
  }
  {
    started s(c);
    s.ex.response_started = true;
    EXPECT_FALSE(s.fail());
  }
  {
    started s(c);
    s.ex.tries.end();
    EXPECT_FALSE(s.fail()) << "attempts that ended move no more";
  }
  EXPECT_EQ(c.retries(retry_reason::reset) + c.retries(retry_reason::connect), 0u);
}

// The retry budget: at least three retries in flight per upstream (more with more exchanges in
// flight); an exchange holds its retries until its attempts end.
TEST(Attempts, RetriesAreHeldInTheBudgetUntilTheAttemptsEnd) {
  const auto up = upstream_of("fleet", {"http://a", "http://b"}, 1);
  cluster c(up, 0, nullptr);
  std::vector<std::unique_ptr<started>> held;
  for (std::uint32_t i = 0; i < cluster::min_retries_in_flight; ++i) {
    held.push_back(std::make_unique<started>(c));
    EXPECT_TRUE(held.back()->fail()) << i;
  }
  started over(c);
  EXPECT_FALSE(over.fail()) << "past the budget";
  held.front()->ex.tries.end();
  started again(c);
  EXPECT_TRUE(again.fail()) << "a retry given back makes room";
  held.pop_back();  // an exchange that ends gives its retry back too
  started more(c);
  EXPECT_TRUE(more.fail());
}

TEST(Attempts, OutcomesReachOutlierDetectionAndTheEndpointsResponseCounts) {
  auto up = upstream_of("fleet", {"http://a:1", "http://b:2"}, 0);
  up.outlier.consecutive_failures = 2;
  up.outlier.max_ejected_percent = 50;
  cluster c(up, 0, nullptr);
  config::config cfg;
  hooks::metrics_registry metrics(cfg);
  started s(c, &metrics);
  auto& e = *s.ex.upstream_endpoint;
  s.ex.tries.outcome(s.ex, c, e, true, "status_503", 503);
  EXPECT_EQ(e.consecutive_failures.load(), 1u);
  s.ex.tries.outcome(s.ex, c, e, false, {}, 200);  // a head that is no gateway failure
  EXPECT_EQ(e.consecutive_failures.load(), 0u);
  s.ex.tries.outcome(s.ex, c, e, true, "reset");
  s.ex.tries.outcome(s.ex, c, e, true, "reset");
  EXPECT_EQ(c.ejections(e), 1u);
  const auto m = test::parse_metrics(metrics.prometheus_text());
  for (const char* code : {"503", "200"})
    EXPECT_EQ(test::metric_sum(m, "tokentap_upstream_endpoint_requests_total",
                               {{"upstream", "fleet"}, {"endpoint", e.label}, {"code", code}}),
              1)
        << code;
  EXPECT_EQ(test::metric_sum(m, "tokentap_upstream_endpoint_requests_total"), 2)
      << "no count without a head";
}

}  // namespace
}  // namespace tokentap::proxy
