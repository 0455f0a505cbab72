#pragma once
// A stream's upstream reads as the trace hook keeps them until the stream ends: each read's time
// and its bytes, unescaped.  The trace writer renders them as the record's `events` on its own
// thread (trace_writer::record).
//
// Written on the I/O thread, one entry per read, and read once on the writer's, seconds later.
// An entry is a 16-byte header (time, tag and length), then the bytes padded to 16.
//
// A read is logged as its difference from the stream's previous one: the bytes both share at
// the start and at the end are counted, not stored.  A streamed response's events differ in a
// few bytes (an OpenAI chunk of ~240 bytes differs from the last one in its token), so a read
// takes ~32 bytes of log instead of ~270: an event writes about one line of log, not five never
// touched before.  The previous read stays in a copy of its own (`ref_`, reused; never the
// stream's first read, so an idle stream holds none) that the next read is compared with; it
// and the log's next line are listed with the stream's hot lines (trace_hook), so they are being
// fetched while the read's system calls run.  Plain stores: with non-temporal ones the next
// locked instruction (Asio's reactor mutex) waited until they reached memory (BENCHMARKS.md).
//
// A read that is one chat chunk shaped like the stream's last one (parsers::read_shape: what the
// decoder compared it with anyway) is logged without comparing at all: its bytes outside the
// shape (the framing around the chunk and the text), with the shape logged once per version.
// At steady state a chat stream's event then reads no kept copy: the shape's bytes are on the
// decoder's hot lines already.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>

#include "parsers/stream_decoder.hpp"

namespace tokentap::hooks {

class event_log {
 public:
  static constexpr std::size_t align = 16;
  /// Bytes one entry takes for a read of n bytes.
  static constexpr std::size_t entry_bytes(std::size_t n) noexcept {
    return align + (n + align - 1) / align * align;
  }

  event_log() = default;
  event_log(event_log&& o) noexcept;
  event_log& operator=(event_log&& o) noexcept;
  event_log(const event_log&) = delete;
  event_log& operator=(const event_log&) = delete;
  ~event_log();

  /// Reads up to this size are kept (copied) to log the next one as its difference; larger
  /// ones are logged whole and leave the kept one as it was.
  static constexpr std::size_t delta_max = 4096;

  /// Appends one read: its time since the request start (µs) and its bytes.
  void append(std::int64_t t_us, std::string_view bytes);
  /// The same for a read that `s` describes (parsers::read_shape, from the decoder that was fed
  /// it): stored as its bytes outside the shape, the shape logged when its version is new.
  /// for_each gives the same bytes as append() would have.
  void append_shaped(std::int64_t t_us, std::string_view bytes, const parsers::read_shape& s);

  /// Appends a text with a tag (1–255), for for_each_text; for_each does not see it.
  void append_text(unsigned tag, std::string_view text) {
    put(0, std::uint64_t{tag & 0xff} << tag_shift, text);
  }

  /// Bytes of entries so far (headers and stored bytes).
  std::size_t stored_bytes() const noexcept;

  /// The kept copy of the last read (what the next append() compares with): the lines the next
  /// read touches, for the stream's hot-line list.  Empty after a shaped read (the next one is
  /// most likely shaped too: append_shaped reads no copy).
  std::string_view last_read() const noexcept {
    return last_shaped_ ? std::string_view() : std::string_view(ref_, ref_n_);
  }
  /// Where the next entry goes (null before the first).
  const char* tail() const noexcept { return w_; }

  /// Drops the kept read, on the thread that appended: call once no more is appended, before
  /// handing the log over.
  void seal() noexcept;

  /// A read as for_each_read gives it: `whole`, or — for a read appended by append_shaped — its
  /// pieces: before + shape[0, shape_prefix) + text + shape[shape_prefix, end) + after.  Every
  /// read of one shape gets the same `shape` view (its data() tells shapes apart within a log),
  /// so a reader can work on the shape once (the trace writer escapes it once, not per read).
  struct read_view {
    bool shaped = false;
    std::string_view whole;                // when not shaped
    std::string_view before, text, after;  // when shaped
    std::string_view shape;                // when shaped: the shape logged last
    std::size_t shape_prefix = 0;
  };

  /// Calls f(t_us, const read_view&) for every read, in order (the views valid during the call).
  template <class F>
  void for_each_read(F&& f) const {
    // ref: the last read of at most delta_max (whenever append logged a difference, it had kept
    // that same read), rebuilt in place from a difference.
    std::string ref;
    read_view r;
    visit([&](std::int64_t t_us, std::uint64_t word, std::string_view stored) {
      if ((word >> tag_shift) != 0) return;  // a text
      const auto pre = static_cast<std::size_t>(word >> pre_shift & field_mask);
      const auto suf = static_cast<std::size_t>(word >> suf_shift & field_mask);
      if ((word & shape_bit) != 0) {  // the shape of the shaped reads after it
        r.shape = stored;
        r.shape_prefix = pre;
        return;
      }
      if ((word & shaped_bit) != 0) {  // before the chunk (pre), the text, after it (suf)
        r.shaped = true;
        r.before = stored.substr(0, pre);
        r.text = stored.substr(pre, stored.size() - pre - suf);
        r.after = stored.substr(stored.size() - suf);
        f(t_us, std::as_const(r));
        return;
      }
      r.shaped = false;
      if ((word & delta_bit) != 0) {
        ref.replace(pre, ref.size() - pre - suf, stored);
        r.whole = ref;
        f(t_us, std::as_const(r));
        return;
      }
      r.whole = stored;
      f(t_us, std::as_const(r));
      if (stored.size() <= delta_max) ref.assign(stored);
    });
  }

