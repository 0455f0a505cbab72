// https:// upstreams: certificate verification on by default, a private CA, and the opt-out.
#include <gtest/gtest.h>

#include "test/support/http_client.hpp"
#include "test/support/stack.hpp"
#include "test/support/tls_cert.hpp"

namespace tokentap::test {
namespace {

struct tls_upstream {
  explicit tls_upstream(const std::string& cert_host) {
    files = make_self_signed(temp_dir(), cert_host);
    sim::server_options so;
    so.host = "127.0.0.1";
    so.port = 0;
    so.tls_cert = files.cert_path;
    so.tls_key = files.key_path;
    sim = std::make_unique<sim::server>(so);
    sim->start();
  }
  std::string url(const std::string& host) const {
    return "https://" + host + ":" + std::to_string(sim->endpoint().port());
  }
  cert_files files;
  std::unique_ptr<sim::server> sim;
};

request_options chat() {
  request_options o;
  o.body = chat_body(true, "over tls");
  o.headers = {{"x-sim-tokens", "10"}, {"x-sim-ttft-ms", "1"}, {"x-sim-itl-ms", "1"}};
  return o;
}

TEST(Tls, UntrustedCertificateIsRejectedByDefault) {
  tls_upstream up("localhost");
  auto cfg = test_config(up.url("localhost"));
  proxy::proxy_server p(cfg);
  p.start();
  const auto r = fetch(p.endpoint(), chat());
  EXPECT_EQ(r.status, 502);
  EXPECT_NE(r.body.find("upstream_tls_error"), std::string::npos) << r.body;
  EXPECT_NE(r.body.find("certificate verify failed"), std::string::npos) << r.body;
}

TEST(Tls, TrustedCaVerifiesAndStreamsByteExact) {
  tls_upstream up("localhost");
  auto cfg = test_config(up.url("localhost"));
  cfg.upstreams[0].ca_file = up.files.cert_path;
  proxy::proxy_server p(cfg);
  p.start();
  connection c(p.endpoint());
  const auto r1 = c.request(chat());
  ASSERT_TRUE(r1.complete) << r1.body;
  EXPECT_EQ(r1.status, 200);
  EXPECT_EQ(sse_data(r1.body).back(), "[DONE]");
  const auto r2 = c.request(chat());
  EXPECT_EQ(r2.body, r1.body);  // deterministic simulator: same request, same bytes
  EXPECT_EQ(p.stats().upstream_connects.value(), 1u);  // TLS connection kept alive and reused
  EXPECT_EQ(up.sim->stats().connections.load(), 1u);
}

TEST(Tls, HostNameMustMatchTheCertificate) {
  tls_upstream up("other.example");
  auto cfg = test_config(up.url("localhost"));
  cfg.upstreams[0].ca_file = up.files.cert_path;
  proxy::proxy_server p(cfg);
  p.start();
  const auto r = fetch(p.endpoint(), chat());
  EXPECT_EQ(r.status, 502);
  EXPECT_NE(r.body.find("upstream_tls_error"), std::string::npos) << r.body;
}

TEST(Tls, VerificationCanBeSwitchedOffExplicitly) {
  tls_upstream up("other.example");
  auto cfg = test_config(up.url("127.0.0.1"));
  cfg.upstreams[0].tls_verify = false;
  proxy::proxy_server p(cfg);
  p.start();
  const auto r = fetch(p.endpoint(), chat());
  EXPECT_EQ(r.status, 200);
  EXPECT_TRUE(r.complete);
}

}  // namespace
}  // namespace tokentap::test
