#pragma once
// An upstream that answers each request target with a canned response: its events sent as
// chunks of their own, `gap` apart, over a real socket on 127.0.0.1:0.  For streams no server
// here writes (other providers' key orders, several choices).
#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace tokentap::test {

struct canned_response {
  std::string content_type = "text/event-stream";
  std::vector<std::string> events;  ///< each one chunk, sent `gap` after the one before
  std::chrono::milliseconds gap{0};
  unsigned status = 200;  ///< sent with its usual reason phrase
};

class canned_upstream {
 public:
  /// Responses by request target (the path, query included); other targets get a 404.
  explicit canned_upstream(std::map<std::string, canned_response> responses);
  ~canned_upstream();
  canned_upstream(const canned_upstream&) = delete;
  canned_upstream& operator=(const canned_upstream&) = delete;

  std::uint16_t port() const noexcept { return port_; }
  std::atomic<int> requests{0};

  /// A request as it arrived: its head (without the blank line) and body.
  struct request {
    std::string head, body;
  };
  /// Every request so far, in arrival order.
  std::vector<request> received() {
    std::lock_guard lk(mu_);
    return received_;
  }

 private:
  void serve(int fd);
  std::map<std::string, canned_response> responses_;
  int listen_fd_ = -1;
  std::uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread acceptor_;
  std::mutex mu_;
  std::vector<std::thread> connections_;
  std::vector<request> received_;  // (mu_)
};

/// The `key=HOST:PORT` endpoint of the binary's `ready …` line ("" when absent).
std::string ready_endpoint(const std::string& line, const std::string& key);

}  // namespace tokentap::test
