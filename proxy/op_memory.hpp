#pragma once
// Memory for an object's one pending asynchronous operation.
#include <cstddef>
#include <new>

namespace tokentap::proxy {

// Asio allocates every operation (a read, a write, a posted call) from its handler's associated
// allocator; by default from a one-block cache per thread, so an operation started while another
// completed one still holds that block — each of a burst's deferred relay steps (deferred_taps
// runs 16 in a row), or a read started while a write is pending — goes to malloc, and its block
// is freed again when it completes.  An object with at most one operation pending at a time (the
// relay op) keeps that operation's memory itself: no heap traffic per event, and the block lies
// next to the state the completion touches anyway.  A larger request, or a second one while the
// block is in use, falls back to the heap — correct, only slower (the relay test counts
// allocations, so a block grown too small for an operation shows there).
class op_memory {
 public:
  static constexpr std::size_t capacity = 320;

  op_memory() = default;
  op_memory(const op_memory&) = delete;
  op_memory& operator=(const op_memory&) = delete;

  void* allocate(std::size_t n) {
    if (!in_use_ && n <= capacity) {
      in_use_ = true;
      return block_;
    }
    return ::operator new(n);
  }

  void deallocate(void* p) noexcept {
    if (p == static_cast<void*>(block_)) {
      in_use_ = false;
      return;
    }
    ::operator delete(p);
  }

 private:
  alignas(std::max_align_t) unsigned char block_[capacity];
  bool in_use_ = false;
};

// The allocator a handler names as its associated allocator (`allocator_type get_allocator()`).
template <class T>
class op_allocator {
 public:
  using value_type = T;

  explicit op_allocator(op_memory* m) noexcept : m_(m) {}
  template <class U>
  op_allocator(const op_allocator<U>& o) noexcept : m_(o.memory()) {}  // NOLINT: rebinding

  T* allocate(std::size_t n) {
    static_assert(alignof(T) <= alignof(std::max_align_t), "the block is max_align_t aligned");
    return static_cast<T*>(m_->allocate(n * sizeof(T)));
  }
  void deallocate(T* p, std::size_t) noexcept { m_->deallocate(p); }

  op_memory* memory() const noexcept { return m_; }

  template <class U>
  bool operator==(const op_allocator<U>& o) const noexcept {
    return m_ == o.memory();
  }

 private:
  op_memory* m_;
};

}  // namespace tokentap::proxy
