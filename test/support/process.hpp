#pragma once
// Runs the real tokentap binary as a child process, with its stdout and stderr captured.
#include <sys/types.h>

#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include <boost/asio/ip/tcp.hpp>

namespace tokentap::test {

/// Path of the binary under test (set by CMake).
std::string tokentap_binary();

/// Another program than the binary (found on PATH when not a path).
struct program {
  std::string name;
};

class process {
 public:
  /// Starts the binary with `args`, and `env` set over this process's environment.
  explicit process(std::vector<std::string> args,
                   const std::vector<std::pair<std::string, std::string>>& env = {});
  /// Starts `p` with `args` and `env`.
  process(const program& p, std::vector<std::string> args,
          const std::vector<std::pair<std::string, std::string>>& env = {});
  ~process();
  /// Reads stdout lines until one starts with `prefix`; returns it ("" on EOF or timeout).
  std::string wait_for_line(const std::string& prefix, std::chrono::milliseconds timeout);
  /// Sends `sig` (nothing once the child was reaped: its pid may belong to another process).
  void signal(int sig);
  /// Waits for exit; returns the exit status (128 + N for signal N), or -1 on timeout (the child
  /// keeps running; the destructor kills it).  Once exited, returns that status at once.
  int wait(std::chrono::milliseconds timeout);
  /// Everything the child wrote to stdout / stderr so far (after wait: all of it).
  std::string out();
  std::string err();
  pid_t pid() const { return pid_; }

 private:
  void drain(int fd, std::string& into, int timeout_ms);
  pid_t pid_ = -1;
  int out_fd_ = -1, err_fd_ = -1;
  std::string out_, err_;
  std::size_t consumed_ = 0;
  bool exited_ = false;
  int exit_status_ = -1;
};

/// The binary's `proxy` with `args` (e.g. {"--config", FILE}), started and waited for until its
/// `ready` line: where it listens and where its admin port is (port 0 when it did not start;
/// `proc.err()` then says why).
struct proxy_process {
  explicit proxy_process(std::vector<std::string> args);
  process proc;
  boost::asio::ip::tcp::endpoint proxy, admin;
};

/// Runs to completion; returns {exit status, stdout, stderr}.
struct run_result {
  int status;
  std::string out, err;
};
run_result run(std::vector<std::string> args,
               std::chrono::milliseconds timeout = std::chrono::seconds(10));

}  // namespace tokentap::test