  /// The read's bytes: `whole`, or a shaped read's pieces put together in `out` (reused).
  static std::string_view assemble(const read_view& r, std::string& out) {
    if (!r.shaped) return r.whole;
    out.assign(r.before);
    out.append(r.shape.substr(0, r.shape_prefix));
    out.append(r.text);
    out.append(r.shape.substr(r.shape_prefix));
    out.append(r.after);
    return out;
  }

  /// Calls f(t_us, bytes) for every read, in order (the bytes valid during the call).
  template <class F>
  void for_each(F&& f) const {
    std::string whole;
    for_each_read([&](std::int64_t t_us, const read_view& r) { f(t_us, assemble(r, whole)); });
  }

  /// Calls f(tag, text) for every text, in order.
  template <class F>
  void for_each_text(F&& f) const {
    visit([&](std::int64_t, std::uint64_t word, std::string_view bytes) {
      if (const auto tag = static_cast<unsigned>(word >> tag_shift); tag != 0) f(tag, bytes);
    });
  }

 private:
  // The header's second word: tag << 56 | length (of the stored bytes); for a read logged as
  // its difference: delta_bit | suffix << 32 | prefix << 16 | length (each at most delta_max);
  // for a shaped read: shaped_bit | bytes after the chunk << 32 | bytes before it << 16 |
  // length; for a shape: shape_bit | its prefix << 16 | length.
  static constexpr int tag_shift = 56;
  static constexpr std::uint64_t delta_bit = std::uint64_t{1} << 55;
  static constexpr std::uint64_t shaped_bit = std::uint64_t{1} << 54;
  static constexpr std::uint64_t shape_bit = std::uint64_t{1} << 53;
  static constexpr std::uint64_t length_mask = shape_bit - 1;
  static constexpr std::uint64_t counted_bits = delta_bit | shaped_bit | shape_bit;
  static constexpr int pre_shift = 16, suf_shift = 32;
  static constexpr std::uint64_t field_mask = 0xffff;
  static_assert(delta_max <= field_mask);

  static std::size_t stored_length(std::uint64_t word) noexcept {
    return static_cast<std::size_t>((word & counted_bits) != 0 ? word & field_mask
                                                               : word & length_mask);
  }

  // One entry: `high` holds the word's bits above the length (tag, or a kind and its
  // counts); its bytes are a, b and c one after the other.
  void put(std::int64_t t_us, std::uint64_t high, std::string_view a, std::string_view b = {},
           std::string_view c = {}) {
    const std::size_t n = a.size() + b.size() + c.size();
    const std::size_t need = entry_bytes(n);
    if (static_cast<std::size_t>(end_ - w_) < need) grow(need);
    const auto word = high | static_cast<std::uint64_t>(n);
    std::memcpy(w_, &t_us, 8);
    std::memcpy(w_ + 8, &word, 8);
    char* p = w_ + align;
    for (const auto part : {a, b, c}) {
      if (!part.empty()) std::memcpy(p, part.data(), part.size());
      p += part.size();
    }
    w_ += need;
  }

  // f(t_us, word, stored bytes) for every entry, in order.
  template <class F>
  void visit(F&& f) const {
    for (const chunk* c = first_; c != nullptr; c = c->next) {
      const char* p = c->entries();
      const char* const end = c == last_ ? w_ : c->used;
      while (p < end) {
        std::int64_t t_us;
        std::uint64_t word;
        std::memcpy(&t_us, p, 8);
        std::memcpy(&word, p + 8, 8);
        const std::size_t len = stored_length(word);
        f(t_us, word, std::string_view(p + align, len));
        p += entry_bytes(len);
      }
    }
  }

  // A chunk's first 16 bytes: the next chunk and, once full, where its entries end (the last
  // one's end is w_).  Chunks are linked, not listed: a stream's log allocates its chunks and
  // nothing else.
  struct chunk {
    chunk* next;
    char* used;
    char* entries() noexcept { return reinterpret_cast<char*>(this) + align; }
    const char* entries() const noexcept { return reinterpret_cast<const char*>(this) + align; }
  };
  static_assert(sizeof(chunk) == align);

  void grow(std::size_t need);
  void keep(std::string_view bytes, std::size_t pre, std::size_t suf);
  void release() noexcept;
  void take(event_log& o) noexcept;

  // Chunks are never reallocated: the first sized for the first read and 64 bytes of texts (see
  // grow), each next one as large as the chunks so far together (at least one entry, at most
  // 64 KiB) — the total doubles per chunk, and the slack never exceeds what is used: an idle
  // stream holds about its reads.
  // What an append reads first (the chunks last): an owner that puts the log after its own
  // per-event fields has them all on one line.
  char* w_ = nullptr;
  char* end_ = nullptr;
  char* ref_ = nullptr;  // the kept read
  std::uint32_t ref_n_ = 0, ref_cap_ = 0;
  chunk* first_ = nullptr;
  chunk* last_ = nullptr;
  std::size_t held_ = 0;             // bytes of entries in the chunks before the last
  std::uint32_t shape_version_ = 0;  // of the last shape logged, if any
  bool has_shape_ = false;
  bool last_shaped_ = false;  // the last read was appended by append_shaped
};

}  // namespace tokentap::hooks
