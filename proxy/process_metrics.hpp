#pragma once
// The series every Prometheus client library exports about its process, and the build's info:
// appended to /metrics by the admin endpoint.
#include <string>
#include <string_view>

namespace tokentap::proxy {

/// The allocator the process runs on: "jemalloc 5.3.0" or "libc malloc".
std::string allocator_name();

/// How jemalloc gives memory back, as it runs (its settings, the environment's MALLOC_CONF
/// over the binary's): "background_thread:true,dirty_decay_ms:1000"; empty on another allocator.
std::string allocator_settings();

/// Appends, in text format 0.0.4: `tokentap_build_info{version,allocator} 1` and the standard
/// process series — process_cpu_seconds_total, process_resident_memory_bytes,
/// process_virtual_memory_bytes, process_open_fds, process_max_fds, process_start_time_seconds,
/// process_threads — read from /proc/self (Linux).  A value that cannot be read is left out.
void append_process_metrics(std::string& out, std::string_view version);

}  // namespace tokentap::proxy
