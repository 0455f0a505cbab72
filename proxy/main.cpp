#include <csignal>

#include "proxy/cli.hpp"

int main(int argc, char** argv) {
  // A client that disconnects must surface as EPIPE on the write, never kill the process.
  std::signal(SIGPIPE, SIG_IGN);
  return tokentap::cli::run(argc, argv);
}
