// The test binary's global operator new and delete: malloc and free as usual, each allocation
// counted for the thread that made it (thread_allocations()).  The array, nothrow and sized
// forms that are not replaced here forward to these.
#include "test/support/alloc_count.hpp"

#include <cstddef>
#include <cstdlib>
#include <new>

namespace tokentap::test {
namespace {
thread_local std::uint64_t allocations = 0;

void* counted(std::size_t n, std::size_t align) {
  ++allocations;
  if (n == 0) n = 1;
  void* p = align <= alignof(std::max_align_t)
                ? std::malloc(n)
                : std::aligned_alloc(align, (n + align - 1) / align * align);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}
}  // namespace

std::uint64_t thread_allocations() noexcept {
  return allocations;
}

}  // namespace tokentap::test

void* operator new(std::size_t n) {
  return tokentap::test::counted(n, 0);
}
void* operator new(std::size_t n, std::align_val_t a) {
  return tokentap::test::counted(n, static_cast<std::size_t>(a));
}
void operator delete(void* p) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
  std::free(p);
}
void operator delete(void* p, std::align_val_t) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t, std::align_val_t) noexcept {
  std::free(p);
}
