#include "app/cli.hpp"

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <optional>
#include <thread>

#include <boost/asio/signal_set.hpp>

#include "app/commands.hpp"
#include "base/log.hpp"
#include "config/config.hpp"
#include "config/url.hpp"
#include "hooks/hook.hpp"
#include "hooks/registry.hpp"
#include "net/net.hpp"
#include "proxy/cluster.hpp"
#include "proxy/process_metrics.hpp"
#include "tokentap/version.hpp"

namespace tokentap::app {

std::string allocator_name() {
  return proxy::allocator_name();
}

constexpr const char* main_help = R"(tokentap — a tracing reverse proxy for LLM inference endpoints

usage: tokentap <command> [flags]

commands:
  proxy          run the proxy in front of an inference API
  sim            run the simulated inference server (OpenAI + Anthropic compatible)
  demo           simulator + proxy + generated load, all in one process
  replay serve   answer requests with recorded responses, with their original timing
  replay send    re-issue recorded requests to a server, and compare its timing with the record
  analyze        summarize trace files
  bench run      send a workload to a server level by level and measure it as the proxy does
  bench compare  compare two runs: per metric the change, its 95 % interval and a verdict
  check-config   validate a YAML config file

Run 'tokentap <command> --help' for the flags of a command.  'tokentap --version' prints the version.
)";

bool want_help(const std::vector<std::string>& args) {
  for (const auto& a : args)
    if (a == "--help" || a == "-h") return true;
  return false;
}

config::host_port target_flag(const flags& f, std::string_view who) {
  const auto target = f.get("target");
  if (!target) throw usage_error{"--target URL is required"};
  std::string err;
  const auto u = config::parse_url(*target, err);
  if (!u) throw usage_error{"--target: " + err};
  if (u->tls) throw usage_error{"--target: https is not supported by " + std::string(who) + " yet"};
  return {u->host, u->port};
}

std::optional<std::pair<std::string, std::string>> header_flag(const flags& f) {
  const auto h = f.get("header");
  if (!h) return std::nullopt;
  const auto colon = h->find(':');
  if (colon == std::string::npos) throw usage_error{"--header must be \"Name: value\""};
  auto value = h->substr(colon + 1);
  while (!value.empty() && value.front() == ' ') value.erase(0, 1);
  return std::pair{h->substr(0, colon), value};
}

// Parses HOST:PORT for a flag, as a usage error on failure.
config::host_port address_flag(const flags& f, std::string_view name, config::host_port fallback) {
  auto v = f.get(name);
  if (!v) return fallback;
  std::string err;
  auto hp = config::parse_host_port(*v, err);
  if (!hp) throw usage_error{"--" + std::string(name) + ": " + err};
  return *hp;
}

void apply_log_level(const flags& f, std::string_view fallback) {
  const auto v = f.get("log-level").value_or(std::string(fallback));
  base::log::level l;
  if (!base::log::parse_level(v, l))
    throw usage_error{"--log-level must be debug, info, warn or error"};
  base::log::set_level(l);
}

// Runs until `wait_done` returns, handling SIGINT/SIGTERM meanwhile: the first signal (or the
// optional timeout) calls `on_first` (begin a graceful stop), a second one `on_second` (force).
// `wait_done` runs on its own thread and typically joins the servers' threads.
void run_until_stopped(const std::function<void()>& on_first,
                       const std::function<void()>& on_second,
                       const std::function<void()>& wait_done, std::optional<double> timeout_s,
                       const std::function<void()>& on_reload,
                       const std::function<void()>& on_ready) {
  asio::io_context ioc(1);
  auto guard = asio::make_work_guard(ioc);
  asio::signal_set signals(ioc, SIGINT, SIGTERM);
  asio::signal_set hangups(ioc);
  std::function<void(error_code, int)> on_hangup = [&](error_code ec, int) {
    if (ec) return;
    TT_LOG(info) << "SIGHUP: reloading the configuration";
    on_reload();
    hangups.async_wait(on_hangup);
  };
  if (on_reload) {
    hangups.add(SIGHUP);
    hangups.async_wait(on_hangup);
  }
  int count = 0;
  std::function<void(error_code, int)> on_signal = [&](error_code ec, int sig) {
    if (ec) return;
    if (++count == 1) {
      TT_LOG(info) << "signal " << sig << ": shutting down gracefully (again to force)";
      on_first();
    } else {
      TT_LOG(warn) << "second signal: closing all connections now";
      on_second();
    }
    signals.async_wait(on_signal);
  };
  signals.async_wait(on_signal);
  asio::steady_timer timer(ioc);
  if (timeout_s) {
    timer.expires_after(std::chrono::milliseconds(static_cast<long>(*timeout_s * 1000)));
    timer.async_wait([&](error_code ec) {
      if (!ec && count++ == 0) on_first();
    });
  }
  std::thread waiter([&] {
    wait_done();
    asio::post(ioc, [&] {
      error_code ignored;
      signals.cancel(ignored);
      hangups.cancel(ignored);
      timer.cancel();
      guard.reset();
    });
  });
  if (on_ready) on_ready();
  ioc.run();
  waiter.join();
}

