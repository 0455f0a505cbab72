// The proxy server's generations: a reload publishes a new one for new requests while holders of
// the old one keep it whole; an endpoint named again keeps its identity (and its pooled
// connections), one no longer named is retired; a reload that needs a restart or does not
// validate is refused with its reason and changes nothing; the configuration source's errors
// are a refusal's reason; bad TLS settings fail construction with one line.
#include "proxy/proxy_server.hpp"

#include <gtest/gtest.h>

#include <memory>

#include "proxy/cluster.hpp"
#include "test/proxy/loopback_proxy.hpp"

namespace tokentap::proxy {
namespace {

using namespace std::chrono_literals;

config::config two_endpoints(const std::string& a, const std::string& b) {
  auto cfg = test::loopback_config(a);
  std::string err;
  cfg.upstreams.front().endpoints.push_back(*config::parse_url(b, err));
  config::validate(cfg);
  return cfg;
}

TEST(ProxyServer, AReloadPublishesANewGenerationAndKeepsWhatItNamesAgain) {
  test::loopback_proxy r(two_endpoints("http://127.0.0.1:1", "http://127.0.0.1:2"));
  const auto first = r.server->current();
  EXPECT_EQ(first->number, 1u);
  const auto& old_eps = first->clusters.at(0)->endpoints();
  const auto kept_id = old_eps.at(0)->id;

  const auto res = r.server->reload(two_endpoints("http://127.0.0.1:1", "http://127.0.0.1:3"));
  ASSERT_TRUE(res.applied) << res.reason;
  EXPECT_EQ(res.generation, 2u);
  const auto second = r.server->current();
  EXPECT_EQ(second->number, 2u);
  const auto& new_eps = second->clusters.at(0)->endpoints();
  EXPECT_EQ(new_eps.at(0)->id, kept_id);            // 127.0.0.1:1, named again
  EXPECT_NE(new_eps.at(1)->id, old_eps.at(1)->id);  // :3 is new
  EXPECT_FALSE(old_eps.at(0)->retired.load());
  EXPECT_TRUE(old_eps.at(1)->retired.load());  // :2 is no longer named
  // Whoever holds the first generation (an exchange in flight) still has it whole.
  EXPECT_EQ(first->clusters.at(0)->endpoints().at(1)->label, "127.0.0.1:2");
  EXPECT_EQ(&r.server->cfg(), &second->cfg);
}

TEST(ProxyServer, AReloadThatNeedsARestartOrDoesNotValidateIsRefusedAndChangesNothing) {
  test::loopback_proxy r(two_endpoints("http://127.0.0.1:1", "http://127.0.0.1:2"));
  auto more_threads = two_endpoints("http://127.0.0.1:1", "http://127.0.0.1:2");
  more_threads.threads = 2;
  auto res = r.server->reload(more_threads);
  EXPECT_FALSE(res.applied);
  EXPECT_EQ(res.generation, 1u);
  EXPECT_NE(res.reason.find("need a restart: threads"), std::string::npos) << res.reason;

  auto dangling = two_endpoints("http://127.0.0.1:1", "http://127.0.0.1:2");
  dangling.routes.front().upstream = "nowhere";
  res = r.server->reload(dangling);
  EXPECT_FALSE(res.applied);
  EXPECT_NE(res.reason.find("nowhere"), std::string::npos) << res.reason;
  EXPECT_EQ(r.server->current()->number, 1u);
  EXPECT_EQ(r.server->cfg().routes.front().upstream, "default");
}

TEST(ProxyServer, TheConfigurationSourcesErrorIsTheRefusalsReason) {
  proxy_server s(two_endpoints("http://127.0.0.1:1", "http://127.0.0.1:2"));
  auto res = s.reload_from_source();
  EXPECT_FALSE(res.applied);
  EXPECT_EQ(res.reason, "this proxy has no configuration file to read again");
  bool broken = true;
  s.set_config_source([&] {
    if (broken) throw config::config_error("proxy.yaml: line 3: unknown key 'listn'");
    return two_endpoints("http://127.0.0.1:1", "http://127.0.0.1:4");
  });
  s.start();
  res = s.reload_from_source();
  EXPECT_FALSE(res.applied);
  EXPECT_EQ(res.reason, "proxy.yaml: line 3: unknown key 'listn'");
  broken = false;
  res = s.reload_from_source();
  EXPECT_TRUE(res.applied) << res.reason;
  EXPECT_EQ(s.current()->clusters.at(0)->endpoints().at(1)->label, "127.0.0.1:4");
  s.shutdown(0ms);
  s.join();
}

TEST(ProxyServer, BadTlsSettingsFailConstructionWithOneLine) {
  auto cfg = two_endpoints("https://127.0.0.1:1", "https://127.0.0.1:2");
  cfg.upstreams.front().ca_file = "/nonexistent/ca.pem";
  try {
    proxy_server s(cfg);
    FAIL() << "constructed";
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("/nonexistent/ca.pem"), std::string::npos) << what;
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
  }
}

}  // namespace
}  // namespace tokentap::proxy
