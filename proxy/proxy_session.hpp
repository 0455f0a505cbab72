#pragma once
// One downstream (client) connection of the proxy.
#include <memory>

#include "proxy/net.hpp"
#include "proxy/server_runtime.hpp"

namespace tokentap::proxy {

struct proxy_shared;

/// Starts serving an accepted client connection on its worker's thread.
void start_proxy_session(tcp_socket socket, worker& w, proxy_shared& shared);

}  // namespace tokentap::proxy
