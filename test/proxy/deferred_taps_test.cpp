// deferred_taps: tap work queued behind a backlog runs in order, a few steps per drain, with the
// handlers queued meanwhile (the reads) going first; steps still queued when the io_context goes
// away are released, not run.
#include "proxy/deferred_taps.hpp"

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace tokentap::proxy {
namespace {

struct step final : deferred_step {
  step(std::vector<std::string>& log, std::string name, std::function<void()> also = {})
      : log_(log), name_(std::move(name)), also_(std::move(also)) {}
  void run_deferred() override {
    log_.push_back(name_);
    if (also_) also_();
  }
  void discard() noexcept override { log_.push_back("discarded " + name_); }
  std::vector<std::string>& log_;
  std::string name_;
  std::function<void()> also_;
};

TEST(DeferredTaps, RunInOrderAFewPerDrainWithReadsQueuedMeanwhileFirst) {
  asio::io_context ioc(1);
  auto& q = asio::use_service<deferred_taps>(ioc);
  std::vector<std::string> log;
  std::vector<std::unique_ptr<step>> steps;
  for (int i = 0; i < 40; ++i) {
    // The first step's work lets a read complete (the reactor queues it behind the drain).
    auto also =
        i == 0 ? std::function<void()>([&] { asio::post(ioc, [&] { log.push_back("read"); }); })
               : std::function<void()>();
    steps.push_back(std::make_unique<step>(log, std::to_string(i), also));
    q.push(steps.back().get(), ioc.get_executor());
  }
  ioc.run();
  std::vector<std::string> want;
  for (int i = 0; i < 40; ++i) {
    if (i == deferred_taps::per_drain) want.push_back("read");
    want.push_back(std::to_string(i));
  }
  EXPECT_EQ(log, want);
  EXPECT_EQ(q.deferred(), 40u);

  // The queue drained: a new step starts a new drain.
  step late(log, "late");
  q.push(&late, ioc.get_executor());
  ioc.restart();
  ioc.run();
  EXPECT_EQ(log.back(), "late");
}

TEST(DeferredTaps, StepsStillQueuedAtShutdownAreReleasedNotRun) {
  std::vector<std::string> log;
  step a(log, "a"), b(log, "b");
  {
    asio::io_context ioc(1);
    auto& q = asio::use_service<deferred_taps>(ioc);
    q.push(&a, ioc.get_executor());
    q.push(&b, ioc.get_executor());
  }  // never run
  EXPECT_EQ(log, (std::vector<std::string>{"discarded a", "discarded b"}));
}

}  // namespace
}  // namespace tokentap::proxy
