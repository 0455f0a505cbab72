#pragma once
// `tokentap replay serve`: an upstream that answers each request with a recorded response —
// status, headers and body byte for byte, each recorded read sent at its recorded offset (/ speed).
#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "net/server_runtime.hpp"
#include "replay/trace_reader.hpp"

namespace tokentap::replay {

enum class match_mode { body, sequence };

struct serve_options {
  std::string host = "127.0.0.1";
  std::uint16_t port = 8090;
  unsigned threads = 1;
  double speed = 1.0;
  match_mode match = match_mode::body;
};

/// How a recorded response ended, which `replay serve` reproduces after its recorded bytes.
enum class recorded_end {
  complete,   ///< the whole response: a terminal chunk (ok, stream_error, a 4xx/5xx answer)
  cut,        ///< the stream stopped short: the connection closes (FIN) without a terminal chunk
  reset,      ///< the upstream connection broke: an RST without a terminal chunk
  stall,      ///< nothing more until the recorded end of the exchange, then cut
  no_answer,  ///< the upstream never answered (the proxy made the error): close before any byte
};

/// The end a record's outcome stands for.  A proxy-made answer (no upstream head recorded) to an
/// unreachable or silent upstream is no answer at all, after the recorded wait for a timeout.
recorded_end end_of(const record& r) noexcept;

/// Hash identifying a request: method, path (secrets redacted as in traces) and body.
std::uint64_t request_hash(std::string_view method, std::string_view redacted_path,
                           std::string_view body);

class replay_server {
 public:
  replay_server(std::vector<record> records, serve_options opts);
  ~replay_server();
  void start();
  tcp::endpoint endpoint() const { return endpoint_; }
  void shutdown(std::chrono::milliseconds grace = std::chrono::milliseconds(2000));
  void join();

  /// The record to answer with, or nullptr (then `hash` names what was looked for).
  const record* match(std::string_view method, std::string_view target, std::string_view body,
                      std::uint64_t& hash);
  std::uint64_t served() const noexcept { return served_.load(); }

 private:
  std::vector<record> records_;
  serve_options opts_;
  std::mutex mu_;
  std::unordered_map<std::uint64_t, std::vector<std::size_t>> by_hash_;  // recorded order
  std::unordered_map<std::uint64_t, std::size_t> next_;                  // per hash, cycling
  std::size_t sequence_ = 0;
  std::atomic<std::uint64_t> served_{0};
  net::server_runtime runtime_;
  tcp::endpoint endpoint_;
};

}  // namespace tokentap::replay
