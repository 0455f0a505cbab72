// Reading a client's requests on Beast's test streams: the same request at every read size,
// pipelined requests, 100-continue, the size limits, and a failure injected at every operation.
#include "proxy/request_reader.hpp"

#include <gtest/gtest.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/beast/_experimental/test/stream.hpp>

#include <optional>
#include <string>
#include <vector>

namespace tokentap::proxy {
namespace {

namespace http = beast::http;
using test_stream = beast::test::stream;
using request = http::request<http::string_body>;

const std::string chat_body =
    R"({"model":"m","stream":true,"messages":[{"role":"user","content":"hello there"}]})";

std::string chat_request(std::string_view extra_fields = "") {
  return "POST /v1/chat/completions HTTP/1.1\r\nHost: up\r\nContent-Type: application/json\r\n" +
         std::string(extra_fields) + "Content-Length: " + std::to_string(chat_body.size()) +
         "\r\n\r\n" + chat_body;
}

// What one call of await_request + read_request gave.
struct read_result {
  bool started = false;  // a first byte came (await_request)
  bool read = false;     // a whole request (read_request)
  error_code ec;
  request req;
};

// Reads `count` requests off `s` as the session does (one buffer for the connection).
std::vector<read_result> read_requests(asio::io_context& ioc, test_stream& s, int count,
                                       const config::limits_config& limits = {}) {
  std::vector<read_result> out;
  config::timeouts_config timeouts;
  asio::co_spawn(
      ioc,
      [&]() -> awaitable<void> {
        beast::flat_buffer buf;
        for (int i = 0; i < count; ++i) {
          auto& r = out.emplace_back();
          r.started = co_await await_request(s, buf, std::chrono::seconds(1));
          if (!r.started) co_return;
          r.read = co_await read_request(s, buf, timeouts, limits, r.req, r.ec);
          if (!r.read) co_return;
        }
      },
      asio::detached);
  ioc.run();
  return out;
}

TEST(RequestReader, ARequestReadsTheSameAtEveryReadSize) {
  const auto wire = chat_request("Authorization: Bearer sk-x\r\n");
  for (std::size_t rs = 1; rs <= wire.size(); ++rs) {
    SCOPED_TRACE("read_size " + std::to_string(rs));
    asio::io_context ioc;
    test_stream s(ioc, wire);
    s.read_size(rs);
    const auto got = read_requests(ioc, s, 1);
    ASSERT_EQ(got.size(), 1u);
    ASSERT_TRUE(got[0].read) << got[0].ec.message();
    EXPECT_EQ(got[0].req.method(), http::verb::post);
    EXPECT_EQ(got[0].req.target(), "/v1/chat/completions");
    EXPECT_EQ(got[0].req[http::field::authorization], "Bearer sk-x");
    EXPECT_EQ(got[0].req.body(), chat_body);
  }
}

TEST(RequestReader, PipelinedRequestsAreReadOneAfterTheOtherFromTheSameBuffer) {
  const auto wire = chat_request() + "GET /v1/models HTTP/1.1\r\nHost: up\r\n\r\n" + chat_request();
  for (std::size_t rs : {1u, 7u, 64u, 4096u}) {
    SCOPED_TRACE("read_size " + std::to_string(rs));
    asio::io_context ioc;
    test_stream s(ioc, wire);
    s.read_size(rs);
    s.close_remote();
    const auto got = read_requests(ioc, s, 4);
    ASSERT_EQ(got.size(), 4u);
    EXPECT_TRUE(got[0].read && got[1].read && got[2].read);
    EXPECT_EQ(got[0].req.body(), chat_body);
    EXPECT_EQ(got[1].req.method(), http::verb::get);
    EXPECT_EQ(got[1].req.target(), "/v1/models");
    EXPECT_EQ(got[2].req.body(), chat_body);
    // Then the client closed: no request, nothing to answer.
    EXPECT_FALSE(got[3].started);
    EXPECT_FALSE(got[3].ec);
  }
}

TEST(RequestReader, AClientThatWaitsForContinueGetsItThenItsBodyIsRead) {
  asio::io_context ioc;
  test_stream s(ioc), client(ioc);
  s.connect(client);
  const auto wire = chat_request("Expect: 100-continue\r\n");
  const auto head = wire.substr(0, wire.size() - chat_body.size());
  // The head now; the body only once the 100 Continue was seen.
  asio::write(client, asio::buffer(head));
  std::string seen;
  asio::co_spawn(
      ioc,
      [&]() -> awaitable<void> {
        char b[64];
        error_code ec;
        const auto n = co_await client.async_read_some(asio::buffer(b), use_ec(ec));
        seen.assign(b, n);
        co_await asio::async_write(client, asio::buffer(chat_body), use_ec(ec));
      },
      asio::detached);
  const auto got = read_requests(ioc, s, 1);
  ASSERT_EQ(got.size(), 1u);
  ASSERT_TRUE(got[0].read) << got[0].ec.message();
  EXPECT_EQ(got[0].req.body(), chat_body);
  EXPECT_EQ(seen, "HTTP/1.1 100 Continue\r\n\r\n");
}

TEST(RequestReader, AnOversizedHeadOrBodyIsAnErrorToAnswer) {
  config::limits_config limits;
  limits.max_request_header_bytes = 256;
  limits.max_request_body_bytes = chat_body.size() - 1;
  {
    asio::io_context ioc;
    test_stream s(ioc, chat_request("X-Big: " + std::string(300, 'a') + "\r\n"));
    s.read_size(10);
    const auto got = read_requests(ioc, s, 1, limits);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_FALSE(got[0].read);
    EXPECT_EQ(got[0].ec, http::error::header_limit);
  }
  {
    asio::io_context ioc;
    test_stream s(ioc, chat_request());
    const auto got = read_requests(ioc, s, 1, limits);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_FALSE(got[0].read);
    EXPECT_EQ(got[0].ec, http::error::body_limit);
  }
}

TEST(RequestReader, AMalformedRequestIsAnErrorToAnswer) {
  asio::io_context ioc;
  test_stream s(ioc, "POST /v1/chat HTTP/1.1\r\nContent-Length: 12x\r\n\r\n");
  const auto got = read_requests(ioc, s, 1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_FALSE(got[0].read);
  EXPECT_TRUE(got[0].ec);
}

TEST(RequestReader, AClientThatLeavesMidRequestIsAnErrorNotARequest) {
  const auto wire = chat_request();
  for (std::size_t cut : {std::size_t{10}, wire.size() - chat_body.size() - 2, wire.size() - 1}) {
    asio::io_context ioc;
    test_stream s(ioc, wire.substr(0, cut));
    s.read_size(3);
    s.close_remote();
    const auto got = read_requests(ioc, s, 1);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_TRUE(got[0].started);
    EXPECT_FALSE(got[0].read);
    EXPECT_TRUE(got[0].ec);
  }
}

TEST(RequestReader, AFailureAtAnyReadIsReportedNeverAPartialRequest) {
  const auto wire = chat_request();
  constexpr std::size_t read_size = 16;
  const auto reads = (wire.size() + read_size - 1) / read_size;
  for (std::size_t n = 1; n <= reads; ++n) {
    SCOPED_TRACE("failing read " + std::to_string(n));
    asio::io_context ioc;
    beast::test::fail_count fails(n);
    test_stream s(ioc, fails, wire);
    s.read_size(read_size);
    const auto got = read_requests(ioc, s, 1);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_FALSE(got[0].read);
    if (n == 1) {
      EXPECT_FALSE(got[0].started);  // before any byte: the connection is simply done
    } else {
      EXPECT_TRUE(got[0].started);
      EXPECT_EQ(got[0].ec, beast::test::error::test_failure);
    }
  }
}

}  // namespace
}  // namespace tokentap::proxy
