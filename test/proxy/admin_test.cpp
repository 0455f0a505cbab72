// The admin site on a real runtime and socket: the token guards every endpoint but the probes',
// as a bearer token or a browser's Basic password; the handlers answer by exact path, query
// aside; slow handlers run off the I/O threads and only with a token configured.
#include "proxy/admin.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>

#include "base/json.hpp"
#include "test/support/http_client.hpp"

namespace tokentap::proxy::admin {
namespace {

using namespace std::chrono_literals;

std::string basic(const std::string& user_pass) {
  std::string quoted;
  base::json::append_base64(quoted, user_pass);
  return "Basic " + quoted.substr(1, quoted.size() - 2);
}

TEST(Admin, AuthorizedTakesTheTokenAsBearerOrAsABasicPassword) {
  EXPECT_TRUE(authorized("", ""));  // no token configured: open
  EXPECT_TRUE(authorized("Bearer s3cret", "s3cret"));
  EXPECT_TRUE(authorized("  bearer s3cret  ", "s3cret"));
  EXPECT_TRUE(authorized(basic("admin:s3cret"), "s3cret"));
  EXPECT_TRUE(authorized(basic(":s3cret"), "s3cret"));  // any user name
  EXPECT_FALSE(authorized("", "s3cret"));
  EXPECT_FALSE(authorized("Bearer s3cre", "s3cret"));
  EXPECT_FALSE(authorized("Bearer s3cretX", "s3cret"));
  EXPECT_FALSE(authorized("s3cret", "s3cret"));
  EXPECT_FALSE(authorized("Token s3cret", "s3cret"));
  EXPECT_FALSE(authorized(basic("s3cret"), "s3cret"));  // no colon: no password
  EXPECT_FALSE(authorized(basic("admin:wrong"), "s3cret"));
  EXPECT_FALSE(authorized("Basic " + std::string(5000, 'A'), "s3cret"));
}

struct admin_server {
  explicit admin_server(std::shared_ptr<site> s) : runtime(1) {
    ep = runtime.listen(
        "127.0.0.1", 0,
        [s](tcp_socket socket, net::worker& w) { start_admin_session(std::move(socket), w, s); },
        100, net::listener_role::control);
    runtime.start();
  }
  ~admin_server() {
    runtime.shutdown(0ms);
    runtime.join();
  }
  test::response get(const std::string& target, const std::string& authorization = "",
                     const std::string& method = "GET") {
    test::request_options o;
    o.method = method;
    o.target = target;
    if (!authorization.empty()) o.headers.emplace_back("Authorization", authorization);
    return test::fetch(ep, o);
  }
  net::server_runtime runtime;
  tcp::endpoint ep;
};

std::shared_ptr<site> echo_site(std::string token) {
  auto s = std::make_shared<site>();
  s->bearer_token = std::move(token);
  const auto echo = [](std::string_view method, std::string_view target) {
    return response{200, "text/plain", std::string(method) + " " + std::string(target)};
  };
  s->handlers.emplace("/x", echo);
  s->handlers.emplace("/healthz", echo);
  return s;
}

TEST(Admin, TheTokenGuardsEveryEndpointButTheProbes) {
  admin_server a(echo_site("s3cret"));
  const auto refused = a.get("/x");
  EXPECT_EQ(refused.status, 401u);
  EXPECT_NE(refused.headers.count("www-authenticate"), 0u);
  EXPECT_NE(refused.body.find("\"unauthorized\""), std::string::npos) << refused.body;
  EXPECT_EQ(a.get("/x", "Bearer wrong").status, 401u);
  const auto ok = a.get("/x?window=60", "Bearer s3cret");
  EXPECT_EQ(ok.status, 200u);
  EXPECT_EQ(ok.body, "GET /x?window=60");  // the handler sees the query
  EXPECT_EQ(ok.headers.at("content-type"), "text/plain");
  EXPECT_EQ(ok.headers.at("cache-control"), "no-store");
  EXPECT_EQ(a.get("/x", basic("me:s3cret")).status, 200u);
  EXPECT_EQ(a.get("/healthz").status, 200u);  // probes carry no credentials
  // An unknown path is a 404 with a JSON reason, once authorized (no path is revealed before).
  const auto missing = a.get("/nothing", "Bearer s3cret");
  EXPECT_EQ(missing.status, 404u);
  EXPECT_NE(missing.body.find("\"not_found\""), std::string::npos) << missing.body;
  EXPECT_EQ(a.get("/nothing").status, 401u);
}

TEST(Admin, WithoutATokenEveryEndpointIsOpen) {
  admin_server a(echo_site(""));
  EXPECT_EQ(a.get("/x", "", "POST").body, "POST /x");
}

TEST(Admin, SlowHandlersRunOffTheIoThreadsAndOnlyWithAToken) {
  boost::asio::thread_pool pool(1);
  std::atomic<bool> on_pool{false};
  auto s = echo_site("s3cret");
  s->slow_pool = &pool;
  s->slow_handlers.emplace("/admin/reload", [&](std::string_view method, std::string_view) {
    on_pool = pool.get_executor().running_in_this_thread();
    return response{200, "application/json", "{\"ran\":\"" + std::string(method) + "\"}"};
  });
  {
    admin_server a(s);
    EXPECT_EQ(a.get("/admin/reload", "", "POST").status, 401u);
    const auto r = a.get("/admin/reload", "Bearer s3cret", "POST");
    EXPECT_EQ(r.status, 200u);
    EXPECT_EQ(r.body, "{\"ran\":\"POST\"}");
    EXPECT_TRUE(on_pool.load());
  }
  // Without a token a slow endpoint is refused outright (it changes what the proxy runs).
  auto open = echo_site("");
  open->slow_pool = &pool;
  open->slow_handlers = s->slow_handlers;
  admin_server a(open);
  const auto r = a.get("/admin/reload", "", "POST");
  EXPECT_EQ(r.status, 403u);
  EXPECT_NE(r.body.find("admin token"), std::string::npos) << r.body;
  pool.join();
}

}  // namespace
}  // namespace tokentap::proxy::admin
