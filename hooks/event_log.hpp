#pragma once
// A stream's upstream reads as the trace hook keeps them until the stream ends: each read's time
// and its bytes, unescaped.  The trace writer renders them as the record's `events` on its own
// thread (trace_writer::record).
//
// Written once on the I/O thread, read once on the writer's, seconds later: the bytes go to
// memory with non-temporal stores, so that logging a read neither fetches the log's cache lines
// nor evicts the per-stream state the next events need (with hundreds of open streams, the
// escaped log in cache cost more than the escaping).  Entries are 16-byte aligned for that: a
// 16-byte header (time, tag and length), then the bytes padded to 16.
//
// Besides the reads, a log keeps tagged texts (append_text: the trace's response text, token by
// token), which for_each skips and for_each_text visits: one place written per event instead
// of a second, growing string per stream that was a cache miss of its own at every token.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>
#include <vector>

// Sanitizer builds store with memcpy, which they check (they do not see intrinsic stores).
#if defined(__SSE2__) && !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
#define TOKENTAP_EVENT_LOG_NT 1
#include <emmintrin.h>
#endif

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

  /// Appends one read: its time since the request start (µs) and its bytes.
  void append(std::int64_t t_us, std::string_view bytes) { put(t_us, 0, bytes); }

  /// Appends a text with a tag (1–255), for for_each_text; for_each does not see it.
  void append_text(unsigned tag, std::string_view text) { put(0, tag & 0xff, text); }

  /// Makes the entries visible to another thread (after the non-temporal stores): call before
  /// handing the log over.
  void seal() noexcept {
#if defined(TOKENTAP_EVENT_LOG_NT)
    _mm_sfence();
#endif
  }

  /// Calls f(t_us, bytes) for every read, in order.
  template <class F>
  void for_each(F&& f) const {
    visit([&](std::int64_t t_us, unsigned tag, std::string_view bytes) {
      if (tag == 0) f(t_us, bytes);
    });
  }

  /// Calls f(tag, text) for every text, in order.
  template <class F>
  void for_each_text(F&& f) const {
    visit([&](std::int64_t, unsigned tag, std::string_view bytes) {
      if (tag != 0) f(tag, bytes);
    });
  }

 private:
  static constexpr int tag_shift = 56;  // the header's second word: tag << 56 | length

  void put(std::int64_t t_us, std::uint64_t tag, std::string_view bytes) {
    const std::size_t need = entry_bytes(bytes.size());
    if (static_cast<std::size_t>(end_ - w_) < need) grow(need);
    alignas(align) char head[align] = {};
    const auto word = tag << tag_shift | static_cast<std::uint64_t>(bytes.size());
    std::memcpy(head, &t_us, 8);
    std::memcpy(head + 8, &word, 8);
    store(w_, head);
    char* w = w_ + align;
    const char* p = bytes.data();
    std::size_t left = bytes.size();
    for (; left >= align; left -= align, p += align, w += align) store(w, p);
    if (left > 0) {
      alignas(align) char last[align] = {};
      std::memcpy(last, p, left);
      store(w, last);
    }
    w_ += need;
  }

  // f(t_us, tag, bytes) for every entry, in order.
  template <class F>
  void visit(F&& f) const {
    for (std::size_t c = 0; c < chunks_.size(); ++c) {
      const char* p = chunks_[c].data;
      const char* const end = c + 1 == chunks_.size() ? w_ : chunks_[c].used;
      while (p < end) {
        std::int64_t t_us;
        std::uint64_t word;
        std::memcpy(&t_us, p, 8);
        std::memcpy(&word, p + 8, 8);
        const auto len = static_cast<std::size_t>(word & ((std::uint64_t{1} << tag_shift) - 1));
        f(t_us, static_cast<unsigned>(word >> tag_shift), std::string_view(p + align, len));
        p += entry_bytes(len);
      }
    }
  }

  struct chunk {
    char* data;
    char* used;  ///< end of the entries (of a full chunk; the current one's is w_)
    std::size_t cap;
  };

  // 16 bytes from src (16-aligned dst; src aligned or not) to memory, bypassing the cache.
  static void store(char* dst, const char* src) noexcept {
#if defined(TOKENTAP_EVENT_LOG_NT)
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst),
                     _mm_loadu_si128(reinterpret_cast<const __m128i*>(src)));
#else
    std::memcpy(dst, src, align);
#endif
  }

  void grow(std::size_t need);
  void release() noexcept;

  // Chunks are never reallocated: the first sized for the first read and 64 bytes of texts (see
  // grow), each next one as large as the chunks so far together (at least one entry, at most
  // 64 KiB) — the total doubles per chunk, and the slack never exceeds what is used: an idle
  // stream holds about its reads.
  // w_ and end_ first: they are what an append reads.
  char* w_ = nullptr;
  char* end_ = nullptr;
  std::vector<chunk> chunks_;
};

}  // namespace tokentap::hooks
