// What the proxy settles about a request before forwarding it, on a configuration built here:
// the tenant is a hash of the credential (never the credential), a JSON body says the model,
// whether it streams (Ollama's native API unless it says not) and the prompt's size, the taps
// see every secret header redacted, the router falls back when no endpoint of the upstream can
// take the request, and an abort fault answers as its provider would.
#include "proxy/request_plan.hpp"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <tuple>
#include <utility>

#include <boost/beast/http/error.hpp>

#include "base/clock.hpp"
#include "hooks/govern/tenants.hpp"
#include "hooks/observe/metrics.hpp"
#include "proxy/proxy_server.hpp"
#include "proxy/upstream_pool.hpp"
#include "test/proxy/upstreams.hpp"

namespace tokentap::proxy {
namespace {

using test::upstream_of;

// A configuration of one route to "main" (whose fallback is "spare"), and its clusters.
struct plan {
  plan() {
    auto& cfg = gen.cfg;
    cfg.upstreams.push_back(upstream_of("main", {"http://a:1", "http://b:2"}, 1));
    cfg.upstreams.back().fallback = "spare";
    cfg.upstreams.push_back(upstream_of("spare", {"http://s:3"}, 0));
    cfg.routes.push_back({"all", "/", "main", 0});
    gen.clusters.push_back(std::make_unique<cluster>(cfg.upstreams[0], 0, nullptr));
    gen.clusters.push_back(std::make_unique<cluster>(cfg.upstreams[1], 2, nullptr));
    gen.clusters[0]->set_fallback(gen.clusters[1].get());
    shared.credential_salt = 42;
    ex.gen = &gen;
    ex.route = &gen.cfg.routes[0];
  }

  client_request request(std::string target, std::string body,
                         std::string content_type = "application/json") {
    client_request req{http::verb::post, target, 11};
    if (!content_type.empty()) req.set(http::field::content_type, content_type);
    req.body() = std::move(body);
    return req;
  }

