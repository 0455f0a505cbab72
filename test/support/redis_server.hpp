#pragma once
// A real redis-server (Debian's) on a free loopback port, for the tests of shared state: no
// persistence, gone with the object.  stop() and start() again keep its port.
#include <sys/types.h>

#include <cstdint>

namespace tokentap::test {

class redis_server {
 public:
  redis_server();  ///< started; fails the test (ADD_FAILURE) when redis-server cannot start
  ~redis_server();
  redis_server(const redis_server&) = delete;
  redis_server& operator=(const redis_server&) = delete;

  std::uint16_t port() const noexcept { return port_; }
  bool running() const noexcept { return pid_ > 0; }
  void stop();   ///< SIGKILL: as a crash or a network partition looks to its clients
  bool start();  ///< on the same port; true once it accepts connections

 private:
  std::uint16_t port_;
  pid_t pid_ = -1;
};

}  // namespace tokentap::test
