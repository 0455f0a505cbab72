#pragma once
// Heap allocations made by the calling thread (test/support/alloc_count.cpp replaces the global
// operator new of the test binary it is linked into to count them — except in sanitizer builds,
// whose runtime owns operator new and checks that each block is freed the way it was allocated).
#include <cstdint>

namespace tokentap::test {

/// Whether this build counts allocations (false under AddressSanitizer).
bool allocations_counted() noexcept;

/// operator new calls (all forms) made by this thread so far (0 when not counted).
std::uint64_t thread_allocations() noexcept;

/// Bytes this thread allocated with operator new less those it freed with operator delete
/// (usable sizes; 0 when not counted).  A block freed by another thread counts there.
std::int64_t thread_live_bytes() noexcept;

}  // namespace tokentap::test
