#include "proxy/process_metrics.hpp"

#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

// jemalloc's control interface: present when the binary is linked with jemalloc (CMakeLists.txt)
// or it is preloaded, null otherwise (a weak reference; jemalloc's header is not needed).
extern "C" int mallctl(const char* name, void* oldp, std::size_t* oldlenp, void* newp,
                       std::size_t newlen) __attribute__((weak));

namespace tokentap::proxy {

std::string allocator_name() {
  const char* v = nullptr;
  std::size_t n = sizeof v;
  if (mallctl != nullptr && mallctl("version", static_cast<void*>(&v), &n, nullptr, 0) == 0 &&
      v != nullptr) {
    const std::string_view version(v);
    return "jemalloc " + std::string(version.substr(0, version.find('-')));
  }
  return "libc malloc";
}

std::string allocator_settings() {
  if (mallctl == nullptr) return "";
  bool background = false;
  std::size_t n = sizeof background;
  if (mallctl("opt.background_thread", &background, &n, nullptr, 0) != 0) return "";
  ssize_t decay = 0;
  n = sizeof decay;
  if (mallctl("opt.dirty_decay_ms", &decay, &n, nullptr, 0) != 0) return "";
  return std::string("background_thread:") + (background ? "true" : "false") +
         ",dirty_decay_ms:" + std::to_string(decay);
}

namespace {

void write_series(std::string& out, const char* name, const char* type, const char* help,
                  double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n" +
         name + " " + buf + "\n";
}

// A label value as the text format wants it: backslash, quote and newline escaped.
std::string label_value(std::string_view v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"')
      out += '\\', out += c;
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

}  // namespace

void append_process_metrics(std::string& out, std::string_view version) {
  const auto allocator = allocator_name();
  out +=
      "# HELP tokentap_build_info The running build: its version and allocator\n"
      "# TYPE tokentap_build_info gauge\ntokentap_build_info{version=\"" +
      label_value(version) + "\",allocator=\"" + label_value(allocator) + "\"} 1\n";

  // /proc/self/stat: the fields after the command's closing parenthesis (proc(5)).
  std::ifstream stat_file("/proc/self/stat");
  std::string stat((std::istreambuf_iterator<char>(stat_file)), std::istreambuf_iterator<char>());
  const auto paren = stat.rfind(')');
  const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  const double page = static_cast<double>(sysconf(_SC_PAGESIZE));
  if (paren != std::string::npos && ticks > 0) {
    std::istringstream in(stat.substr(paren + 2));
    std::string f[24];  // fields 3 .. 26
    for (auto& x : f) in >> x;
    if (in) {
      // Field N of proc(5) is f[N - 3]: utime 14, stime 15, num_threads 20, starttime 22,
      // vsize 23, rss 24.
      const auto field = [&](int n) { return std::strtod(f[n - 3].c_str(), nullptr); };
      const double utime = field(14), stime = field(15), threads = field(20),
                   start_ticks = field(22), vsize = field(23), rss_pages = field(24);
      write_series(out, "process_cpu_seconds_total", "counter",
                   "Total user and system CPU time spent in seconds.", (utime + stime) / ticks);
      write_series(out, "process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.",
                   vsize);
      write_series(out, "process_resident_memory_bytes", "gauge", "Resident memory size in bytes.",
                   rss_pages * page);
      write_series(out, "process_threads", "gauge", "Number of OS threads in the process.",
                   threads);
      // The start time: boot time (/proc/stat btime) + start ticks since boot.
      std::ifstream proc_stat("/proc/stat");
      for (std::string line; std::getline(proc_stat, line);) {
        if (line.rfind("btime ", 0) == 0) {
          write_series(out, "process_start_time_seconds", "gauge",
                       "Start time of the process since unix epoch in seconds.",
                       std::strtod(line.c_str() + 6, nullptr) + start_ticks / ticks);
          break;
        }
      }
    }
  }
  std::error_code ec;
  std::size_t fds = 0;
  for (std::filesystem::directory_iterator it("/proc/self/fd", ec), end; !ec && it != end;
       it.increment(ec))
    ++fds;
  if (!ec)
    write_series(out, "process_open_fds", "gauge", "Number of open file descriptors.", double(fds));
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) == 0)
    write_series(out, "process_max_fds", "gauge", "Maximum number of open file descriptors.",
                 static_cast<double>(lim.rlim_cur));
}

}  // namespace tokentap::proxy
