#pragma once
// Debian's Chromium, headless, on a page of the proxy's admin port.
#include <string>

namespace tokentap::test {

/// Chromium's flags for the tests: headless, no network beyond the page, a fresh profile, a
/// 1400×1200 window and 5 s of virtual time for the page's scripts.
std::string chromium_flags();

/// The DOM of `url` after its scripts ran (chromium --dump-dom); "" when Chromium failed.
std::string dump_dom(const std::string& url);

}  // namespace tokentap::test
