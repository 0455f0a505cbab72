#pragma once
// A small blocking HTTP/1.1 client for tests: real sockets, explicit control over framing, and a
// record of when each piece of the body arrived.
#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/ip/tcp.hpp>
#include <boost/system/error_code.hpp>

namespace tokentap::test {

using tcp = boost::asio::ip::tcp;

struct response {
  unsigned status = 0;
  std::map<std::string, std::string> headers;  ///< names lower-cased
  std::string body;                            ///< de-chunked payload
  bool complete = false;                       ///< the message ended cleanly
  boost::system::error_code error;             ///< why it did not, if it did not
  double head_ms = 0;                          ///< request sent -> head received
  double total_ms = 0;
  std::vector<double> chunk_ms;        ///< arrival time of each body read
  std::vector<std::size_t> chunk_end;  ///< body bytes received once that read was in
  std::string header(const std::string& name) const;
};

struct request_options {
  std::string method = "POST";
  std::string target = "/v1/chat/completions";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
  std::chrono::milliseconds timeout{10000};
};

/// A persistent client connection (keep-alive).
class connection {
 public:
  explicit connection(const tcp::endpoint& ep);
  ~connection();
  response request(const request_options& opts);
  /// Sends raw bytes as they are (malformed requests, slowloris, ...).
  void send_raw(const std::string& bytes);
  /// Reads one response after send_raw.
  /// `head`: the response to a HEAD request (no body whatever its Content-Length says).
  response read_response(std::chrono::milliseconds timeout = std::chrono::milliseconds(10000),
                         bool head = false);
  /// Reads whatever arrives until EOF or timeout (raw bytes, no parsing).
  std::string read_raw_until_close(std::chrono::milliseconds timeout);
  tcp::socket& socket() { return socket_; }
  void close();

 private:
  boost::asio::io_context ioc_;
  tcp::socket socket_;
  std::string leftover_;
};

/// One request on a fresh connection.
response fetch(const tcp::endpoint& ep, const request_options& opts);

/// An OpenAI chat body.
std::string chat_body(bool stream, const std::string& content = "hello", bool include_usage = true,
                      const std::string& model = "sim-small");

/// A streamed chat request (`content`) the simulator answers with `tokens` tokens, the first after
/// `ttft_ms`, then one every `itl_ms` (x-sim-* headers), `reasoning_tokens` of them reasoning.
request_options sim_stream(int tokens, int ttft_ms, int itl_ms, const std::string& content,
                           int reasoning_tokens = 0);

/// The payloads of the `data:` lines of an SSE body (a plain split for tests; the proxy frames with
/// parsers/sse_parser).
std::vector<std::string> sse_data(const std::string& body);

/// A port on 127.0.0.1 with nothing listening (bound, then closed).
std::uint16_t closed_port();

/// Milliseconds on the monotonic clock.
double now_ms();

}  // namespace tokentap::test
