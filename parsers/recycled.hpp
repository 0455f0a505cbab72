#pragma once
// Per-thread reuse of one class's memory.  A stream's decoder, step taggers, hook chain and trace
// hook are made at every request and freed at its end; they are 64-byte aligned (their hot
// members start a cache line), and glibc's `memalign` carves such a block out of a larger one
// (~500 instructions a call, ~1.8 k for the chain; callgrind, 2026-12-03).  A block freed here
// goes on its thread's list and the next stream's object reuses it, still in cache.
//
//   struct alignas(64) impl : recycled<impl> { ... };
//
// Only blocks of T's own size and alignment are kept (a derived class's go to the allocator as
// usual).  Bounded: a thread keeps at most 64 blocks and 64 KiB of one class; the rest are freed
// at once.  A block freed on another thread joins that thread's list.  Under AddressSanitizer
// nothing is kept, so use-after-free of these objects is still caught.
#include <algorithm>
#include <cstddef>
#include <new>

namespace tokentap::parsers {

template <class T>
class recycled {
 public:
  static void* operator new(std::size_t n, std::align_val_t a) {
    if (n == sizeof(T) && a == std::align_val_t{alignof(T)})
      if (void* p = pool().pop()) return p;
    return ::operator new(n, a);
  }
  static void operator delete(void* p, std::size_t n, std::align_val_t a) noexcept {
    if (n == sizeof(T) && a == std::align_val_t{alignof(T)} && pool().push(p)) return;
    ::operator delete(p, a);
  }

 private:
  static constexpr std::size_t keep() noexcept {
#if defined(__SANITIZE_ADDRESS__)
    return 0;
#else
    return std::clamp<std::size_t>((64u << 10) / sizeof(T), 1, 64);
#endif
  }
  struct node {
    node* next;
  };
  struct list {
    node* top = nullptr;
    std::size_t count = 0;
    void* pop() noexcept {
      node* n = top;
      if (n == nullptr) return nullptr;
      top = n->next;
      --count;
      return n;
    }
    bool push(void* p) noexcept {
      if (count >= keep()) return false;
      top = ::new (p) node{top};
      ++count;
      return true;
    }
    ~list() {
      while (top != nullptr) ::operator delete (pop(), std::align_val_t{alignof(T)});
      count = keep();  // a late free on this exiting thread goes straight to the allocator
    }
  };
  static list& pool() noexcept {
    thread_local list l;
    return l;
  }
};

}  // namespace tokentap::parsers
