#pragma once
// The subcommands and what they share, private to app/: cli.cpp parses flags and dispatches, and
// each family of subcommands has a file of its own (cmd_proxy.cpp, cmd_sim.cpp for sim and demo,
// cmd_replay.cpp for replay and analyze, cmd_bench.cpp for bench), so that they compile side by
// side.
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "app/cli.hpp"
#include "config/config.hpp"

namespace tokentap::app {

int cmd_check_config(const std::vector<std::string>& args);
int cmd_proxy(const std::vector<std::string>& args);
int cmd_sim(const std::vector<std::string>& args);
int cmd_demo(const std::vector<std::string>& args);
int cmd_replay(const std::vector<std::string>& args);
int cmd_analyze(const std::vector<std::string>& args);
int cmd_bench(const std::vector<std::string>& args);

/// `--help` or `-h` among the arguments.
bool want_help(const std::vector<std::string>& args);
/// A HOST:PORT flag, or `fallback` when absent; a usage error when malformed.
config::host_port address_flag(const flags& f, std::string_view name, config::host_port fallback);
/// `--target URL`: a plain-HTTP server under test (https refused: `who` does not speak TLS yet);
/// a usage error when absent or malformed.
config::host_port target_flag(const flags& f, std::string_view who);
/// `--header "Name: value"`, when given: the header to add to every request.
std::optional<std::pair<std::string, std::string>> header_flag(const flags& f);
/// Sets the log level from `--log-level` (or `fallback`).
void apply_log_level(const flags& f, std::string_view fallback);
/// Runs until `wait_done` returns, handling SIGINT/SIGTERM meanwhile: the first signal (or the
/// optional timeout) calls `on_first` (begin a graceful stop), a second one `on_second` (force).
/// `wait_done` runs on its own thread and typically joins the servers' threads.  With
/// `on_reload`, SIGHUP calls it.  `on_ready` runs once the signals are handled (the place to say
/// "ready": a signal sent after it is never the default action).
void run_until_stopped(const std::function<void()>& on_first,
                       const std::function<void()>& on_second,
                       const std::function<void()>& wait_done,
                       std::optional<double> timeout_s = std::nullopt,
                       const std::function<void()>& on_reload = {},
                       const std::function<void()>& on_ready = {});
/// The allocator the binary runs on (jemalloc with its version, or the C library's).
std::string allocator_name();

}  // namespace tokentap::app
