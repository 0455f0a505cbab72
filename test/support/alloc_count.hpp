#pragma once
// Heap allocations made by the calling thread (test/support/alloc_count.cpp replaces the global
// operator new of the test binary it is linked into to count them).
#include <cstdint>

namespace tokentap::test {

/// operator new calls (all forms) made by this thread so far.
std::uint64_t thread_allocations() noexcept;

}  // namespace tokentap::test
