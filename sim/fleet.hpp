#pragma once
// A fleet of simulator replicas (`tokentap sim --replicas N`, the demo): N servers on consecutive
// ports (each on an ephemeral port when the first is 0), each with its own prefix cache, as N
// engine replicas behind one load balancer.  A replica can be taken down (its connections cut,
// its port closed, its cache lost) and brought back on the same port.
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "sim/sim_server.hpp"

namespace tokentap::sim {

class fleet {
 public:
  /// Starts `replicas` servers like `opts`; throws (after stopping those started) when one
  /// cannot bind.
  fleet(server_options opts, unsigned replicas);
  ~fleet();

  std::size_t size() const noexcept { return ports_.size(); }
  std::uint16_t port(std::size_t i) const noexcept { return ports_[i]; }
  /// Requests replica i has read since it last came up (0 while it is down).
  std::uint64_t requests(std::size_t i);

  /// Replica i stops at once: its streams are cut, its port refuses connections.
  void take_down(std::size_t i);
  /// Replica i serves again on its port, with an empty cache.  False if the port cannot be bound.
  bool bring_up(std::size_t i);
  bool up(std::size_t i);

  void shutdown(std::chrono::milliseconds grace);
  /// Waits for every replica up to stop (after shutdown(), which may come from another thread).
  /// Not while take_down() or bring_up() may run.
  void join();

 private:
  server_options opts_;
  std::vector<std::uint16_t> ports_;
  std::mutex mu_;
  std::vector<std::unique_ptr<server>> servers_;  // nullptr: down
};

}  // namespace tokentap::sim
