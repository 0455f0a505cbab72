#include "hooks/export/trace_writer.hpp"

#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <vector>

#include "base/clock.hpp"
#include "base/json.hpp"
#include "base/log.hpp"

namespace tokentap::hooks {

namespace fs = std::filesystem;

namespace {
constexpr std::string_view prefix = "tokentap-";
constexpr std::string_view suffix = ".jsonl";

}  // namespace

trace_writer::trace_writer(const config::trace_config& cfg) : cfg_(cfg) {
  std::error_code ec;
  fs::create_directories(cfg_.dir, ec);
  if (ec)
    TT_LOG(warn) << "trace directory " << cfg_.dir << ": " << ec.message()
                 << " (traces will be dropped)";
  thread_ = std::thread([this] { run(); });
}

trace_writer::~trace_writer() {
  {
    std::lock_guard lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
  if (fd_ >= 0) ::close(fd_);
}

namespace {

// A piece of text escaped once and reused while the next one is the same bytes (the framing
// around a shaped read, "data: " and "\n\n", is the same for every event of a stream).
struct escaped_piece {
  std::string_view raw;  // what `escaped` holds, escaped (a view into the log)
  std::string escaped;
  bool utf8 = true;

  // Escapes `s` unless `escaped` holds it already; false when it is not valid UTF-8.
  bool make(std::string_view s) {
    if (s != raw) {
      raw = s;
      escaped.clear();
      utf8 = base::json::append_escaped_if_utf8(escaped, s);
    }
    return utf8;
  }
  // Appends `s` escaped; false (nothing appended) when it is not valid UTF-8.
  bool put(std::string& out, std::string_view s) {
    if (!make(s)) return false;
    out += escaped;
    return true;
  }
};

}  // namespace

void trace_writer::render_events(std::string& out, const event_log& log) {
  // A shaped read (event_log::append_shaped: a chat chunk shaped like the one before it) is
  // escaped in pieces — its shape once, the framing around it while it stays the same, the text
  // per read: the same JSON as escaping the whole read (escaping goes byte by byte, and valid
  // UTF-8 pieces make valid UTF-8), for a fraction of the work: a chunk is ~250 bytes with ~30
  // quotes to escape, its text a few bytes.
  escaped_piece shape_head, shape_tail, before, after;
  const char* shape = nullptr;  // the shape shape_head and shape_tail were made from
  std::string whole;
  bool first = true;
  log.for_each_read([&](std::int64_t t_us, const event_log::read_view& r) {
    out += first ? "{\"t_us\":" : ",{\"t_us\":";
    first = false;
    base::json::append_int(out, t_us);
    const std::size_t mark = out.size();
    constexpr std::string_view raw_key = ",\"raw\":\"";
    out += raw_key;
    if (r.shaped) {
      if (r.shape.data() != shape) {
        shape = r.shape.data();
        shape_head.make(r.shape.substr(0, r.shape_prefix));
        shape_tail.make(r.shape.substr(r.shape_prefix));
      }
      if (shape_head.utf8 && shape_tail.utf8 && before.put(out, r.before)) {
        out += shape_head.escaped;
        if (base::json::append_escaped_if_utf8(out, r.text)) {
          out += shape_tail.escaped;
          if (after.put(out, r.after)) {
            out += "\"}";
            return;
          }
        }
      }
      out.resize(mark + raw_key.size());  // a piece is not UTF-8: the whole read decides (below)
    }
    // Exact bytes: as a JSON string when they are valid UTF-8, else base64 (a read can end in
    // the middle of a multi-byte character).  One pass validates and escapes.
    const std::string_view bytes = event_log::assemble(r, whole);
    if (base::json::append_escaped_if_utf8(out, bytes)) {
      out += "\"}";
      return;
    }
    out.resize(mark);
    out += ",\"raw_b64\":";
    base::json::append_base64(out, bytes);
    out += "}";
  });
}

bool trace_writer::submit(record parts) {
  {
    std::lock_guard lk(mu_);
    if (queue_.size() >= cfg_.queue_records || stop_) {
      stats_.dropped.fetch_add(1, std::memory_order_relaxed);
      return false;
    }
    queue_.push_back(std::move(parts));
  }
  cv_.notify_one();
  return true;
}

void trace_writer::flush() {
  std::unique_lock lk(mu_);
  idle_cv_.wait(lk, [&] { return queue_.empty() && !busy_; });
}

void trace_writer::run() {
  // Background work, so it never holds up an event: SCHED_BATCH (a waking writer does not
  // preempt the I/O thread running on its core) at nice 10 (on a contended core it gets about a
  // tenth of an I/O thread's share; a writer that falls behind fills its queue, and records are
  // dropped and counted).  With the writer at the I/O threads' priority, each record it woke up
  // for could cut into the I/O thread's time: added latency P99 at 1,000 streams 2.5–4.7 ms with
  // everything on against 0.9–2.6 ms so (BENCHMARKS.md).  Refused changes (a
  // sandbox's seccomp) leave the thread as it was.
  tid_.store(static_cast<int>(::gettid()), std::memory_order_release);
  sched_param sp{};
  sp.sched_priority = 0;
  if (const int rc = pthread_setschedparam(pthread_self(), SCHED_BATCH, &sp); rc != 0)
    TT_LOG(debug) << "trace writer: SCHED_BATCH refused: " << std::strerror(rc);
  errno = 0;
  const int current = ::getpriority(PRIO_PROCESS, 0);  // this thread's
  if (errno == 0 && current < nice &&
      ::setpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()), nice) != 0)
    TT_LOG(debug) << "trace writer: nice " << nice << " refused: " << std::strerror(errno);

