// The trace writer: rotation, background work, rendering on its own thread, batches, bounds and
// drops that never block the I/O threads.
#include "hooks/export/trace_writer.hpp"

#include <gtest/gtest.h>
#include <sched.h>
#include <sys/resource.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <functional>
#include <thread>

#include "hooks/export/event_log.hpp"
#include "test/hooks/chain_helpers.hpp"
#include "test/support/tls_cert.hpp"

namespace tokentap::hooks {
namespace {

using namespace chain_test;

std::size_t count_lines(const std::string& dir, std::size_t* files = nullptr) {
  std::size_t lines = 0, n = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    ++n;
    std::ifstream in(e.path());
    std::string l;
    while (std::getline(in, l)) ++lines;
  }
  if (files) *files = n;
  return lines;
}

// Every trace file of `dir`, oldest first, as one string.
std::string read_traces(const std::string& dir, std::size_t* files = nullptr) {
  std::vector<std::filesystem::path> paths;
  for (const auto& e : std::filesystem::directory_iterator(dir)) paths.push_back(e.path());
  std::sort(paths.begin(), paths.end());  // names sort in creation order
  std::string all;
  for (const auto& p : paths) {
    std::ifstream in(p, std::ios::binary);
    all.append(std::istreambuf_iterator<char>(in), {});
  }
  if (files) *files = paths.size();
  return all;
}

TEST(TraceWriter, RotatesBySizeAndKeepsTheNewestFiles) {
  config::trace_config cfg;
  cfg.dir = test::temp_dir() + "/traces";
  cfg.max_file_bytes = 4096;
  cfg.max_files = 3;
  cfg.queue_records = 10000;
  trace_writer w(cfg);
  const std::string record = "{\"v\":1,\"pad\":\"" + std::string(1000, 'x') + "\"}";
  for (int i = 0; i < 40; ++i) ASSERT_TRUE(w.submit(record));
  w.flush();
  EXPECT_EQ(w.stats().records.load(), 40u);
  EXPECT_GE(w.stats().files.load(), 10u);
  std::size_t files = 0;
  const auto lines = count_lines(cfg.dir, &files);
  EXPECT_EQ(files, 3u);
  EXPECT_LE(lines, 12u);  // 3 files of at most 4 records
  EXPECT_GE(lines, 9u);
}

// The writer is background work: it must not preempt the I/O threads when it wakes, and takes a
// smaller share of a contended core (BENCHMARKS.md: it halved the added latency P99).
TEST(TraceWriter, RunsAsBackgroundWork) {
  config::trace_config cfg;
  cfg.dir = test::temp_dir() + "/traces";
  trace_writer w(cfg);
  ASSERT_TRUE(w.submit(std::string("{\"v\":1}")));
  w.flush();  // the thread has run
  const int tid = w.thread_id();
  ASSERT_GT(tid, 0);
  EXPECT_EQ(sched_getscheduler(tid), SCHED_BATCH);
  errno = 0;
  const int inherited = getpriority(PRIO_PROCESS, 0);
  ASSERT_EQ(errno, 0);
  EXPECT_EQ(getpriority(PRIO_PROCESS, static_cast<id_t>(tid)),
            std::max(inherited, trace_writer::nice));
  // ... and the test's own thread (an I/O thread's stand-in) is untouched.
  EXPECT_EQ(sched_getscheduler(0), SCHED_OTHER);
}

// A record's event log is rendered by the writer as the trace's `events` objects, byte for byte:
// JSON escapes for quotes, backslashes, line ends and other control characters; UTF-8 kept as it
// is; bytes that are not UTF-8 (a read ending mid-character) as base64; reads spread over
// several chunks.  Head, events and tail land as one line.
TEST(TraceWriter, EventLogIsRenderedAsOneLineOfJson) {
  config::trace_config cfg;
  cfg.dir = test::temp_dir() + "/traces";
  trace_writer w(cfg);
  trace_writer::record a{"{\"v\":1,\"events\":[", {}, "]}", {}};
  a.events.append(0, "data: {\"a\":\"b\\\\c\"}\n\n");
  a.events.append(7, "");
  a.events.append(12345678901, std::string("\x01\t\r\x7f\xc3\xa9", 6));
  a.events.append(9, "\xe4\xbd");  // half of a 3-byte character
  a.events.seal();
  const std::string want_a =
      R"({"v":1,"events":[{"t_us":0,"raw":"data: {\"a\":\"b\\\\c\"}\n\n"},{"t_us":7,"raw":""},)"
      "{\"t_us\":12345678901,\"raw\":\"\\u0001\\t\\r\x7f\xc3\xa9\"},"
      R"({"t_us":9,"raw_b64":"5L0="}]})";
  // Many reads, longer than the escaper's 16- and 32-byte blocks.
  trace_writer::record b{"{\"v\":1,\"events\":[", {}, "]}", {}};
  std::string want_b = b.head;
  for (int i = 0; i < 3000; ++i) {
    const std::string read(1 + i % 70, static_cast<char>('a' + i % 26));
    b.events.append(i, read);
    want_b += (i ? ",{\"t_us\":" : "{\"t_us\":") + std::to_string(i) + ",\"raw\":\"" + read + "\"}";
  }
  want_b += "]}";
  b.events.seal();
  ASSERT_TRUE(w.submit(std::move(a)));
  ASSERT_TRUE(w.submit(std::move(b)));
  ASSERT_TRUE(w.submit(trace_writer::record{}));  // nothing at all: an empty line, not a crash
  w.flush();
  EXPECT_EQ(w.stats().records.load(), 3u);
  const std::string content = read_traces(cfg.dir);
  EXPECT_EQ(content, want_a + "\n" + want_b + "\n\n");
}

