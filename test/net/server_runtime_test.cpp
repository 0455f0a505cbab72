// The runtime's teardown after a hard stop: sessions that ignored both the drain and the forced
// close are destroyed with their workers, and the last of them must not reach a worker that is
// already gone (AddressSanitizer saw it: the demo's proxy, stopped with streams in flight).
#include "net/server_runtime.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <memory>

namespace tokentap::net {
namespace {

// A traffic session that keeps a timer pending forever and ignores drain and force_close: only
// the hard stop and its worker's destruction end it.
class stubborn final : public session_base, public std::enable_shared_from_this<stubborn> {
 public:
  explicit stubborn(worker& w) : session_base(w), timer_(w.ioc.get_executor()) {}
  void start() {
    timer_.expires_at(steady_timer::time_point::max());
    timer_.async_wait([self = shared_from_this()](error_code) {});
  }
  void drain() noexcept override {}
  void force_close() noexcept override {}

 private:
  steady_timer timer_;
};

TEST(ServerRuntime, SessionsLeftByAHardStopAreDestroyedWithTheirWorkersSafely) {
  auto rt = std::make_unique<server_runtime>(2);
  rt->start();
  for (unsigned i = 0; i < rt->size(); ++i) {
    std::promise<void> started;
    asio::post(rt->at(i).ioc, [&, i] {
      std::make_shared<stubborn>(rt->at(i))->start();
      started.set_value();
    });
    started.get_future().wait();
  }
  const auto t0 = std::chrono::steady_clock::now();
  rt->shutdown(std::chrono::milliseconds(0));  // the watchdog stops the loops after 2 s
  rt->join();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10));
  rt.reset();  // destroys the sessions worker by worker
}

}  // namespace
}  // namespace tokentap::net
