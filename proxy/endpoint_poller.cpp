#include "proxy/endpoint_poller.hpp"

#include "base/log.hpp"
#include "proxy/proxy_server.hpp"

namespace tokentap::proxy {

endpoint_poller::endpoint_poller(net::worker& w, proxy_shared& shared,
                                 std::shared_ptr<const generation> g, cluster& c, endpoint& e)
    : session_base(w, net::listener_role::control),
      cluster_(c),
      endpoint_(e),
      shared_(shared),
      generation_(std::move(g)),
      timer_(w.ioc.get_executor()) {}

void endpoint_poller::spawn(net::worker& w, std::shared_ptr<endpoint_poller> p, const char* what) {
  asio::co_spawn(w.ioc, run(std::move(p)),
                 [what](std::exception_ptr ex) { net::log_escaped_exception(ex, what); });
}

awaitable<void> endpoint_poller::run(std::shared_ptr<endpoint_poller> self) {
  co_await self->loop();
}

upstream_pool& endpoint_poller::pool() {
  return *shared_.pools[owner().index];
}

void endpoint_poller::stop() noexcept {
  stopped_ = true;
  timer_.cancel();
  if (conn_ != nullptr) {
    error_code ignored;
    conn_->lowest().socket().close(ignored);
  }
}

awaitable<void> endpoint_poller::loop() {
  while (!stopped_) {
    const auto started = clock::now();
    co_await poll();
    if (stopped_) break;
    timer_.expires_at(started + interval());
    error_code ec;
    co_await timer_.async_wait(use_ec(ec));
  }
}

}  // namespace tokentap::proxy