// A record handed over as what it is made from: `render` runs on the writer's thread, before
// the events; one that throws (out of memory) loses that record only, counted as dropped.
TEST(TraceWriter, RecordsAreRenderedOnTheWritersThreadAndAFailingOneIsDropped) {
  config::trace_config cfg;
  cfg.dir = test::temp_dir() + "/traces";
  trace_writer w(cfg);
  const auto submitter = std::this_thread::get_id();
  std::thread::id rendered_on;
  trace_writer::record a;
  a.events.append(5, "x");
  a.events.append_text(1, "text");  // for render; not an event
  a.events.seal();
  a.render = [&](std::string& head, std::string& tail, const event_log& log) {
    rendered_on = std::this_thread::get_id();
    head += "{\"text\":\"";
    log.for_each_text([&](unsigned tag, std::string_view t) {
      if (tag == 1) head += t;
    });
    head += "\",\"events\":[";
    tail += "]}";
  };
  trace_writer::record bad;
  bad.render = [](std::string&, std::string&, const event_log&) { throw std::bad_alloc(); };
  ASSERT_TRUE(w.submit(std::move(a)));
  ASSERT_TRUE(w.submit(std::move(bad)));
  ASSERT_TRUE(w.submit("{\"v\":1}"));
  w.flush();
  EXPECT_NE(rendered_on, submitter);
  EXPECT_EQ(w.stats().records.load(), 2u);
  EXPECT_EQ(w.stats().dropped.load(), 1u);
  const std::string content = read_traces(cfg.dir);
  EXPECT_EQ(content, "{\"text\":\"text\",\"events\":[{\"t_us\":5,\"raw\":\"x\"}]}\n{\"v\":1}\n");
}

