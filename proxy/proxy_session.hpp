#pragma once
// One downstream (client) connection of the proxy.
#include <cstddef>
#include <memory>

#include "net/net.hpp"
#include "net/server_runtime.hpp"

namespace tokentap::proxy {

struct proxy_shared;

/// A session's relay buffer starts small (an SSE event is a few hundred bytes, and an open stream
/// pins its buffer while it waits) and doubles when a read fills it (bulk bodies), up to the
/// maximum: at most relay_buffer_doublings allocations a session once its body streams.
inline constexpr std::size_t relay_buffer_min = 512;
inline constexpr std::size_t relay_buffer_max = 64 * 1024;
inline constexpr unsigned relay_buffer_doublings = [] {
  unsigned n = 0;
  for (std::size_t s = relay_buffer_min; s < relay_buffer_max; s *= 2) ++n;
  return n;
}();

/// Starts serving an accepted client connection on its worker's thread.
void start_proxy_session(tcp_socket socket, net::worker& w, proxy_shared& shared);

}  // namespace tokentap::proxy
