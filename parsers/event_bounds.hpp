#pragma once
// Where the events of a streamed body end, in its raw bytes: what a fault that acts per event
// (DESIGN.md §13: a delay before each forwarded event, a cut after N) needs to know before it
// writes them.  Pure and incremental: fed the body's bytes in any pieces, it finds the same
// ends.  Not a decoder — the tap's decoders still see every byte; this only counts.
//
//  - Server-sent events: an event is a block of lines ended by an empty line; lines end with
//    CRLF, LF or CR (WHATWG).  A block of comment lines only (`: keep-alive`) is no event: it
//    dispatches nothing.
//  - NDJSON (Ollama): every non-empty line is an event.
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace tokentap::parsers {

class event_bounds {
 public:
  enum class framing : std::uint8_t { sse, ndjson };

  explicit event_bounds(framing f) noexcept : framing_(f) {}

  /// How many bytes of `bytes` to take up to and including the end of the next event (the
  /// terminator of its empty line; for a CRLF split across pieces, the CR), or `npos` when no
  /// event ends in them.  Consumes what it scanned: call again with the rest.
  static constexpr std::size_t npos = static_cast<std::size_t>(-1);
  std::size_t next_end(std::string_view bytes) noexcept;

  /// Whether `next`, the next byte, begins a new event: nothing of one since the last end, and
  /// not a line end (the LF of a CRLF, or an empty line).
  bool starts_event(char next) const noexcept {
    return !has_field_ && !in_line_ && next != '\r' && next != '\n';
  }
  /// Events ended so far.
  std::uint64_t events() const noexcept { return events_; }

 private:
  framing framing_;
  bool after_cr_ = false;      // the last byte was a CR: an LF now is the same line's end
  bool in_line_ = false;       // a line has begun and not ended
  bool line_comment_ = false;  // it began with ':'
  bool has_field_ = false;     // the event so far has a line that is not a comment
  std::uint64_t events_ = 0;
};

}  // namespace tokentap::parsers
