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
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>

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

  /// Appends a text with a tag (1–255), for for_each_text; for_each does not see it.
  void append_text(unsigned tag, std::string_view text) {
    put(0, std::uint64_t{tag & 0xff} << tag_shift, text);
  }

  /// Bytes of entries so far (headers and stored bytes).
  std::size_t stored_bytes() const noexcept;

  /// The kept copy of the last read (what the next append() compares with): the lines the next
  /// read touches, for the stream's hot-line list.
  std::string_view last_read() const noexcept { return std::string_view(ref_, ref_n_); }
  /// Where the next entry goes (null before the first).
  const char* tail() const noexcept { return w_; }

  /// Drops the kept read, on the thread that appended: call once no more is appended, before
  /// handing the log over.
  void seal() noexcept;

  /// Calls f(t_us, bytes) for every read, in order (the bytes valid during the call).
  template <class F>
  void for_each(F&& f) const {
    // ref: the last read of at most delta_max (whenever append logged a difference, it had kept
    // that same read), rebuilt in place from a difference.
    std::string ref;
    visit([&](std::int64_t t_us, std::uint64_t word, std::string_view stored) {
      if ((word >> tag_shift) != 0) return;  // a text
      if ((word & delta_bit) != 0) {
        const auto pre = static_cast<std::size_t>(word >> pre_shift & field_mask);
        const auto suf = static_cast<std::size_t>(word >> suf_shift & field_mask);
        ref.replace(pre, ref.size() - pre - suf, stored);
        f(t_us, std::string_view(ref));
        return;
      }
      f(t_us, stored);
      if (stored.size() <= delta_max) ref.assign(stored);
    });
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
  // its difference: delta_bit | suffix << 32 | prefix << 16 | length (each at most delta_max).
  static constexpr int tag_shift = 56;
  static constexpr std::uint64_t delta_bit = std::uint64_t{1} << 55;
  static constexpr std::uint64_t length_mask = delta_bit - 1;
  static constexpr int pre_shift = 16, suf_shift = 32;
  static constexpr std::uint64_t field_mask = 0xffff;
  static_assert(delta_max <= field_mask);

  static std::size_t stored_length(std::uint64_t word) noexcept {
    return static_cast<std::size_t>((word & delta_bit) != 0 ? word & field_mask
                                                            : word & length_mask);
  }

  // One entry: `high` holds the word's bits above the length (tag, or delta_bit and its counts).
  void put(std::int64_t t_us, std::uint64_t high, std::string_view bytes) {
    const std::size_t n = bytes.size();
    const std::size_t need = entry_bytes(n);
    if (static_cast<std::size_t>(end_ - w_) < need) grow(need);
    const auto word = high | static_cast<std::uint64_t>(n);
    std::memcpy(w_, &t_us, 8);
    std::memcpy(w_ + 8, &word, 8);
    if (n != 0) std::memcpy(w_ + align, bytes.data(), n);
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
  std::size_t held_ = 0;  // bytes of entries in the chunks before the last
};

}  // namespace tokentap::hooks
