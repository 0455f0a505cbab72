#include <csignal>

#include "app/cli.hpp"

int main(int argc, char** argv) {
  // A client that disconnects must surface as EPIPE on the write, never kill the process.
  std::signal(SIGPIPE, SIG_IGN);
  // A full trace file system or a file-size limit makes write() fail (traces dropped and
  // counted) instead of killing the proxy.
  std::signal(SIGXFSZ, SIG_IGN);
  return tokentap::app::run(argc, argv);
}
