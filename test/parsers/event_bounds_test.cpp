// Where a streamed body's events end, for faults that act per event: the same ends whether the
// body comes whole, split at every offset, in random pieces or byte by byte.
#include "parsers/event_bounds.hpp"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

namespace tokentap::parsers {
namespace {

using framing = event_bounds::framing;

// The ends of the events in `body` fed as `pieces` (sizes), as offsets into the body.  An end at
// a CR whose LF came in the next piece is moved past the LF: the same event end either way.
std::vector<std::size_t> ends(framing f, const std::string& body,
                              const std::vector<std::size_t>& pieces) {
  event_bounds b(f);
  std::vector<std::size_t> out;
  std::size_t at = 0;
  for (const auto size : pieces) {
    std::string_view piece(body.data() + at, size);
    std::size_t base = at;
    while (!piece.empty()) {
      const auto n = b.next_end(piece);
      if (n == event_bounds::npos) break;
      auto end = base + n;
      if (body[end - 1] == '\r' && end < body.size() && body[end] == '\n') ++end;
      out.push_back(end);
      base += n;
      piece.remove_prefix(n);
    }
    at += size;
  }
  EXPECT_EQ(b.events(), out.size());
  return out;
}

void expect_split_invariant(framing f, const std::string& body, std::vector<std::size_t> want) {
  EXPECT_EQ(ends(f, body, {body.size()}), want) << "whole";
  for (std::size_t cut = 0; cut <= body.size(); ++cut)
    EXPECT_EQ(ends(f, body, {cut, body.size() - cut}), want) << "split at " << cut;
  EXPECT_EQ(ends(f, body, std::vector<std::size_t>(body.size(), 1)), want) << "byte by byte";
  std::mt19937 rng(7);
  for (int round = 0; round < 50; ++round) {
    std::vector<std::size_t> pieces;
    for (std::size_t left = body.size(); left > 0;) {
      const auto n = std::min<std::size_t>(left, 1 + rng() % 9);
      pieces.push_back(n);
      left -= n;
    }
    EXPECT_EQ(ends(f, body, pieces), want) << "random round " << round;
  }
}

TEST(EventBounds, ServerSentEventsEndAtTheirEmptyLineWhateverTheLineEnds) {
  const std::string body =
      "data: a\n\n"              // LF
      "data: b\r\n\r\n"          // CRLF
      "event: x\rdata: c\r\r"    // CR
      ": keep-alive\n\n"         // a comment alone: no event
      "data: d\ndata: e\n\n"     // two lines, one event
      ": note\ndata: f\r\n\r\n"  // a comment in an event
      "data: [DONE]\n\n";
  std::vector<std::size_t> want;
  for (const char* end : {"data: a\n\n", "data: b\r\n\r\n", "data: c\r\r", "data: e\n\n",
                          "data: f\r\n\r\n", "[DONE]\n\n"})
    want.push_back(body.find(end) + std::string(end).size());
  expect_split_invariant(framing::sse, body, want);
}

TEST(EventBounds, NdjsonLinesAreEvents) {
  const std::string body = "{\"a\":1}\n\n{\"b\":2}\r\n{\"c\":3}\n";
  expect_split_invariant(framing::ndjson, body,
                         {body.find("{\"b\"") - 1, body.find("{\"c\""), body.size()});
}

TEST(EventBounds, AnEventStartsAtItsFirstByte) {
  event_bounds b(framing::sse);
  EXPECT_TRUE(b.starts_event('d'));
  EXPECT_EQ(b.next_end("data: x\r\n\r"), 10u);
  EXPECT_FALSE(b.starts_event('\n'));  // the rest of the CRLF
  EXPECT_EQ(b.next_end("\n"), event_bounds::npos);
  EXPECT_TRUE(b.starts_event('d'));
  EXPECT_EQ(b.next_end("da"), event_bounds::npos);
  EXPECT_FALSE(b.starts_event('t'));  // inside an event
}

}  // namespace
}  // namespace tokentap::parsers
