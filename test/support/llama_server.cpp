#include "test/support/llama_server.hpp"

#include <signal.h>

#include <chrono>
#include <exception>
#include <filesystem>
#include <fstream>

#include "test/support/http_client.hpp"
#include "test/support/ports.hpp"
#include "test/support/tls_cert.hpp"

namespace tokentap::test {

namespace fs = std::filesystem;

std::string llama_server::folder() {
  return std::string(TOKENTAP_SOURCE_DIR) + "/../shared/engines/llama.cpp";
}

bool llama_server::available() {
  std::error_code ec;
  return fs::exists(folder() + "/llama-server", ec) && fs::exists(folder() + "/tiny.gguf", ec);
}

namespace {

// The engine's folder laid out in `dir` as symbolic links, the libraries' version links
// included: a copy of the folder may hold each of those as a small file naming its target
// ("libllama.so.0" containing "libllama.so.0.0.0") where the original was a symbolic link.
void lay_out(const std::string& from, const std::string& dir) {
  for (const auto& e : fs::directory_iterator(from)) {
    const auto name = e.path().filename().string();
    const auto to = fs::path(dir) / name;
    std::error_code ec;
    if (!e.is_symlink() && e.is_regular_file() && e.file_size() < 256 &&
        name.find(".so") != std::string::npos) {
      std::ifstream in(e.path());
      std::string target;
      std::getline(in, target);
      if (!target.empty() && target.find('/') == std::string::npos &&
          fs::exists(fs::path(from) / target)) {
        fs::create_symlink(target, to, ec);
        continue;
      }
    }
    fs::create_symlink(fs::absolute(e.path()), to, ec);
  }
}

}  // namespace

llama_server::llama_server(std::vector<std::string> extra) {
  dir_ = temp_dir() + "/llama.cpp";
  fs::create_directories(dir_);
  lay_out(folder(), dir_);
  port_ = free_loopback_port();
  std::vector<std::string> args = {"-m",     dir_ + "/tiny.gguf",   "--host", "127.0.0.1",
                                   "--port", std::to_string(port_), "-c",     "2048"};
  args.insert(args.end(), extra.begin(), extra.end());
  proc_ = std::make_unique<process>(
      program{dir_ + "/llama-server"}, args,
      std::vector<std::pair<std::string, std::string>>{{"LD_LIBRARY_PATH", dir_}});
  request_options health;
  health.method = "GET";
  health.target = "/health";
  health.timeout = std::chrono::milliseconds(1000);
  const tcp::endpoint ep(boost::asio::ip::make_address("127.0.0.1"), port_);
  // Up to 30 s for the model to load; an engine that exited (e.g. built for another CPU) ends
  // the wait with its exit status.  Until it listens a connect is refused (fetch throws).
  for (int i = 0; i < 300 && !ok_; ++i) {
    exit_status_ = proc_->wait(std::chrono::milliseconds(100));
    if (exit_status_ >= 0) break;
    try {
      ok_ = fetch(ep, health).status == 200;
    } catch (const std::exception&) {
    }
  }
}

llama_server::~llama_server() {
  if (proc_) {
    proc_->signal(SIGTERM);
    if (proc_->wait(std::chrono::seconds(5)) < 0) proc_->signal(SIGKILL);
  }
}

std::string llama_server::log() {
  return proc_ ? proc_->err() : std::string();
}

}  // namespace tokentap::test
