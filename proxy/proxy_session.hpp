#pragma once
// One downstream (client) connection of the proxy.
#include "net/net.hpp"
#include "net/server_runtime.hpp"

namespace tokentap::proxy {

struct proxy_shared;

/// Starts serving an accepted client connection on its worker's thread.
void start_proxy_session(tcp_socket socket, net::worker& w, proxy_shared& shared);

}  // namespace tokentap::proxy
