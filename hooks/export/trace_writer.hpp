#pragma once
// Background writer of trace records (JSON Lines).  The proxy never waits on disk: submit() only
// queues, and a full queue (or a disk error) drops the record and counts it.  Files rotate by
// size; only the newest `max_files` are kept.
#include <array>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "config/config.hpp"
#include "hooks/export/event_log.hpp"

namespace tokentap::hooks {

struct trace_writer_stats {
  std::atomic<std::uint64_t> records{0};  ///< written to disk
  std::atomic<std::uint64_t> dropped{0};  ///< queue full or disk error
  std::atomic<std::uint64_t> write_errors{0};
  std::atomic<std::uint64_t> files{0};   ///< files opened (rotations + 1)
  std::atomic<std::uint64_t> writes{0};  ///< write system calls (records queued together share one)
};

class trace_writer {
 public:
  explicit trace_writer(const config::trace_config& cfg);
  ~trace_writer();  ///< writes what is queued, then stops
  trace_writer(const trace_writer&) = delete;
  trace_writer& operator=(const trace_writer&) = delete;

  /// One record: `head` and `tail` are JSON text; between them the writer renders the stream's
  /// reads from `events` as `{"t_us":…,"raw":"…"}` objects (or `raw_b64` for bytes that are not
  /// UTF-8).  The escaping is done here, on the writer's thread: the proxy's I/O thread only
  /// copies each read once, and the escaped text is written out from a buffer that is still in
  /// cache instead of living in every open stream's memory.  `events` must be sealed.
  /// `render`, when set, is called on the writer's thread (after the events are rendered) to
  /// append to head and tail: the producer hands over what the JSON is made from instead of
  /// building it while other streams wait on its thread.  It gets `events` too, for the texts
  /// logged there (event_log::append_text); the writer renders only the reads.
  struct record {
    std::string head;
    event_log events;
    std::string tail;
    std::function<void(std::string& head, std::string& tail, const event_log& events)> render;
  };

  /// Renders an event log as the comma-separated objects of a trace's `events` array.
  static void render_events(std::string& out, const event_log& log);

  /// Queues one record.  Never blocks; false = dropped.
  bool submit(record r);
  bool submit(std::string whole) { return submit(record{std::move(whole), {}, {}, {}}); }
  /// Blocks until everything queued so far is written (tests, shutdown).
  void flush();
  const trace_writer_stats& stats() const noexcept { return stats_; }
  /// The writer thread's kernel id (0 until it has started): tests check its scheduling.
  int thread_id() const noexcept { return tid_.load(std::memory_order_acquire); }

  /// The nice value the writer thread runs at (at least the process's own).
  static constexpr int nice = 10;

  /// Records taken off the queue at once and written with one `writev` (when no more than
  /// `batch_bytes` together, in one file): fewer, larger writes into the page cache.
  static constexpr std::size_t batch_records = 8;
  static constexpr std::size_t batch_bytes = 256u << 10;

 private:
  // A record rendered for writing: its pieces (the record's own head and tail, or the ones
  // `render` made here), in buffers that keep their capacity for the next batch.
  struct rendered {
    std::string head, events, tail;
    record* of = nullptr;
    bool own_ends = false;  // head and tail are these (render made them), else the record's
    const std::string& first() const noexcept { return own_ends ? head : of->head; }
    const std::string& last() const noexcept { return own_ends ? tail : of->tail; }
    std::size_t size() const noexcept { return first().size() + events.size() + last().size(); }
  };

  void run();
  void write_batch();
  void render(record& r, rendered& out);  ///< throws only what `render` or allocation throws
  void write_rendered(std::size_t n, std::size_t bytes);
  /// Whether `bytes` more go to a new file (none open, or the open one would pass its cap).
  bool opens_file(std::size_t bytes) const noexcept {
    return fd_ < 0 || file_bytes_ + bytes > cfg_.max_file_bytes;
  }
  bool open_next();
  void prune();

  config::trace_config cfg_;
  std::mutex mu_;
  std::condition_variable cv_, idle_cv_;
  std::deque<record> queue_;
  bool stop_ = false;
  bool busy_ = false;
  int fd_ = -1;
  std::size_t file_bytes_ = 0;
  std::uint64_t seq_ = 0;
  std::int64_t last_error_log_ = 0;
  std::vector<record> taken_;                       ///< off the queue, being written
  std::array<rendered, batch_records> rendered_{};  ///< their bytes (buffers reused)
  trace_writer_stats stats_;
  std::atomic<int> tid_{0};
  std::thread thread_;
};

}  // namespace tokentap::hooks
