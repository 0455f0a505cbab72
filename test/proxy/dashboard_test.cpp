// The dashboard page as the admin site serves it: one self-contained HTML document (it opens
// where the proxy has no internet: no script, style, font or image from elsewhere), that reads
// only /api/stats, and whose script finds every element it looks up.  (How it draws live data is
// checked in headless Chromium by the integration tests.)
#include <gtest/gtest.h>

#include <regex>
#include <set>
#include <string>

#include "proxy/admin.hpp"

namespace tokentap::proxy::admin {
namespace {

std::set<std::string> matches(const std::string& text, const std::regex& re) {
  std::set<std::string> out;
  for (std::sregex_iterator it(text.begin(), text.end(), re), end; it != end; ++it)
    out.insert((*it)[1].str());
  return out;
}

TEST(Dashboard, IsOneSelfContainedDocument) {
  const std::string page(dashboard_html());
  EXPECT_EQ(page.rfind("<!doctype html>", 0), 0u);
  EXPECT_NE(page.find("</html>"), std::string::npos);
  EXPECT_NE(page.find("<meta charset=\"utf-8\">"), std::string::npos);
  for (const char* external : {"http://", "https://", "src=", "@import", "url(", "<link"})
    EXPECT_EQ(page.find(external), std::string::npos) << external;
}

TEST(Dashboard, ReadsOnlyTheStatsApi) {
  const std::string page(dashboard_html());
  EXPECT_EQ(matches(page, std::regex(R"re(fetch\("([^"]*)")re")),
            (std::set<std::string>{"/api/stats"}));
}

TEST(Dashboard, EveryElementTheScriptLooksUpIsOnThePage) {
  const std::string page(dashboard_html());
  const auto looked_up = matches(page, std::regex(R"re(\$\("([A-Za-z0-9_-]+)"\))re"));
  const auto ids = matches(page, std::regex(R"re(id="([A-Za-z0-9_-]+)")re"));
  ASSERT_GE(looked_up.size(), 20u);
  for (const auto& id : looked_up) EXPECT_TRUE(ids.count(id)) << "no element with id " << id;
}

}  // namespace
}  // namespace tokentap::proxy::admin
