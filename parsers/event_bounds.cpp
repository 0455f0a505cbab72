#include "parsers/event_bounds.hpp"

namespace tokentap::parsers {

std::size_t event_bounds::next_end(std::string_view bytes) noexcept {
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    const char c = bytes[i];
    if (after_cr_) {
      after_cr_ = false;
      if (c == '\n') continue;  // CRLF: ended with the CR
    }
    if (c != '\r' && c != '\n') {
      if (!in_line_) {
        in_line_ = true;
        line_comment_ = framing_ == framing::sse && c == ':';
      }
      continue;
    }
    after_cr_ = c == '\r';
    // A line ends here.  Its end is also the event's: for NDJSON a non-empty line, for SSE an
    // empty line after a block with a field.
    const bool empty_line = !in_line_;
    if (in_line_ && !line_comment_) has_field_ = true;
    in_line_ = false;
    const bool ends = framing_ == framing::ndjson ? !empty_line : empty_line && has_field_;
    if (framing_ == framing::sse && empty_line) has_field_ = false;  // (a comment-only block too)
    if (!ends) continue;
    has_field_ = false;
    ++events_;
    // A CRLF whose LF is here too goes with its event.
    std::size_t n = i + 1;
    if (after_cr_ && n < bytes.size() && bytes[n] == '\n') {
      after_cr_ = false;
      ++n;
    }
    return n;
  }
  return npos;
}

}  // namespace tokentap::parsers
