// A fault per event applies to bodies made of events: server-sent events and NDJSON, however
// their content type is spelled; other bodies go through untouched.
#include "proxy/faults.hpp"

#include <gtest/gtest.h>

namespace tokentap::proxy {
namespace {

TEST(EventPacer, OnlyEventStreamsArePaced) {
  asio::io_context ioc;
  fault_choice f;
  f.kind = fault_kind::event_delay;
  f.value = 5;
  // One line: an event in NDJSON, not yet one in server-sent events (a blank line ends those).
  constexpr std::string_view line = "{\"a\":1}\n";
  for (const auto* ct : {"text/event-stream", "Text/Event-Stream; charset=utf-8"}) {
    const auto p = pacer_for(ct, ioc.get_executor(), f);
    ASSERT_NE(p, nullptr) << ct;
    EXPECT_EQ(p->bounds.next_end(line), parsers::event_bounds::npos) << ct;
    EXPECT_EQ(p->fault.value, 5u);
  }
  for (const auto* ct : {"application/x-ndjson", "application/jsonl"}) {
    const auto p = pacer_for(ct, ioc.get_executor(), f);
    ASSERT_NE(p, nullptr) << ct;
    EXPECT_EQ(p->bounds.next_end(line), line.size()) << ct;
  }
  for (const auto* ct : {"application/json", "text/plain", "", "text/event"})
    EXPECT_EQ(pacer_for(ct, ioc.get_executor(), f), nullptr) << ct;
}

}  // namespace
}  // namespace tokentap::proxy
