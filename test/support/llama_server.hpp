#pragma once
// llama.cpp's real llama-server (../shared/engines/llama.cpp, CPU, a tiny model) on a free
// loopback port, for the tests that hold tokentap to a real engine.
#include <csignal>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "test/support/process.hpp"

namespace tokentap::test {

class llama_server {
 public:
  /// The engine's folder: ../shared/engines/llama.cpp from the source tree.
  static std::string folder();
  /// Whether the folder is there (a checkout without shared/ skips these tests).
  static bool available();

  /// Started with `extra` arguments (e.g. {"--metrics"}); `ok()` says whether /health answered.
  explicit llama_server(std::vector<std::string> extra = {});
  ~llama_server();
  llama_server(const llama_server&) = delete;
  llama_server& operator=(const llama_server&) = delete;

  bool ok() const noexcept { return ok_; }
  /// The engine's exit status when it exited before answering (-1 while it runs).
  int exit_status() const noexcept { return exit_status_; }
  /// Whether it died of an illegal instruction: a binary built for another CPU than this host's
  /// (llama.cpp builds for the CPU it was built on by default).
  bool built_for_another_cpu() const noexcept { return exit_status_ == 128 + SIGILL; }
  std::uint16_t port() const noexcept { return port_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  /// What it wrote so far (its log is on stderr).
  std::string log();

 private:
  std::uint16_t port_ = 0;
  std::string dir_;
  std::unique_ptr<process> proc_;
  bool ok_ = false;
  int exit_status_ = -1;
};

}  // namespace tokentap::test