  std::unique_lock lk(mu_);
  taken_.reserve(batch_records);
  for (;;) {
    cv_.wait(lk, [&] { return stop_ || !queue_.empty(); });
    if (queue_.empty() && stop_) break;
    busy_ = true;
    while (!queue_.empty() && taken_.size() < batch_records) {
      taken_.push_back(std::move(queue_.front()));
      queue_.pop_front();
    }
    lk.unlock();
    write_batch();
    taken_.clear();  // the records are freed here, not under the lock: submit() never waits
    lk.lock();
    busy_ = false;
    if (queue_.empty()) idle_cv_.notify_all();
  }
  idle_cv_.notify_all();
}

void trace_writer::write_batch() {
  // Rendered in order; written together while they fit one write and the current file.  A
  // record that does not is written with the ones after it (in the next file if it must be).
  std::size_t n = 0, bytes = 0;
  std::size_t base = 0;  // the bytes of the file the pending records go to
  for (auto& r : taken_) {
    auto& out = rendered_[n];
    try {
      render(r, out);
    } catch (const std::exception& e) {  // out of memory rendering it: this record only
      TT_LOG(warn) << "trace record dropped: " << e.what();
      stats_.dropped.fetch_add(1, std::memory_order_relaxed);
      continue;
    }
    const auto size = out.size();
    if (n > 0 && (bytes + size > batch_bytes || base + bytes + size > cfg_.max_file_bytes)) {
      write_rendered(n, bytes);
      std::swap(rendered_[0], rendered_[n]);  // this one starts the next write
      n = bytes = 0;
    }
    if (n == 0) base = opens_file(size) ? 0 : file_bytes_;  // as write_rendered will decide
    ++n;
    bytes += size;
  }
  if (n > 0) write_rendered(n, bytes);
  // Buffers keep their capacity for the next batch, up to a few large records' worth.
  for (std::size_t i = 0; i < rendered_.size(); ++i) {
    const std::size_t keep = i == 0 ? (4u << 20) : batch_bytes * 2;
    for (auto* s : {&rendered_[i].head, &rendered_[i].events, &rendered_[i].tail})
      if (s->capacity() > keep) std::string().swap(*s);
  }
}

void trace_writer::render(record& r, rendered& out) {
  // The events first: the log arrives from memory (it was written around the cache), and
  // `render` reads its texts again right after, from the cache.
  out.of = &r;
  out.own_ends = false;
  out.events.clear();
  render_events(out.events, r.events);
  if (r.render) {
    out.head.assign(r.head);
    out.tail.assign(r.tail);
    r.render(out.head, out.tail, r.events);
    out.own_ends = true;
  }
  (out.own_ends ? out.tail : r.tail).push_back('\n');  // the record's own: no copy
}

