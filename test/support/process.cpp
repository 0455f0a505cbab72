#include "test/support/process.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <stdexcept>
#include <thread>

#include "test/support/ports.hpp"

extern char** environ;

namespace tokentap::test {

std::string tokentap_binary() {
  return TOKENTAP_BINARY;
}

process::process(std::vector<std::string> args,
                 const std::vector<std::pair<std::string, std::string>>& env)
    : process(program{tokentap_binary()}, std::move(args), env) {}

process::process(const program& p, std::vector<std::string> args,
                 const std::vector<std::pair<std::string, std::string>>& env) {
  args.insert(args.begin(), p.name);
  int out[2], err[2];
  if (pipe(out) || pipe(err)) throw std::runtime_error("pipe failed");
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, out[1], 1);
  posix_spawn_file_actions_adddup2(&fa, err[1], 2);
  posix_spawn_file_actions_addclose(&fa, out[0]);
  posix_spawn_file_actions_addclose(&fa, err[0]);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  // This process's environment, with `env` set over it.
  std::vector<std::string> vars;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string_view v(*e);
    bool replaced = false;
    for (const auto& [name, _] : env) replaced = replaced || v.starts_with(name + "=");
    if (!replaced) vars.emplace_back(v);
  }
  for (const auto& [name, value] : env) vars.push_back(name + "=" + value);
  std::vector<char*> envp;
  for (auto& v : vars) envp.push_back(v.data());
  envp.push_back(nullptr);
  if (posix_spawnp(&pid_, argv[0], &fa, nullptr, argv.data(), envp.data()) != 0)
    throw std::runtime_error("cannot start " + args[0]);
  posix_spawn_file_actions_destroy(&fa);
  close(out[1]);
  close(err[1]);
  out_fd_ = out[0];
  err_fd_ = err[0];
  fcntl(out_fd_, F_SETFL, O_NONBLOCK);
  fcntl(err_fd_, F_SETFL, O_NONBLOCK);
}

process::~process() {
  if (!exited_ && pid_ > 0) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  if (out_fd_ >= 0) close(out_fd_);
  if (err_fd_ >= 0) close(err_fd_);
}

void process::drain(int fd, std::string& into, int timeout_ms) {
  pollfd p{fd, POLLIN, 0};
  if (poll(&p, 1, timeout_ms) <= 0) return;
  char buf[4096];
  for (;;) {
    const auto n = read(fd, buf, sizeof buf);
    if (n <= 0) return;
    into.append(buf, static_cast<std::size_t>(n));
  }
}

std::string process::wait_for_line(const std::string& prefix, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    for (;;) {
      const auto nl = out_.find('\n', consumed_);
      if (nl == std::string::npos) break;
      std::string line = out_.substr(consumed_, nl - consumed_);
      consumed_ = nl + 1;
      if (line.rfind(prefix, 0) == 0) return line;
    }
    drain(out_fd_, out_, 20);
    drain(err_fd_, err_, 0);
  }
  return {};
}

void process::signal(int sig) {
  if (!exited_) kill(pid_, sig);
}

int process::wait(std::chrono::milliseconds timeout) {
  if (exited_) return exit_status_;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  int status = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    drain(out_fd_, out_, 0);
    drain(err_fd_, err_, 0);
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      exited_ = true;
      drain(out_fd_, out_, 50);
      drain(err_fd_, err_, 50);
      exit_status_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      return exit_status_;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return -1;
}

std::string process::out() {
  drain(out_fd_, out_, 0);
  return out_;
}

std::string process::err() {
  drain(err_fd_, err_, 0);
  return err_;
}

run_result run(std::vector<std::string> args, std::chrono::milliseconds timeout) {
  process p(std::move(args));
  const int status = p.wait(timeout);
  return {status, p.out(), p.err()};
}

proxy_process::proxy_process(std::vector<std::string> args)
    : proc([&] {
        args.insert(args.begin(), "proxy");
        return args;
      }()) {
  const auto line = proc.wait_for_line("ready ", std::chrono::seconds(10));
  proxy = ready_address(line, "proxy");
  admin = ready_address(line, "admin");
}

}  // namespace tokentap::test