// A written record is freed (its event log, its strings, what its render captured) without the
// queue's lock held: an I/O thread's submit() meanwhile goes through.  Here the record's last
// piece waits, as it is freed, for a submit() that needs that lock — up to 5 s.
TEST(TraceWriter, AWrittenRecordIsFreedWithoutTheQueueLocked) {
  config::trace_config cfg;
  cfg.dir = test::temp_dir() + "/traces";
  std::atomic<bool> freeing{false}, submitted{false}, submitted_while_freeing{false};
  trace_writer w(cfg);  // after the flags: stopped (its records freed) before they go
  struct on_free {
    std::function<void()> f;
    ~on_free() { f(); }
  };
  auto last = std::make_shared<on_free>();
  last->f = [&] {
    freeing = true;
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (!submitted && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    submitted_while_freeing = submitted.load();
  };
  trace_writer::record r;
  r.render = [keep = std::move(last)](std::string&, std::string&, const event_log&) {};
  ASSERT_TRUE(w.submit(std::move(r)));
  for (int i = 0; i < 5000 && !freeing; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_TRUE(freeing) << "the record was not freed after it was written";
  EXPECT_TRUE(w.submit(std::string("{\"v\":1}")));
  submitted = true;
  w.flush();
  EXPECT_TRUE(submitted_while_freeing);
  EXPECT_EQ(w.stats().records.load(), 2u);
}

// Records queued while the writer works are taken together and written with one writev — up
// to batch_records of them and batch_bytes, within one file — whole, in order; a record that
// fails to render in the middle of a batch loses that record only.
struct held_writer {  // a trace writer whose first record's render waits for release()
  explicit held_writer(const config::trace_config& cfg) : w(cfg) {
    trace_writer::record first{"{\"n\":0", {}, "}", {}};
    first.render = [this](std::string&, std::string&, const event_log&) {
      inside = true;
      while (!released) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    };
    EXPECT_TRUE(w.submit(std::move(first)));
    while (!inside) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  void release() {
    released = true;
    w.flush();
  }
  std::atomic<bool> inside{false}, released{false};
  trace_writer w;
};

TEST(TraceWriter, RecordsQueuedTogetherAreWrittenTogether) {
  config::trace_config cfg;
  cfg.dir = test::temp_dir() + "/traces";
  held_writer h(cfg);
  std::string want = "{\"n\":0}\n";
  for (int i = 1; i <= 17; ++i) {
    const auto n = std::to_string(i);
    if (i == 5) {  // fails to render: dropped alone
      trace_writer::record bad;
      bad.render = [](std::string&, std::string&, const event_log&) { throw std::bad_alloc(); };
      ASSERT_TRUE(h.w.submit(std::move(bad)));
    } else if (i % 3 == 0) {  // rendered head and tail around events
      trace_writer::record r{"{\"n\":" + n, {}, "]}", {}};
      r.events.append(i, "e" + n);
      r.events.seal();
      r.render = [](std::string& head, std::string&, const event_log&) { head += ",\"events\":["; };
      ASSERT_TRUE(h.w.submit(std::move(r)));
      want += "{\"n\":" + n + ",\"events\":[{\"t_us\":" + n + ",\"raw\":\"e" + n + "\"}]}\n";
    } else {
      ASSERT_TRUE(h.w.submit("{\"n\":" + n + "}"));
      want += "{\"n\":" + n + "}\n";
    }
  }
  h.release();
  EXPECT_EQ(h.w.stats().records.load(), 17u);
  EXPECT_EQ(h.w.stats().dropped.load(), 1u);
  // The first alone (the queue held only it), then the 17 others as 8 + 8 + 1.
  EXPECT_EQ(h.w.stats().writes.load(), 4u);
  EXPECT_EQ(read_traces(cfg.dir), want);
}

// A disk that fills in the middle of a batch: the records that reached the file whole are kept
// and counted, the one cut is taken back, the rest are dropped and counted.  (A file-size limit
// stands in for the full disk: the write stops at it, then fails with EFBIG.)
TEST(TraceWriter, AFullDiskKeepsTheBatchsWholeRecordsAndDropsTheRest) {
  config::trace_config cfg;
  cfg.dir = test::temp_dir() + "/traces";
  held_writer h(cfg);
  std::vector<std::string> records;
  for (int i = 1; i <= 8; ++i) {
    records.push_back("{\"n\":" + std::to_string(i) + ",\"pad\":\"" + std::string(90, 'x') + "\"}");
    ASSERT_TRUE(h.w.submit(records.back()));
  }
  const std::size_t first = std::string("{\"n\":0}\n").size(), each = records[0].size() + 1;
  const auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  rlimit old{};
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &old), 0);
  rlimit small = old;
  small.rlim_cur = first + 2 * each + each / 2;  // two records and half of the third fit
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &small), 0);
  h.release();
  setrlimit(RLIMIT_FSIZE, &old);
  std::signal(SIGXFSZ, old_handler);
  EXPECT_EQ(h.w.stats().records.load(), 3u);  // the held first one and two of the batch
  EXPECT_EQ(h.w.stats().dropped.load(), 6u);
  EXPECT_EQ(read_traces(cfg.dir), "{\"n\":0}\n" + records[0] + "\n" + records[1] + "\n");
}

