#pragma once
// Incremental text/event-stream framing, exactly per WHATWG HTML §9.2.5–9.2.6.
//
// Fed the bytes of each upstream read as they arrive, it emits complete events to a handler.
// The result is identical for any split of the input (a CR at the end of one read and the LF at
// the start of the next are one line end; a BOM or a field name may be split anywhere).
//
// Pure: no I/O, no Boost, no exceptions.  Bounded: an event larger than `max_event_bytes` is
// skipped (counted, reported once) and the stream keeps flowing.
//
// What it implements, line by line of the spec:
//  - line ends: CRLF, lone LF, lone CR (U+2028 / U+0085 are data, not line ends);
//  - one leading UTF-8 BOM at stream start is stripped, a second one is part of the field name;
//  - `:` lines are comments; a line without `:` is a field name with an empty value;
//  - exactly one U+0020 after the colon is removed; later colons stay in the value;
//  - `data` lines are joined with LF, the final LF removed; a block whose data buffer is empty
//    is not dispatched; field names are case-sensitive;
//  - `id` containing NUL is ignored, the last event id persists across events;
//  - `retry` is taken only when it is all ASCII digits;
//  - at end of stream an unfinished event is discarded.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace tokentap::parsers {

/// One dispatched event.  Views are valid only during the handler call.
struct sse_event {
  std::string_view type;  ///< the `event` field; empty means the default type ("message")
  std::string_view data;  ///< `data` lines joined with LF
  std::string_view id;    ///< last event id (persists across events)
  std::int64_t t_ns = 0;  ///< timestamp of the read that completed the event
};

/// Receives events.  Called synchronously from feed(); must not call back into the parser.
class sse_handler {
 public:
  virtual ~sse_handler() = default;
  virtual void on_event(const sse_event& e) noexcept = 0;
  /// An event grew past max_event_bytes and was skipped (reported once per event).
  virtual void on_oversize(std::size_t max_event_bytes, std::int64_t t_ns) noexcept {}
  /// A field the spec ignores (e.g. llama.cpp's legacy `error:` line).  Views valid during the
  /// call.
  virtual void on_unknown_field(std::string_view field, std::string_view value,
                                std::int64_t t_ns) noexcept {}
};

class sse_parser {
 public:
  explicit sse_parser(std::size_t max_event_bytes = 1u << 20) : max_event_bytes_(max_event_bytes) {}

  /// Consumes all of `bytes` (one upstream read, at `t_ns`), dispatching every event they
  /// complete.  (A string_view rather than a span so that a literal never brings its NUL.)
  void feed(std::string_view bytes, std::int64_t t_ns, sse_handler& h);

  /// End of stream.  Per spec the unfinished event (if any) is discarded; returns whether there
  /// was one (a stream cut mid-event).  The parser is then ready for a new stream.
  bool finish();

  /// Reconnection time from the last valid `retry` field, or -1.
  std::int64_t retry_ms() const noexcept { return retry_ms_; }
  std::uint64_t events() const noexcept { return events_; }
  std::uint64_t oversized() const noexcept { return oversized_; }
  std::size_t max_event_bytes() const noexcept { return max_event_bytes_; }
  /// The end of what an event inside one read touches (the object's first bytes, up to 64):
  /// a stream's owner lists [this, hot_end()) in its hot_lines.
  const void* hot_end() const noexcept { return &line_; }

 private:
  void process_line(std::string_view line, std::int64_t t_ns, sse_handler& h);
  void dispatch(std::int64_t t_ns, sse_handler& h);
  void feed_lines(const char* p, const char* end, std::int64_t t_ns, sse_handler& h);
  void start_skip(std::int64_t t_ns, sse_handler& h);
  void keep_pending_data();
  void clear_type();
  std::size_t data_size() const noexcept {
    return (spilled_ ? data_.size() : 0) + (data_pending_ ? pending_.size() + 1 : 0);
  }
  std::size_t line_size() const noexcept { return spilled_ ? line_.size() : 0; }

  // What an event inside one read touches comes first, in one cache line (with hundreds of
  // open streams each further line of a stream's state is a miss per event): the strings
  // below are read only when the flags say they may hold something.
  std::size_t max_event_bytes_;
  // The common event — one `data` line, then the blank line, both in the same read — is handed
  // out as a view of the input, never copied: `pending_` is that line's value while
  // `data_pending_`.  It is copied into data_ only if the read ends first or a second data line
  // follows.
  std::string_view pending_;
  std::uint64_t events_ = 0;
  bool data_pending_ = false;
  bool spilled_ = false;  // line_ or data_ may hold bytes (false: both are empty)
  bool typed_ = false;    // type_ may hold bytes (false: it is empty)
  bool has_id_ = false;   // id_ may hold bytes (false: it is empty)
  bool bom_done_ = false;
  bool after_cr_ = false;             // the previous read ended with CR: a leading LF is its pair
  bool skipping_ = false;             // inside an oversized event: ignore until the blank line
  bool in_event_ = false;             // a field or comment of an unfinished event was seen
  bool skip_line_has_bytes_ = false;  // while skipping: the current line is not blank
  std::uint8_t bom_matched_ = 0;      // bytes of a leading BOM seen so far

  std::string line_;  // a line split across reads (the scan cursor is implicit: only the
                      // unfinished tail is kept, bytes are never scanned twice)
  std::string data_;
  std::string type_;
  std::string id_;
  std::int64_t retry_ms_ = -1;
  std::uint64_t oversized_ = 0;
};

/// Newline-delimited JSON framing (Ollama): one value per line, `\r\n` tolerated, blank lines
/// skipped, oversized lines skipped and counted.  A last line without a newline is emitted by
/// finish().
class ndjson_handler {
 public:
  virtual ~ndjson_handler() = default;
  virtual void on_line(std::string_view line, std::int64_t t_ns) noexcept = 0;
  virtual void on_oversize(std::size_t max_line_bytes, std::int64_t t_ns) noexcept {}
};

class ndjson_framer {
 public:
  explicit ndjson_framer(std::size_t max_line_bytes = 1u << 20) : max_line_bytes_(max_line_bytes) {}
  void feed(std::string_view bytes, std::int64_t t_ns, ndjson_handler& h);
  /// Emits a final unterminated line, if any.
  void finish(std::int64_t t_ns, ndjson_handler& h);
  std::uint64_t oversized() const noexcept { return oversized_; }

 private:
  void emit(std::string_view line, std::int64_t t_ns, ndjson_handler& h);
  std::size_t max_line_bytes_;
  std::string line_;
  bool skipping_ = false;
  std::uint64_t oversized_ = 0;
};

}  // namespace tokentap::parsers
