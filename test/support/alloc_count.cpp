// The test binary's global operator new and delete: malloc and free as usual, each allocation
// counted for the thread that made it (thread_allocations()), its usable size added to that
// thread's live bytes and taken off those of the thread that frees it (thread_live_bytes()).  The
// array and nothrow forms forward to these (libstdc++'s own definitions do).
//
// Not in sanitizer builds: AddressSanitizer's runtime defines every form of operator new and
// delete, and replacing only some of them pairs its blocks with our free() (or ours with its
// delete) — an alloc-dealloc mismatch it reports; replacing all of them would lose its checks
// (new/free and sized-delete mismatches) for everything the integration tests run.  Counting
// tests skip there; the Release run counts.
#include "test/support/alloc_count.hpp"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define TOKENTAP_COUNT_ALLOCATIONS 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define TOKENTAP_COUNT_ALLOCATIONS 0
#endif
#endif
#ifndef TOKENTAP_COUNT_ALLOCATIONS
#define TOKENTAP_COUNT_ALLOCATIONS 1
#endif

#include <malloc.h>

#include <cstddef>
#include <cstdlib>
#include <new>

namespace tokentap::test {
namespace {
thread_local std::uint64_t allocations = 0;
thread_local std::int64_t live = 0;  // bytes allocated by this thread less those it freed

[[maybe_unused]] void* counted(std::size_t n, std::size_t align) {
  ++allocations;
  if (n == 0) n = 1;
  void* p = align <= alignof(std::max_align_t)
                ? std::malloc(n)
                : std::aligned_alloc(align, (n + align - 1) / align * align);
  if (p == nullptr) throw std::bad_alloc();
  live += static_cast<std::int64_t>(malloc_usable_size(p));
  return p;
}

[[maybe_unused]] void release(void* p) noexcept {
  if (p != nullptr) live -= static_cast<std::int64_t>(malloc_usable_size(p));
  std::free(p);
}
}  // namespace

bool allocations_counted() noexcept {
  return TOKENTAP_COUNT_ALLOCATIONS != 0;
}

std::uint64_t thread_allocations() noexcept {
  return allocations;
}

std::int64_t thread_live_bytes() noexcept {
  return live;
}

}  // namespace tokentap::test

#if TOKENTAP_COUNT_ALLOCATIONS
void* operator new(std::size_t n) {
  return tokentap::test::counted(n, 0);
}
void* operator new(std::size_t n, std::align_val_t a) {
  return tokentap::test::counted(n, static_cast<std::size_t>(a));
}
void operator delete(void* p) noexcept {
  tokentap::test::release(p);
}
void operator delete(void* p, std::size_t) noexcept {
  tokentap::test::release(p);
}
void operator delete(void* p, std::align_val_t) noexcept {
  tokentap::test::release(p);
}
void operator delete(void* p, std::size_t, std::align_val_t) noexcept {
  tokentap::test::release(p);
}
#endif
