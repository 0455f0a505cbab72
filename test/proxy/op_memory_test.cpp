// op_memory: one operation's block inside its owner, the heap for anything else — and Asio
// really allocates a handler's operation from the handler's op_allocator.
#include "proxy/op_memory.hpp"

#include <gtest/gtest.h>

#include <cstdint>

#include <boost/asio/post.hpp>

#include "proxy/net.hpp"

namespace tokentap::proxy {
namespace {

bool inside(const void* p, const op_memory& m) {
  const auto* b = reinterpret_cast<const unsigned char*>(&m);
  const auto* q = static_cast<const unsigned char*>(p);
  return q >= b && q < b + sizeof m;
}

TEST(OpMemory, OneBlockAtATimeTheHeapForTheRestAndForLargerRequests) {
  op_memory m;
  void* a = m.allocate(64);
  EXPECT_TRUE(inside(a, m));
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(a) % alignof(std::max_align_t), 0u);
  void* b = m.allocate(64);  // the block is taken: the heap
  EXPECT_FALSE(inside(b, m));
  m.deallocate(b);
  m.deallocate(a);
  void* big = m.allocate(op_memory::capacity + 1);  // too large for the block
  EXPECT_FALSE(inside(big, m));
  void* again = m.allocate(op_memory::capacity);  // the block is free again
  EXPECT_EQ(again, a);
  m.deallocate(big);
  m.deallocate(again);
}

// A posted handler naming the allocator: its operation lives in the block while it is pending,
// and the block is free again when the handler runs (Asio frees before it calls).
struct noted_call {
  using allocator_type = op_allocator<void>;
  allocator_type get_allocator() const noexcept { return allocator_type(mem); }
  void operator()() const {
    // The block is free again: this allocation gets it.
    void* p = mem->allocate(8);
    *in_block_when_run = inside(p, *mem);
    mem->deallocate(p);
  }
  op_memory* mem;
  bool* in_block_when_run;
};

TEST(OpMemory, AsioAllocatesTheHandlersOperationInTheBlock) {
  net::io_context ioc(1);
  op_memory m;
  bool in_block = false;
  net::post(ioc.get_executor(), noted_call{&m, &in_block});
  // Pending: the block is the operation's, so another request goes to the heap.
  void* p = m.allocate(8);
  EXPECT_FALSE(inside(p, m));
  m.deallocate(p);
  ioc.run();
  EXPECT_TRUE(in_block);
}

}  // namespace
}  // namespace tokentap::proxy
