#pragma once
// A plain HTTP/1.1 server on 127.0.0.1:0 whose answer the test changes while it runs: the status,
// the body (made per request, so a count can grow between reads) and a delay before the answer.
// One connection at a time, closed after its answer — what the proxy's probes, scrapes and
// exports open.  A request body is read by its Content-Length.
#include <sys/socket.h>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/streambuf.hpp>
#include <boost/asio/write.hpp>

#include <atomic>
#include <cctype>
#include <chrono>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace tokentap::test {

class scripted_http {
 public:
  scripted_http() : acceptor_(ioc_, {boost::asio::ip::make_address("127.0.0.1"), 0}) {
    thread_ = std::thread([this] { serve(); });
  }
  ~scripted_http() {
    stop_ = true;
    ::shutdown(acceptor_.native_handle(), SHUT_RDWR);  // ends the blocking accept
    thread_.join();
  }
  scripted_http(const scripted_http&) = delete;
  scripted_http& operator=(const scripted_http&) = delete;

  std::uint16_t port() const { return acceptor_.local_endpoint().port(); }
  std::string url(const std::string& base_path = "") const {
    return "http://127.0.0.1:" + std::to_string(port()) + base_path;
  }

  std::atomic<unsigned> status{200};
  std::atomic<int> delay_ms{0};
  std::atomic<int> retry_after_s{-1};  ///< sent as Retry-After when >= 0
  /// Sets what each answer's body is made from.
  void body(std::function<std::string()> make) {
    std::lock_guard lk(mu_);
    make_body_ = std::move(make);
  }
  /// The head of every request so far (request line and fields, without the blank line).
  std::vector<std::string> heads() {
    std::lock_guard lk(mu_);
    return heads_;
  }
  std::vector<std::string> bodies() {
    std::lock_guard lk(mu_);
    return bodies_;
  }

 private:
  static std::size_t content_length(const std::string& head) {
    std::string lower(head);
    for (auto& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    const auto at = lower.find("\r\ncontent-length:");
    return at == std::string::npos ? 0 : std::stoul(lower.substr(at + 17));
  }

  void serve() {
    while (!stop_) {
      boost::system::error_code ec;
      auto s = acceptor_.accept(ec);
      if (ec) return;
      boost::asio::streambuf in;
      const auto n = boost::asio::read_until(s, in, "\r\n\r\n", ec);
      if (ec) continue;
      std::string head(boost::asio::buffers_begin(in.data()),
                       boost::asio::buffers_begin(in.data()) + static_cast<long>(n) - 4);
      in.consume(n);
      std::string request_body(boost::asio::buffers_begin(in.data()),
                               boost::asio::buffers_end(in.data()));
      if (const auto length = content_length(head); length > request_body.size()) {
        std::string rest(length - request_body.size(), '\0');
        boost::asio::read(s, boost::asio::buffer(rest), ec);
        request_body += rest;
      }
      std::string text;
      {
        std::lock_guard lk(mu_);
        heads_.push_back(std::move(head));
        bodies_.push_back(std::move(request_body));
        text = make_body_ ? make_body_() : "{}";
      }
      if (const int d = delay_ms.load()) std::this_thread::sleep_for(std::chrono::milliseconds(d));
      const auto answer =
          "HTTP/1.1 " + std::to_string(status.load()) +
          " X\r\nContent-Type: text/plain\r\nContent-Length: " + std::to_string(text.size()) +
          "\r\nConnection: close\r\n" +
          (retry_after_s >= 0 ? "Retry-After: " + std::to_string(retry_after_s.load()) + "\r\n"
                              : std::string()) +
          "\r\n" + text;
      boost::asio::write(s, boost::asio::buffer(answer), ec);
    }
  }

  boost::asio::io_context ioc_;
  boost::asio::ip::tcp::acceptor acceptor_;
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::function<std::string()> make_body_;  // (mu_)
  std::vector<std::string> heads_;          // (mu_)
  std::vector<std::string> bodies_;         // (mu_)
  std::thread thread_;
};

/// Polls `done` every 10 ms for up to `limit`; its last answer.
template <class Done>
bool eventually(Done done, std::chrono::milliseconds limit = std::chrono::seconds(5)) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() > until) return done();
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

}  // namespace tokentap::test
