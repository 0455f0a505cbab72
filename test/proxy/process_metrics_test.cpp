// The process series every Prometheus client exports, read from /proc/self: each one present with
// its HELP and TYPE, and each one moving with what it measures (descriptors opened, a thread
// started, memory touched, CPU spent); the build info's labels escaped.
#include "proxy/process_metrics.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <ctime>
#include <string>
#include <thread>
#include <vector>

#include "test/support/metrics_text.hpp"

namespace tokentap::proxy {
namespace {

using test::series_value;

std::string scrape() {
  std::string out;
  append_process_metrics(out, "test");
  return out;
}

TEST(ProcessMetrics, EverySeriesIsThereWithItsHelpAndType) {
  const auto text = scrape();
  for (const std::string name :
       {"process_cpu_seconds_total", "process_resident_memory_bytes",
        "process_virtual_memory_bytes", "process_open_fds", "process_max_fds",
        "process_start_time_seconds", "process_threads"}) {
    EXPECT_NE(text.find("# HELP " + name + " "), std::string::npos) << name;
    EXPECT_NE(text.find("# TYPE " + name + " "), std::string::npos) << name;
    // (A process this young may not have spent a whole clock tick yet.)
    if (name == "process_cpu_seconds_total")
      EXPECT_GE(series_value(text, name), 0) << text;
    else
      EXPECT_GT(series_value(text, name), 0) << name << "\n" << text;
  }
  EXPECT_NE(text.find("# TYPE process_cpu_seconds_total counter\n"), std::string::npos);
  const double start = series_value(text, "process_start_time_seconds");
  const double now = static_cast<double>(std::time(nullptr));
  EXPECT_LE(start, now + 1);
  EXPECT_GT(start, now - 24 * 3600);  // this test process started today
}

TEST(ProcessMetrics, TheBuildInfoNamesTheAllocatorWithItsLabelsEscaped) {
  std::string out;
  append_process_metrics(out, "1.0 \"rc\"\\x");
  EXPECT_NE(out.find("tokentap_build_info{version=\"1.0 \\\"rc\\\"\\\\x\",allocator=\"" +
                     allocator_name() + "\"} 1\n"),
            std::string::npos)
      << out;
  const auto a = allocator_name();
  EXPECT_TRUE(a == "libc malloc" || a.starts_with("jemalloc ")) << a;
}

TEST(ProcessMetrics, TheSeriesMoveWithWhatTheyMeasure) {
  const auto before = scrape();
  // Three more descriptors, one more thread, 64 MiB touched, ~200 ms of CPU.
  std::vector<int> fds;
  for (int i = 0; i < 3; ++i) fds.push_back(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  std::atomic<bool> stop{false};
  std::thread idle([&] {
    while (!stop) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  });
  std::vector<char> memory(64u << 20);
  for (std::size_t i = 0; i < memory.size(); i += 4096) memory[i] = 1;
  const auto cpu_start = std::clock();
  volatile std::uint64_t spin = 0;
  while (std::clock() - cpu_start < CLOCKS_PER_SEC / 5) spin = spin + 1;
  const auto after = scrape();
  stop = true;
  idle.join();
  for (int fd : fds) ::close(fd);

  EXPECT_EQ(series_value(after, "process_open_fds") - series_value(before, "process_open_fds"), 3);
  EXPECT_EQ(series_value(after, "process_threads") - series_value(before, "process_threads"), 1);
  EXPECT_GE(series_value(after, "process_resident_memory_bytes") -
                series_value(before, "process_resident_memory_bytes"),
            48u << 20);
  EXPECT_GE(series_value(after, "process_cpu_seconds_total") -
                series_value(before, "process_cpu_seconds_total"),
            0.15);
  EXPECT_EQ(memory[4096], 1);
}

}  // namespace
}  // namespace tokentap::proxy