  generation gen;
  proxy_shared shared{std::make_shared<hooks::metrics_registry>(config::config{})};
  parsers::request_inspector inspector;
  exchange ex;
};

TEST(RequestPlan, TheTenantIsAHashOfTheCredentialAndNeverTheCredential) {
  plan p;
  auto req = p.request("/v1/chat/completions", "");
  req.set(http::field::authorization, "Bearer sk-secret");
  inspect(req, p.ex, p.inspector, p.shared);
  EXPECT_EQ(p.ex.tenant, hooks::credential_hash("Bearer sk-secret", 42));
  EXPECT_NE(p.ex.tenant, hooks::credential_hash("Bearer sk-secret", 43)) << "salted";

  plan q;
  auto by_key = q.request("/v1/messages", "");
  by_key.set("x-api-key", "sk-ant");
  inspect(by_key, q.ex, q.inspector, q.shared);
  EXPECT_EQ(q.ex.tenant, hooks::credential_hash("sk-ant", 42));

  plan none;
  inspect(none.request("/v1/chat/completions", ""), none.ex, none.inspector, none.shared);
  EXPECT_EQ(none.ex.tenant, 0u);
}

TEST(RequestPlan, AJsonBodySaysTheModelWhetherItStreamsAndItsPrompt) {
  {
    plan p;
    inspect(p.request("/v1/chat/completions", R"({"model":"m1","stream":true,"max_tokens":64,)"
                                              R"("messages":[{"role":"user","content":"hello"}]})"),
            p.ex, p.inspector, p.shared);
    EXPECT_EQ(p.ex.model, "m1");
    EXPECT_TRUE(p.ex.stream_requested);
    EXPECT_EQ(p.ex.max_tokens, 64);
    EXPECT_EQ(p.ex.prompt_chars, 5u);
    EXPECT_TRUE(p.ex.conversation.empty()) << "no hooks, no routing by prefix: not digested";
  }
  {
    plan p;
    p.gen.cfg.upstreams[0].balance = "prefix";  // (its cluster's balancer is the prefix one)
    p.gen.clusters[0] = std::make_unique<cluster>(p.gen.cfg.upstreams[0], 0, nullptr);
    inspect(p.request("/v1/chat/completions",
                      R"({"model":"m1","messages":[{"role":"system","content":"be brief"},)"
                      R"({"role":"user","content":"hello"}]})"),
            p.ex, p.inspector, p.shared);
    EXPECT_EQ(p.ex.conversation.size(), 2u) << "a balancer that routes by prefix needs them";
  }
  // Ollama's native API streams unless the body says it does not; OpenAI's only when it says so.
  for (const auto& [target, body, streams] :
       {std::tuple{"/api/chat", R"({"model":"m","messages":[]})", true},
        std::tuple{"/api/generate?x=1", R"({"model":"m","prompt":"p"})", true},
        std::tuple{"/api/chat", R"({"model":"m","stream":false,"messages":[]})", false},
        std::tuple{"/v1/chat/completions", R"({"model":"m","messages":[]})", false}}) {
    plan p;
    inspect(p.request(target, body), p.ex, p.inspector, p.shared);
    EXPECT_EQ(p.ex.stream_requested, streams) << target << " " << body;
  }
  // A body that is not JSON is forwarded unread.
  plan p;
  inspect(p.request("/v1/chat/completions", R"({"model":"m","stream":true})", "text/plain"), p.ex,
          p.inspector, p.shared);
  EXPECT_EQ(p.ex.model, "");
  EXPECT_FALSE(p.ex.stream_requested);
}

TEST(RequestPlan, TheTapsSeeEverySecretHeaderRedacted) {
  http::fields f;
  f.set(http::field::authorization, "Bearer sk-1");
  f.set("x-api-key", "sk-2");
  f.set(http::field::cookie, "session=3");
  f.set(http::field::content_type, "application/json");
  std::string head = "POST /v1/chat/completions HTTP/1.1\r\n";
  for (const auto& field : f)
    head += std::string(field.name_string()) + ": " + std::string(field.value()) + "\r\n";
  head += "\r\n";
  for (const auto& seen : {redacted_headers(f), redacted_headers(head)}) {
    ASSERT_EQ(seen.size(), 4u);
    for (const auto& h : seen) {
      if (h.name == "Content-Type")
        EXPECT_EQ(h.value, "application/json");
      else
        EXPECT_EQ(h.value, "[redacted]") << h.name;
    }
  }
}

TEST(RequestPlan, TheRouterFallsBackWhenNoEndpointOfTheUpstreamCanTakeTheRequest) {
  plan p;
  ASSERT_TRUE(choose_endpoint(p.ex));
  EXPECT_EQ(p.ex.upstream_cluster, p.gen.clusters[0].get());
  EXPECT_EQ(p.ex.upstream_endpoint->active.load(), 1u) << "in flight while the exchange lasts";

  const auto far = base::mono_now_ns() + 60'000'000'000;
  for (auto& e : p.gen.clusters[0]->endpoints()) e->ejected_until_ns = far;
  exchange next;
  next.gen = &p.gen;
  next.route = p.ex.route;
  ASSERT_TRUE(choose_endpoint(next));
  EXPECT_EQ(next.upstream_cluster, p.gen.clusters[1].get());
  EXPECT_EQ(next.decision.reason, routing_reason::fallback);
  EXPECT_EQ(p.gen.clusters[0]->decisions(routing_reason::fallback), 1u);

  p.gen.clusters[1]->endpoints()[0]->ejected_until_ns = far;
  exchange none;
  none.gen = &p.gen;
  none.route = p.ex.route;
  EXPECT_FALSE(choose_endpoint(none));
  EXPECT_EQ(none.upstream_endpoint, nullptr);
}

TEST(RequestPlan, AnAbortFaultAnswersAsItsProviderWould) {
  config::fault_rule rule;
  rule.name = "outage";
  exchange ex;
  ex.fault.rule = &rule;
  ex.fault.kind = fault_kind::abort;
  for (const auto& [status, type] : {std::pair{429u, "rate_limit_error"},
                                     {503u, "overloaded_error"},
                                     {529u, "overloaded_error"},
                                     {500u, "server_error"},
                                     {400u, "invalid_request_error"}}) {
    ex.fault.value = status;
    const auto d = abort_reply(ex);
    EXPECT_TRUE(d.stop);
    EXPECT_EQ(d.status, status);
    EXPECT_EQ(d.error_type, type);
    EXPECT_EQ(d.error_message, "fault 'outage' injected: " + std::to_string(status));
  }
}

TEST(RequestPlan, ARequestThatCouldNotBeReadIsAnsweredOnlyWhenSomeoneIsThere) {
  config::limits_config limits;
  limits.max_request_header_bytes = 1000;
  limits.max_request_body_bytes = 2000;
  const auto head = unreadable_reply(http::error::header_limit, limits);
  ASSERT_TRUE(head);
  EXPECT_EQ(head->status, 431u);
  EXPECT_EQ(head->error_type, "request_header_too_large");
  EXPECT_EQ(head->error_message, "request head exceeds 1000 bytes");
  const auto body = unreadable_reply(http::error::body_limit, limits);
  ASSERT_TRUE(body);
  EXPECT_EQ(body->status, 413u);
  EXPECT_EQ(body->error_message, "request body exceeds 2000 bytes");
  const auto garbled = unreadable_reply(http::error::bad_method, limits);
  ASSERT_TRUE(garbled);
  EXPECT_EQ(garbled->status, 400u);
  EXPECT_EQ(garbled->error_message,
            "malformed request: " + error_code(http::error::bad_method).message());
  // Nobody to answer, or too slow to deserve it: the connection just closes.
  for (const error_code ec :
       {error_code(asio::error::eof), error_code(asio::error::connection_reset),
        error_code(http::error::end_of_stream), error_code(http::error::partial_message),
        error_code(beast::error::timeout)})
    EXPECT_FALSE(unreadable_reply(ec, limits)) << ec.message();
}

TEST(RequestPlan, TheClientsResponseIsFramedByItsLengthElseChunkedElseByTheClose) {
  http::response<http::buffer_body> up{http::status::ok, 11};
  up.set(http::field::content_type, "text/event-stream");
  up.set(http::field::connection, "close");  // hop-by-hop: the upstream's, never forwarded
  const auto framed = [&](unsigned version, std::optional<std::uint64_t> length, bool no_body,
                          bool draining, bool head_request, bool& keep_alive) {
    exchange ex;
    ex.client_version = version;
    ex.head = head_request;
    ex.client_keep_alive = true;
    std::string out;
    const bool chunked = client_response_head(up, length, no_body, draining, ex, out);
    keep_alive = ex.client_keep_alive;
    EXPECT_TRUE(out.starts_with(version >= 11 ? "HTTP/1.1 200 OK\r\n" : "HTTP/1.0 200 OK\r\n"))
        << out;
    EXPECT_NE(out.find("Content-Type: text/event-stream\r\n"), std::string::npos) << out;
    if (keep_alive) {
      EXPECT_EQ(out.find("Connection: close"), std::string::npos) << out;
    }
    EXPECT_TRUE(out.ends_with("\r\n\r\n"));
    return std::pair{chunked, out};
  };
  bool keep = false;
  // A stream of unknown length: chunked to an HTTP/1.1 client, kept alive.
  auto [chunked, out] = framed(11, std::nullopt, false, false, false, keep);
  EXPECT_TRUE(chunked);
  EXPECT_TRUE(keep);
  EXPECT_NE(out.find("Transfer-Encoding: chunked\r\n"), std::string::npos) << out;
  // Its length known: said, not chunked.
  std::tie(chunked, out) = framed(11, 42, false, false, false, keep);
  EXPECT_FALSE(chunked);
  EXPECT_NE(out.find("Content-Length: 42\r\n"), std::string::npos) << out;
  EXPECT_EQ(out.find("Transfer-Encoding"), std::string::npos) << out;
  // HTTP/1.0 knows no chunks: the body ends at the close.
  std::tie(chunked, out) = framed(10, std::nullopt, false, false, false, keep);
  EXPECT_FALSE(chunked);
  EXPECT_FALSE(keep);
  EXPECT_EQ(out.find("Transfer-Encoding"), std::string::npos) << out;
  // A HEAD answer says the length the body would have; a 204's has none.
  std::tie(chunked, out) = framed(11, 42, true, false, true, keep);
  EXPECT_FALSE(chunked);
  EXPECT_NE(out.find("Content-Length: 42\r\n"), std::string::npos) << out;
  std::tie(chunked, out) = framed(11, std::nullopt, true, false, false, keep);
  EXPECT_FALSE(chunked);
  EXPECT_TRUE(keep);
  EXPECT_EQ(out.find("Content-Length"), std::string::npos) << out;
  // Draining: the answer says the connection closes after it.
  std::tie(chunked, out) = framed(11, 42, false, true, false, keep);
  EXPECT_FALSE(keep);
  EXPECT_NE(out.find("Connection: close\r\n"), std::string::npos) << out;
}

TEST(RequestPlan, LogSafeCopiesArePrintableAndBounded) {
  EXPECT_EQ(log_safe("a b\"c\x01"), "a_b_c_");
  EXPECT_EQ(log_safe(std::string(10, 'x'), 4), "xxxx...");
}

}  // namespace
}  // namespace tokentap::proxy