int cmd_check_config(const std::vector<std::string>& args) {
  if (want_help(args))
    return std::cout << "usage: tokentap check-config FILE\n\n"
                        "Reads FILE as `tokentap proxy --config FILE` would (upstreams, routes, "
                        "hooks and\ntheir settings) and exits 0 when the proxy would start with "
                        "it, 2 with a one-line\nreason when it would not.\n",
           0;
  auto f = flags::parse("check-config", args, {}, {});
  if (f.positional().size() != 1) throw usage_error{"usage: tokentap check-config FILE"};
  const auto cfg = config::load_config_file(f.positional()[0]);
  try {
    hooks::builtin_hooks().check(cfg);
    proxy::check_balancing(cfg);
  } catch (const config::config_error& e) {
    throw config::config_error(f.positional()[0] + ": " + e.what());
  }
  std::cout << f.positional()[0] << ": ok (" << cfg.upstreams.size() << " upstream(s), "
            << cfg.routes.size() << " route(s))\n";
  return 0;
}

flags flags::parse(std::string_view command, const std::vector<std::string>& args,
                   std::vector<std::string_view> valued, std::vector<std::string_view> booleans) {
  flags f;
  f.command_ = command;
  auto is_in = [](const std::vector<std::string_view>& v, std::string_view s) {
    return std::find(v.begin(), v.end(), s) != v.end();
  };
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string_view a = args[i];
    if (!a.starts_with("--")) {
      f.positional_.emplace_back(a);
      continue;
    }
    a.remove_prefix(2);
    std::string name(a.substr(0, a.find('=')));
    std::optional<std::string> inline_value;
    if (a.find('=') != std::string_view::npos)
      inline_value = std::string(a.substr(a.find('=') + 1));
    if (is_in(booleans, name)) {
      if (inline_value) throw usage_error{"--" + name + " takes no value"};
      f.values_[name] = "1";
    } else if (is_in(valued, name)) {
      if (!inline_value) {
        if (i + 1 >= args.size()) throw usage_error{"--" + name + " needs a value"};
        inline_value = args[++i];
      }
      f.values_[name] = *inline_value;
    } else {
      throw usage_error{"unknown flag --" + name + " (see 'tokentap " + std::string(command) +
                        " --help')"};
    }
  }
  return f;
}

std::optional<std::string> flags::get(std::string_view name) const {
  auto it = values_.find(std::string(name));
  if (it == values_.end()) return std::nullopt;
  return it->second;
}

double flags::number(std::string_view name, double fallback, double min, double max) const {
  auto v = get(name);
  if (!v) return fallback;
  double d = 0;
  auto [p, ec] = std::from_chars(v->data(), v->data() + v->size(), d);
  if (ec != std::errc{} || p != v->data() + v->size() || d < min || d > max) {
    throw usage_error{"--" + std::string(name) + " must be a number between " +
                      std::to_string(static_cast<long long>(min)) + " and " +
                      std::to_string(static_cast<long long>(max))};
  }
  return d;
}

int run(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    std::cout << main_help;
    return args.empty() ? 2 : 0;
  }
  if (args[0] == "--version" || args[0] == "version") {
    std::cout << "tokentap " << version_string << "\nallocator: " << allocator_name();
    if (const auto settings = proxy::allocator_settings(); !settings.empty())
      std::cout << " (" << settings << ")";
    std::cout << "\n";
    return 0;
  }
  const std::string command = args[0];
  args.erase(args.begin());
  try {
    if (command == "proxy") return cmd_proxy(args);
    if (command == "sim") return cmd_sim(args);
    if (command == "demo") return cmd_demo(args);
    if (command == "check-config") return cmd_check_config(args);
    if (command == "replay") return cmd_replay(args);
    if (command == "analyze") return cmd_analyze(args);
    if (command == "bench") return cmd_bench(args);
    throw usage_error{"unknown command '" + command + "' (see 'tokentap --help')"};
  } catch (const usage_error& e) {
    std::fprintf(stderr, "tokentap %s: %s\n", command.c_str(), e.message.c_str());
    return 2;
  } catch (const config::config_error& e) {
    std::fprintf(stderr, "tokentap %s: config: %s\n", command.c_str(), e.what());
    return 2;
  } catch (const boost::system::system_error& e) {
    std::fprintf(stderr, "tokentap %s: %s\n", command.c_str(), e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tokentap %s: %s\n", command.c_str(), e.what());
    return 2;
  }
}

}  // namespace tokentap::app
