#include "test/support/http_client.hpp"

#include <sys/socket.h>
#include <sys/time.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>

namespace tokentap::test {

namespace http = boost::beast::http;
namespace asio = boost::asio;

namespace {

void set_timeout(tcp::socket& s, std::chrono::milliseconds t) {
  timeval tv{};
  tv.tv_sec = static_cast<long>(t.count() / 1000);
  tv.tv_usec = static_cast<long>((t.count() % 1000) * 1000);
  ::setsockopt(s.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(s.native_handle(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

}  // namespace

double now_ms() {
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::string response::header(const std::string& name) const {
  auto it = headers.find(name);
  return it == headers.end() ? std::string() : it->second;
}

connection::connection(const tcp::endpoint& ep) : socket_(ioc_) {
  socket_.connect(ep);
  socket_.set_option(tcp::no_delay(true));
}

connection::~connection() {
  close();
}

void connection::close() {
  boost::system::error_code ec;
  socket_.close(ec);
}

void connection::send_raw(const std::string& bytes) {
  boost::system::error_code ec;
  asio::write(socket_, asio::buffer(bytes), ec);
}

response connection::read_response(std::chrono::milliseconds timeout, bool head) {
  set_timeout(socket_, timeout);
  response r;
  const double t0 = now_ms();
  boost::beast::flat_buffer buf;
  if (!leftover_.empty()) {
    auto mb = buf.prepare(leftover_.size());
    std::memcpy(mb.data(), leftover_.data(), leftover_.size());
    buf.commit(leftover_.size());
    leftover_.clear();
  }
  http::response_parser<http::buffer_body> p;
  p.body_limit(std::numeric_limits<std::uint64_t>::max());
  p.skip(head);
  http::read_header(socket_, buf, p, r.error);
  if (r.error) return r;
  r.head_ms = now_ms() - t0;
  r.status = p.get().result_int();
  for (const auto& f : p.get()) {
    std::string name(f.name_string());
    for (auto& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    r.headers[name] = std::string(f.value());
  }
  char chunk[64 * 1024];
  while (!p.is_done()) {
    p.get().body().data = chunk;
    p.get().body().size = sizeof chunk;
    http::read_some(socket_, buf, p, r.error);
    if (r.error == http::error::need_buffer) r.error = {};
    const auto n = sizeof chunk - p.get().body().size;
    if (n) {
      r.body.append(chunk, n);
      r.chunk_ms.push_back(now_ms() - t0);
      r.chunk_end.push_back(r.body.size());
    }
    if (r.error) return r;
  }
  r.complete = true;
  r.total_ms = now_ms() - t0;
  leftover_.assign(static_cast<const char*>(buf.data().data()), buf.size());
  return r;
}

std::string connection::read_raw_until_close(std::chrono::milliseconds timeout) {
  set_timeout(socket_, timeout);
  std::string out;
  char b[16384];
  for (;;) {
    boost::system::error_code ec;
    const auto n = socket_.read_some(asio::buffer(b), ec);
    out.append(b, n);
    if (ec) break;
  }
  return out;
}

response connection::request(const request_options& o) {
  http::request<http::string_body> req{http::string_to_verb(o.method), o.target, 11};
  req.set(http::field::host, "127.0.0.1");
  if (!o.body.empty()) req.set(http::field::content_type, "application/json");
  for (const auto& [k, v] : o.headers) req.set(k, v);
  req.body() = o.body;
  req.prepare_payload();
  set_timeout(socket_, o.timeout);
  response r;
  http::write(socket_, req, r.error);
  if (r.error) return r;
  return read_response(o.timeout, o.method == "HEAD");
}

response fetch(const tcp::endpoint& ep, const request_options& opts) {
  connection c(ep);
  return c.request(opts);
}

std::string chat_body(bool stream, const std::string& content, bool include_usage,
                      const std::string& model) {
  std::string b =
      R"({"model":")" + model + R"(","messages":[{"role":"user","content":")" + content + R"("}])";
  if (stream) b += R"(,"stream":true)";
  if (stream && include_usage) b += R"(,"stream_options":{"include_usage":true})";
  return b + "}";
}

request_options sim_stream(int tokens, int ttft_ms, int itl_ms, const std::string& content,
                           int reasoning_tokens) {
  request_options o;
  o.body = chat_body(true, content);
  o.headers = {{"x-sim-tokens", std::to_string(tokens)},
               {"x-sim-ttft-ms", std::to_string(ttft_ms)},
               {"x-sim-itl-ms", std::to_string(itl_ms)}};
  if (reasoning_tokens > 0)
    o.headers.emplace_back("x-sim-reasoning-tokens", std::to_string(reasoning_tokens));
  return o;
}

std::vector<std::string> sse_data(const std::string& body) {
  std::vector<std::string> out;
  std::size_t pos = 0;
  while (pos < body.size()) {
    auto end = body.find('\n', pos);
    if (end == std::string::npos) end = body.size();
    std::string_view line(body.data() + pos, end - pos);
    if (line.starts_with("data: ")) out.emplace_back(line.substr(6));
    pos = end + 1;
  }
  return out;
}

std::uint16_t closed_port() {
  asio::io_context ioc;
  tcp::acceptor a(ioc, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  const auto port = a.local_endpoint().port();
  a.close();
  return port;
}

}  // namespace tokentap::test