TEST(TraceWriter, ABatchStaysWithinItsBytesAndItsFile) {
  {  // records of 100 KiB: two to a write (a third would pass batch_bytes)
    config::trace_config cfg;
    cfg.dir = test::temp_dir() + "/traces";
    held_writer h(cfg);
    std::string want = "{\"n\":0}\n";
    for (int i = 1; i <= 8; ++i) {
      const auto r =
          "{\"n\":" + std::to_string(i) + ",\"pad\":\"" + std::string(100 << 10, 'x') + "\"}";
      ASSERT_TRUE(h.w.submit(r));
      want += r + "\n";
    }
    h.release();
    static_assert(trace_writer::batch_bytes / (100 << 10) == 2);
    EXPECT_EQ(h.w.stats().writes.load(), 1u + 4u);
    EXPECT_EQ(read_traces(cfg.dir), want);
  }
  {  // files of 4 KiB, records of ~1 KiB: a batch of 8 spans files, each holding whole records
    config::trace_config cfg;
    cfg.dir = test::temp_dir() + "/traces";
    cfg.max_file_bytes = 4096;
    held_writer h(cfg);
    std::string want = "{\"n\":0}\n";
    for (int i = 1; i <= 8; ++i) {
      const auto r = "{\"n\":" + std::to_string(i) + ",\"pad\":\"" + std::string(1000, 'y') + "\"}";
      ASSERT_TRUE(h.w.submit(r));
      want += r + "\n";
    }
    h.release();
    std::size_t files = 0;
    EXPECT_EQ(read_traces(cfg.dir, &files), want);  // in order, nothing lost or cut
    EXPECT_EQ(files, 2u);  // {0,1,2,3,4} {5,6,7,8}: 9 + 4 x 1,017 bytes, then 4 x 1,017
    for (const auto& e : std::filesystem::directory_iterator(cfg.dir))
      EXPECT_LE(std::filesystem::file_size(e.path()), cfg.max_file_bytes) << e.path();
    EXPECT_EQ(h.w.stats().writes.load(), 1u + 2u);
  }
}

TEST(TraceWriter, AFullQueueDropsAndCountsNeverBlocks) {
  config::trace_config cfg;
  cfg.dir = test::temp_dir();
  cfg.queue_records = 2;
  trace_writer w(cfg);
  std::uint64_t accepted = 0;
  for (int i = 0; i < 2000; ++i) accepted += w.submit("{\"v\":1}") ? 1 : 0;
  w.flush();
  EXPECT_EQ(w.stats().records.load() + w.stats().dropped.load(), 2000u);
  EXPECT_EQ(w.stats().records.load(), accepted);
  EXPECT_GT(w.stats().dropped.load(), 0u);
}

TEST(TraceWriter, UnwritableDirectoryDropsAndCounts) {
  const auto dir = test::temp_dir();
  std::ofstream(dir + "/file") << "x";
  config::trace_config cfg;
  cfg.dir = dir + "/file/sub";  // a directory below a regular file: cannot exist
  trace_writer w(cfg);
  EXPECT_TRUE(w.submit("{\"v\":1}"));
  w.flush();
  EXPECT_EQ(w.stats().records.load(), 0u);
  EXPECT_EQ(w.stats().dropped.load(), 1u);
  EXPECT_GE(w.stats().write_errors.load(), 1u);
}

}  // namespace
}  // namespace tokentap::hooks