void trace_writer::write_rendered(std::size_t n, std::size_t size) {
  const auto drop = [&](std::size_t k) { stats_.dropped.fetch_add(k, std::memory_order_relaxed); };
  if (opens_file(size) && !open_next()) return drop(n);
  std::array<iovec, 3 * batch_records> iov;
  std::size_t count = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const auto& r = rendered_[i];
    for (const std::string* piece : {&r.first(), &r.events, &r.last()})
      iov[count++] = {const_cast<char*>(piece->data()), piece->size()};
  }
  // One writev for the records: each lands whole, in order, never interleaved with another's.
  std::size_t done = 0, first = 0;
  while (done < size) {
    const auto got = ::writev(fd_, iov.data() + first, static_cast<int>(count - first));
    if (got < 0 && errno == EINTR) continue;
    stats_.writes.fetch_add(1, std::memory_order_relaxed);
    if (got <= 0) {
      stats_.write_errors.fetch_add(1, std::memory_order_relaxed);
      const int err = errno;
      // The records that reached the file whole stay; a partial one is taken back, so the file
      // keeps whole records only (a full disk or a file size limit accepts part of a line
      // before failing).
      std::size_t whole = 0, kept = 0;
      for (; whole < n; ++whole) {
        const auto& r = rendered_[whole];
        const std::size_t len = r.first().size() + r.events.size() + r.last().size();
        if (kept + len > done) break;
        kept += len;
      }
      if (done > kept) {
        [[maybe_unused]] const int rc = ::ftruncate(fd_, static_cast<off_t>(file_bytes_ + kept));
      }
      file_bytes_ += kept;
      stats_.records.fetch_add(whole, std::memory_order_relaxed);
      if (base::steady_seconds() - last_error_log_ >= 10) {
        last_error_log_ = base::steady_seconds();
        TT_LOG(warn) << "trace write failed: " << std::strerror(err) << " (" << n - whole
                     << " record(s) dropped)";
      }
      ::close(fd_);
      fd_ = -1;  // try a fresh file next time (the disk may have been freed)
      return drop(n - whole);
    }
    done += static_cast<std::size_t>(got);
    // Skip what was written: whole pieces, then the start of a partly written one.
    auto left = static_cast<std::size_t>(got);
    while (first < count && left >= iov[first].iov_len) left -= iov[first++].iov_len;
    if (left > 0) {
      iov[first].iov_base = static_cast<char*>(iov[first].iov_base) + left;
      iov[first].iov_len -= left;
    }
  }
  file_bytes_ += size;
  stats_.records.fetch_add(n, std::memory_order_relaxed);
}

bool trace_writer::open_next() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  const auto t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", &tm);
  char seq[24];
  std::snprintf(seq, sizeof seq, "%06llu", static_cast<unsigned long long>(seq_++));
  // Zero-padded so that names sort in creation order (time, then process, then sequence).
  const auto name = std::string(prefix) + stamp + "-" + std::to_string(::getpid()) + "-" + seq +
                    std::string(suffix);
  const auto path = (fs::path(cfg_.dir) / name).string();
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
  if (fd_ < 0) {
    stats_.write_errors.fetch_add(1, std::memory_order_relaxed);
    if (base::steady_seconds() - last_error_log_ >= 10) {
      last_error_log_ = base::steady_seconds();
      TT_LOG(warn) << "cannot open trace file " << path << ": " << std::strerror(errno)
                   << " (records dropped)";
    }
    return false;
  }
  file_bytes_ = 0;
  stats_.files.fetch_add(1, std::memory_order_relaxed);
  prune();
  return true;
}

void trace_writer::prune() {
  std::error_code ec;
  std::vector<fs::path> ours;
  for (const auto& e : fs::directory_iterator(cfg_.dir, ec)) {
    const auto n = e.path().filename().string();
    if (n.starts_with(prefix) && n.ends_with(suffix)) ours.push_back(e.path());
  }
  if (ours.size() <= cfg_.max_files) return;
  std::sort(ours.begin(), ours.end());  // oldest first
  for (std::size_t i = 0; i + cfg_.max_files < ours.size(); ++i) fs::remove(ours[i], ec);
}

}  // namespace tokentap::hooks
