#include "proxy/http_util.hpp"

#include <gtest/gtest.h>

#include <boost/beast/core/buffers_range.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/serializer.hpp>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "net/http_rules.hpp"

namespace tokentap::proxy {
namespace {

// The fields of a head as (name, value) pairs, in order.
std::vector<std::pair<std::string, std::string>> fields_of(std::string_view head) {
  std::vector<std::pair<std::string, std::string>> out;
  for_each_head_field(
      head, [&](std::string_view name, std::string_view value) { out.emplace_back(name, value); });
  return out;
}

TEST(HttpUtil, EndToEndDropsHopByHopAndConnectionNamedFields) {
  http::fields src;
  src.set("Connection", "keep-alive, X-Hop");
  src.set("Keep-Alive", "timeout=5");
  src.set("X-Hop", "1");
  src.set("TE", "trailers");
  src.set("Transfer-Encoding", "chunked");
  src.set("Proxy-Authorization", "Basic abc");
  src.set("Upgrade", "websocket");
  src.set("Authorization", "Bearer sk-x");
  src.set("Content-Type", "application/json");
  src.set("Host", "client.example");
  std::string out = "START\r\n";
  append_end_to_end(out, src, {"host"});
  out += "\r\n";
  const std::vector<std::pair<std::string, std::string>> want = {
      {"Authorization", "Bearer sk-x"}, {"Content-Type", "application/json"}};
  EXPECT_EQ(fields_of(out), want) << out;
  EXPECT_EQ(out, "START\r\nAuthorization: Bearer sk-x\r\nContent-Type: application/json\r\n\r\n");
}

TEST(HttpUtil, HeadFieldsComeBackAsTheyWereWritten) {
  std::string head = "GET / HTTP/1.1\r\n";
  append_field(head, "X-Empty", "");
  append_field(head, "X-Colon", "a: b: c");
  append_field(head, "Host", "h");
  head += "\r\n";
  const std::vector<std::pair<std::string, std::string>> want = {
      {"X-Empty", ""}, {"X-Colon", "a: b: c"}, {"Host", "h"}};
  EXPECT_EQ(fields_of(head), want);
  EXPECT_TRUE(fields_of("GET / HTTP/1.1\r\n\r\n").empty());
  EXPECT_TRUE(fields_of("").empty());
}

// What Beast's own serializer writes for the head of a message with these start line and fields.
template <bool IsRequest>
std::string beast_head(const http::header<IsRequest>& h) {
  http::message<IsRequest, http::empty_body> m(h);
  http::serializer<IsRequest, http::empty_body> sr{m};
  sr.split(true);
  std::string out;
  boost::beast::error_code ec;
  while (!sr.is_header_done()) {
    sr.next(ec, [&](boost::beast::error_code&, const auto& buffers) {
      for (const auto b : boost::beast::buffers_range_ref(buffers))
        out.append(static_cast<const char*>(b.data()), b.size());
      sr.consume(boost::beast::buffer_bytes(buffers));
    });
    if (ec) ADD_FAILURE() << ec.message();
  }
  return out;
}

// The oracle for the request head: a Beast message built from the client's request
// (its end-to-end fields copied, then Host, X-Forwarded-For, X-Forwarded-Proto, Accept-Encoding,
// Content-Length set), written by Beast.  `kept` lists the client's fields that survive, in order.
std::string old_upstream_head(const http::request_header<>& client,
                              const std::vector<std::pair<std::string, std::string>>& kept,
                              const forwarded_request& f) {
  http::request<http::empty_body> out;
  out.method_string(client.method_string());
  out.version(11);
  out.target(std::string(f.base_path) + std::string(client.target()));
  for (const auto& [name, value] : kept) out.insert(name, value);
  out.set(http::field::host, f.host);
  const auto xff = client["X-Forwarded-For"];
  out.set("X-Forwarded-For",
          xff.empty() ? std::string(f.peer) : std::string(xff) + ", " + std::string(f.peer));
  if (client.find("x-forwarded-proto") == client.end()) out.set("X-Forwarded-Proto", "http");
  if (f.identity_encoding)
    out.set(http::field::accept_encoding, "identity");
  else if (auto ae = client[http::field::accept_encoding]; !ae.empty())
    out.set(http::field::accept_encoding, ae);
  if (f.content_length) out.content_length(*f.content_length);
  out.keep_alive(true);
  return beast_head<true>(out);
}

TEST(HttpUtil, UpstreamRequestHeadIsTheOneBeastWroteForTheBuiltMessage) {
  http::request_header<> client;
  client.method(http::verb::post);
  client.target("/v1/chat/completions?key=1");
  client.version(10);
  client.set(http::field::host, "proxy.example");
  client.set("Connection", "keep-alive, X-Hop");
  client.insert("X-Hop", "gone");
  client.insert("Keep-Alive", "timeout=5");
  client.insert("Authorization", "Bearer sk-x");
  client.insert("x-dup", "one");
  client.insert("X-Dup", "two");
  client.insert("X-Empty", "");
  client.insert("Expect", "100-continue");
  client.insert("Content-Length", "17");
  client.insert("TE", "trailers");
  client.insert("Accept-Encoding", "gzip");
  client.insert("Content-Type", "application/json");
  client.insert("X-Long", std::string(3000, 'v'));
  const std::vector<std::pair<std::string, std::string>> kept = {
      {"Authorization", "Bearer sk-x"},
      {"x-dup", "one"},
      {"X-Dup", "two"},
      {"X-Empty", ""},
      {"Content-Type", "application/json"},
      {"X-Long", std::string(3000, 'v')}};
  for (const bool identity : {true, false}) {
    for (const std::optional<std::size_t> length :
         {std::optional<std::size_t>(17), std::optional<std::size_t>(0),
          std::optional<std::size_t>()}) {
      for (const char* xff : {"", "10.0.0.1, 10.0.0.2"}) {
        for (const char* proto : {"", "https"}) {
          http::request_header<> c = client;
          // Known and unknown methods (kept as given), odd targets.
          c.method_string(proto[0] ? "FROBNICATE" : identity ? "POST" : "purge");
          c.target(xff[0] ? "/x?key=1&a=%20b" : length ? "/v1/chat/completions" : "*");
          if (*xff) c.set("X-Forwarded-For", xff);
          if (*proto) c.set("X-Forwarded-Proto", proto);
          auto k = kept;
          if (*proto) k.emplace_back("X-Forwarded-Proto", proto);
          const forwarded_request f{"/base", "upstream.example:8000", "127.0.0.9", identity,
                                    length};
          std::string ours = "kept";
          append_upstream_request_head(ours, c, f);
          EXPECT_EQ(ours, "kept" + old_upstream_head(c, k, f))
              << identity << " " << length.value_or(99) << " '" << xff << "' '" << proto << "'";
        }
      }
    }
  }
  // A GET without fields or body, the upstream without a base path.
  http::request_header<> bare;
  bare.method(http::verb::get);
  bare.target("/v1/models");
  std::string ours;
  append_upstream_request_head(ours, bare, {"", "h:1", "::1", true, std::nullopt});
  EXPECT_EQ(ours,
            "GET /v1/models HTTP/1.1\r\nHost: h:1\r\nX-Forwarded-For: ::1\r\n"
            "X-Forwarded-Proto: http\r\nAccept-Encoding: identity\r\n\r\n");
}

// The oracle for the response head, built the same way: the upstream's
// status and surviving fields (`kept`), then its own, written by Beast.
std::string old_client_head(const http::response_header<>& up,
                            const std::vector<std::pair<std::string, std::string>>& kept,
                            unsigned version, std::optional<std::uint64_t> length, bool chunked,
                            bool keep_alive) {
  http::response<http::empty_body> res;
  res.result(up.result_int());
  res.reason(up.reason());
  res.version(version);
  for (const auto& [name, value] : kept) res.insert(name, value);
  if (net::is_streaming_content_type(up[http::field::content_type]))
    res.set("X-Accel-Buffering", "no");
  if (length)
    res.content_length(*length);
  else if (chunked)
    res.chunked(true);
  res.keep_alive(keep_alive);
  return beast_head<false>(res);
}

// An upstream's response head with hop-by-hop, framing, duplicate and a 3,000-byte field.
http::response_header<> upstream_head(unsigned code, std::string_view type,
                                      std::string_view reason) {
  http::response_header<> up;
  up.result(code);
  up.reason(reason);
  up.set("Connection", "keep-alive, X-Hop");
  up.insert("X-Hop", "gone");
  up.insert("Transfer-Encoding", "chunked");
  up.insert("Content-Type", type);
  up.insert("X-Accel-Buffering", "yes");
  up.insert("Content-Length", "42");
  up.insert("x-request-id", "r1");
  up.insert("Set-Cookie", "a=1");
  up.insert("Set-Cookie", "b=2");
  up.insert("X-Long", std::string(3000, 'v'));
  return up;
}

// Its fields the proxy forwards, in order.  The proxy's own X-Accel-Buffering replaces the
// upstream's on a stream (Beast's set() moved it last).
std::vector<std::pair<std::string, std::string>> kept_response_fields(std::string_view type) {
  std::vector<std::pair<std::string, std::string>> kept = {{"Content-Type", std::string(type)}};
  if (type != "text/event-stream") kept.emplace_back("X-Accel-Buffering", "yes");
  kept.insert(kept.end(), {{"x-request-id", "r1"},
                           {"Set-Cookie", "a=1"},
                           {"Set-Cookie", "b=2"},
                           {"X-Long", std::string(3000, 'v')}});
  return kept;
}

TEST(HttpUtil, ClientResponseHeadIsTheOneBeastWroteForTheBuiltMessage) {
  struct framing {
    std::optional<std::uint64_t> length;
    bool chunked;  // never with a length
  };
  const framing framings[] = {{42, false}, {std::nullopt, false}, {std::nullopt, true}};
  const unsigned codes[] = {200, 101, 204, 299, 404, 429, 503, 599};  // known and unknown
  for (const unsigned code : codes) {
    for (const char* type : {"text/event-stream", "application/json"}) {
      const auto kept = kept_response_fields(type);
      for (const char* reason : {"", "Fine"}) {
        const auto up = upstream_head(code, type, reason);
        for (const unsigned version : {10u, 11u}) {
          for (const auto& [length, chunked] : framings) {
            for (const bool keep_alive : {false, true}) {
              std::string ours = "kept";
              append_client_response_head(ours, up, version, length, chunked, keep_alive);
              EXPECT_EQ(ours,
                        "kept" + old_client_head(up, kept, version, length, chunked, keep_alive))
                  << code << " " << type << " '" << reason << "' " << version << " "
                  << length.value_or(0) << " " << chunked << " " << keep_alive;
            }
          }
        }
      }
    }
  }
  http::response_header<> up;
  up.result(http::status::ok);
  up.set(http::field::content_type, "text/event-stream");
  std::string ours;
  append_client_response_head(ours, up, 11, std::nullopt, true, true);
  EXPECT_EQ(ours,
            "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nX-Accel-Buffering: no\r\n"
            "Transfer-Encoding: chunked\r\n\r\n");
}

struct field {
  std::string name, value;
};

TEST(HttpUtil, AnAnswerOfOurOwnIsTheProvidersErrorShapeWithAHooksFields) {
  const std::vector<field> extra = {{"Retry-After", "3"}, {"Content-Type", "text/plain"}};
  auto res = error_response(429, 11, "rate_limit_error", "slow down", "/v1/messages?key=[redacted]",
                            extra, true);
  EXPECT_EQ(res.result_int(), 429u);
  EXPECT_EQ(res[http::field::retry_after], "3");
  EXPECT_EQ(res[http::field::content_type], "application/json");  // ours, not the hook's
  EXPECT_EQ(res[http::field::cache_control], "no-store");
  EXPECT_EQ(res[http::field::content_length], std::to_string(res.body().size()));
  EXPECT_TRUE(res.keep_alive());
  // The target's path says the provider: Anthropic's error shape here.
  EXPECT_EQ(res.body(), net::error_body(429, "rate_limit_error", "slow down", "/v1/messages"));
  EXPECT_NE(res.body().find(R"("type":"error")"), std::string::npos);

  const auto closing = error_response(502, 10, "bad_gateway", "down", "/v1/chat/completions",
                                      std::vector<field>{}, false);
  EXPECT_EQ(closing.version(), 10u);
  EXPECT_FALSE(closing.keep_alive());
}

TEST(HttpUtil, TheConnectionStaysOnlyWhereTheNextRequestsStartIsKnown) {
  for (unsigned s : {200u, 404u, 429u, 403u}) EXPECT_TRUE(keeps_connection_after(s)) << s;
  for (unsigned s : {400u, 413u, 431u, 500u, 502u, 503u, 504u})
    EXPECT_FALSE(keeps_connection_after(s)) << s;
}

}  // namespace
}  // namespace tokentap::proxy
