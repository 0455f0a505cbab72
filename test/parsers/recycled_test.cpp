// parsers::recycled: a class's freed blocks are reused on the thread that freed them, within a
// bound; the stream objects that use it (decoder, step tagger) allocate one block fewer when one
// is waiting.
#include "parsers/recycled.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "parsers/step_tagger.hpp"
#include "parsers/stream_decoder.hpp"
#include "test/support/alloc_count.hpp"

namespace tokentap::test {
namespace {

using parsers::recycled;

// One type per test: each type has its own per-thread list, so no test sees another's blocks.
struct alignas(64) reused final : recycled<reused> {
  char bytes[200];
};
struct alignas(64) bounded final : recycled<bounded> {
  char bytes[200];  // 256 bytes with its alignment: 64 kept (64 KiB would be 256)
};
struct alignas(64) large final : recycled<large> {
  char bytes[40000];  // one kept (64 KiB / 40,000 bytes)
};
struct alignas(64) crossing final : recycled<crossing> {
  char bytes[100];
};

#define SKIP_UNLESS_COUNTED()                               \
  if (!allocations_counted())                               \
  GTEST_SKIP() << "nothing is kept under AddressSanitizer " \
                  "(its runtime owns operator new)"

TEST(Recycled, AFreedBlockIsTheNextOneMadeOnItsThread) {
  SKIP_UNLESS_COUNTED();
  auto* a = new reused;
  const void* where = a;
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(a) % 64, 0u);
  delete a;
  const auto before = thread_allocations();
  auto* b = new reused;
  EXPECT_EQ(static_cast<const void*>(b), where);
  EXPECT_EQ(thread_allocations(), before);
  auto* c = new reused;  // the list is empty again: from the heap, aligned
  EXPECT_EQ(thread_allocations(), before + 1);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(c) % 64, 0u);
  delete b;
  delete c;
}

TEST(Recycled, KeepsAtMostSixtyFourBlocksAndSixtyFourKibibytes) {
  SKIP_UNLESS_COUNTED();
  std::vector<std::unique_ptr<bounded>> v;
  for (int i = 0; i < 100; ++i) v.push_back(std::make_unique<bounded>());
  const auto live = thread_live_bytes();
  v.clear();                                                  // 64 kept, 36 freed
  EXPECT_GE(thread_live_bytes(), live - 36 * 256 - 36 * 64);  // (usable sizes are a bit larger)
  const auto before = thread_allocations();
  for (int i = 0; i < 100; ++i) v.push_back(std::make_unique<bounded>());
  EXPECT_EQ(thread_allocations() - before, 36u);
  v.clear();

  std::vector<std::unique_ptr<large>> l;
  for (int i = 0; i < 3; ++i) l.push_back(std::make_unique<large>());
  l.clear();  // one kept
  const auto before_large = thread_allocations();
  for (int i = 0; i < 3; ++i) l.push_back(std::make_unique<large>());
  EXPECT_EQ(thread_allocations() - before_large, 2u);
}

TEST(Recycled, ABlockFreedOnAnotherThreadIsReusedThere) {
  SKIP_UNLESS_COUNTED();
  auto* made_here = new crossing;
  const void* where = made_here;
  std::thread([&] {
    delete made_here;  // onto this thread's list
    const auto before = thread_allocations();
    auto* again = new crossing;
    EXPECT_EQ(static_cast<const void*>(again), where);
    EXPECT_EQ(thread_allocations(), before);
    delete again;
  }).join();  // the thread's list frees what it kept as the thread ends
  const auto before = thread_allocations();
  std::unique_ptr<crossing> here(new crossing);  // this thread's list never had it
  EXPECT_EQ(thread_allocations(), before + 1);
}

// How many allocations making one T takes with its class's list empty, and with one block on it.
template <class Make>
std::pair<std::uint64_t, std::uint64_t> allocations_without_and_with_a_block(Make make) {
  std::vector<decltype(make())> alive;
  for (int i = 0; i < 70; ++i) alive.push_back(make());  // takes whatever the list had
  auto before = thread_allocations();
  alive.push_back(make());
  const auto fresh = thread_allocations() - before;
  alive.pop_back();  // its block goes on the list
  before = thread_allocations();
  alive.push_back(make());
  return {fresh, thread_allocations() - before};
}

TEST(RecycledPerf, StreamDecodersAndStepTaggersReuseTheirState) {
  SKIP_UNLESS_COUNTED();
  const auto [decoder_fresh, decoder_reused] = allocations_without_and_with_a_block([] {
    return std::make_unique<parsers::stream_decoder>(parsers::provider::openai_chat,
                                                     "text/event-stream");
  });
  EXPECT_EQ(decoder_reused + 1, decoder_fresh);
  const auto compiled = parsers::step_tagger::compile(parsers::step_triggers::defaults());
  const auto [tagger_fresh, tagger_reused] = allocations_without_and_with_a_block(
      [&] { return std::make_unique<parsers::step_tagger>(compiled, 100); });
  EXPECT_EQ(tagger_reused + 1, tagger_fresh);
}

}  // namespace
}  // namespace tokentap::test
