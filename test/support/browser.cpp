#include "test/support/browser.hpp"

#include <chrono>
#include <cstdio>

#include "test/support/tls_cert.hpp"

namespace tokentap::test {

std::string chromium_flags() {
  return "--headless --no-sandbox --disable-gpu --disable-quic --no-first-run "
         "--disable-background-networking "
         "--disable-component-update --disable-sync --disable-dev-shm-usage --user-data-dir=" +
         temp_dir() + " --window-size=1400,1200 --virtual-time-budget=5000 ";
}

std::string dump_dom(const std::string& url) {
  const std::string cmd = "chromium " + chromium_flags() + "--dump-dom " + url + " 2>/dev/null";
  const auto started = std::chrono::steady_clock::now();
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return {};
  std::string dom;
  char buf[4096];
  while (auto n = fread(buf, 1, sizeof buf, p)) dom.append(buf, n);
  if (pclose(p) != 0) return {};
  std::printf("chromium --dump-dom took %.1f s\n",
              std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  return dom;
}

}  // namespace tokentap::test
