#pragma once
// Tap work that lets reads go first.
#include <atomic>
#include <cstdint>

#include <boost/asio/post.hpp>

#include "net/net.hpp"

namespace tokentap::proxy {

// A relay step whose tap work waits in its I/O thread's deferred_taps queue.
class deferred_step {
 public:
  virtual void run_deferred() = 0;
  /// The io_context is going away with the step still queued: release it unrun.
  virtual void discard() noexcept = 0;

 protected:
  ~deferred_step() = default;

 private:
  friend class deferred_taps;
  deferred_step* next_deferred_ = nullptr;  // the queue's link (null when not queued)
};

// Tap work that lets reads go first.  Under a burst — hundreds of streams' events ready at once,
// as when an inference server emits one token for every sequence of its batch — Asio runs each
// read's write completion (where the tap runs: the bytes are out by then) before the reactor
// collects the next batch of ready reads, so every event behind the first batch waited for the
// tap work of all events before it (added latency P99 31–34 ms at 1,000 streams in bursts with the
// hooks on, 6 ms with the tap off).  A step whose write completed late (other handlers ran since
// its read: a backlog) queues its tap work here instead; each drain runs a few steps and posts
// itself behind whatever the reactor has queued since.  A queued stream has no read pending (its
// next read follows its tap), so the queue never holds more than one step per stream.  One per
// io_context (an Asio service): its shutdown releases steps still queued.  The queue is linked
// through the steps: queueing allocates nothing.
class deferred_taps final : public asio::execution_context::service {
 public:
  static inline asio::execution_context::id id;
  static constexpr int per_drain = 16;

  explicit deferred_taps(asio::execution_context& ctx) : service(ctx) {}

  void push(deferred_step* step, io_executor ex) {
    // Counted here, on the io_context's own thread: not a cache line shared by the I/O threads
    // at every deferred read.
    deferred_.store(deferred_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    (tail_ != nullptr ? tail_->next_deferred_ : head_) = step;  // its link is null: not queued yet
    tail_ = step;
    if (!posted_) {
      posted_ = true;
      asio::post(ex, drain_call{this, ex});
    }
  }

  /// No step is waiting: the thread is not working off a backlog.
  bool idle() const noexcept { return head_ == nullptr; }

  /// Steps queued so far (readable from any thread).
  std::uint64_t deferred() const noexcept { return deferred_.load(std::memory_order_relaxed); }

  /// Steps queued and not yet begun (readable from any thread; a moment's view).
  std::uint64_t waiting() const noexcept {
    const auto ran = ran_.load(std::memory_order_relaxed);
    const auto queued = deferred_.load(std::memory_order_relaxed);
    return queued > ran ? queued - ran : 0;
  }

  /// A relay step found its thread behind (or could not tell): its write's completion goes
  /// through the executor, where it may be deferred.  Counted on the io_context's own thread.
  void count_behind() noexcept {
    behind_.store(behind_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  }
  /// Steps counted by count_behind() so far (readable from any thread).
  std::uint64_t behind() const noexcept { return behind_.load(std::memory_order_relaxed); }

 private:
  // The posted drain (one is posted at a time).
  struct drain_call {
    void operator()() const { self->drain(ex); }
    deferred_taps* self;
    io_executor ex;
  };

  deferred_step* pop() noexcept {
    auto* step = head_;
    head_ = step->next_deferred_;
    if (head_ == nullptr) tail_ = nullptr;
    step->next_deferred_ = nullptr;
    return step;
  }

  void drain(io_executor ex) {
    for (int i = 0; i < per_drain && head_ != nullptr; ++i) {
      auto* step = pop();
      ran_.store(ran_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
      step->run_deferred();  // may queue steps (its own next one, later) or release itself
    }
    if (head_ == nullptr)
      posted_ = false;
    else
      asio::post(ex, drain_call{this, ex});  // behind the reads queued meanwhile
  }

  // A drain still posted is destroyed unrun by the scheduler's shutdown, after this one.
  void shutdown() override {
    while (head_ != nullptr) pop()->discard();  // popped first: discard releases the step
  }

  deferred_step* head_ = nullptr;  // the queue, oldest first, linked through the steps
  deferred_step* tail_ = nullptr;
  bool posted_ = false;
  std::atomic<std::uint64_t> deferred_{0};
  std::atomic<std::uint64_t> ran_{0};  // steps begun by drain()
  std::atomic<std::uint64_t> behind_{0};
};

}  // namespace tokentap::proxy
