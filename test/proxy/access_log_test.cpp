// The access log's line: who asked for what, where it went and how it ended, with what a client
// chose printed bounded and printable; nothing when `access_log` is off or info is not logged.
#include "proxy/access_log.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "base/log.hpp"
#include "proxy/proxy_server.hpp"
#include "test/support/tls_cert.hpp"

namespace tokentap::proxy {
namespace {

// What `f` wrote to stderr (the log's one write per line goes to descriptor 2).
template <class F>
std::string stderr_of(F f) {
  const auto path = test::temp_dir() + "/stderr";
  std::fflush(stderr);
  const int saved = ::dup(2);
  std::FILE* file = std::fopen(path.c_str(), "w");
  ::dup2(::fileno(file), 2);
  f();
  ::dup2(saved, 2);
  ::close(saved);
  std::fclose(file);
  std::ifstream in(path);
  std::stringstream out;
  out << in.rdbuf();
  return out.str();
}

struct logged_exchange {
  logged_exchange() {
    gen.cfg.access_log = true;
    gen.cfg.routes.push_back({"chat", "/v1", "main", 0});
    ex.gen = &gen;
    ex.route = &gen.cfg.routes[0];
    ex.method = "POST";
    ex.target_redacted = "/v1/chat/completions?key=[redacted]";
    ex.status = 200;
    ex.model = "my \"model\"";
    ex.stream_requested = true;
    ex.body_bytes = 1234;
    ex.start = clock::now();
    ex.first_byte = ex.start + std::chrono::milliseconds(5);
  }
  generation gen;
  exchange ex;
};

TEST(AccessLog, OneLineSaysWhoAskedForWhatAndHowItEnded) {
  base::log::set_level(base::log::level::info);
  logged_exchange l;
  const auto line = stderr_of([&] { write_access_log(l.ex, "10.0.0.7"); });
  EXPECT_NE(line.find(" info access peer=10.0.0.7 method=POST "
                      "path=/v1/chat/completions?key=[redacted] route=chat status=200 outcome=ok "
                      "model=my__model_ stream=1 ttfb_ms=5 dur_ms="),
            std::string::npos)
      << line;
  EXPECT_NE(line.find(" bytes=1234 conn=new\n"), std::string::npos) << line;
  EXPECT_EQ(std::count(line.begin(), line.end(), '\n'), 1) << line;
}

TEST(AccessLog, NothingWhenOffOrInfoIsNotLogged) {
  logged_exchange l;
  base::log::set_level(base::log::level::warn);
  EXPECT_EQ(stderr_of([&] { write_access_log(l.ex, "10.0.0.7"); }), "");
  base::log::set_level(base::log::level::info);
  l.gen.cfg.access_log = false;
  EXPECT_EQ(stderr_of([&] { write_access_log(l.ex, "10.0.0.7"); }), "");
}

}  // namespace
}  // namespace tokentap::proxy
