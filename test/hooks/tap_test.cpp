// What the tap interface defines for every hook: the outcome names the trace and the metrics
// use, which exchanges count as the upstream's failure, and a header looked up by name.
#include "hooks/tap.hpp"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

namespace tokentap::hooks {
namespace {

TEST(Tap, EveryOutcomeHasItsOwnName) {
  std::set<std::string_view> names;
  for (const auto o :
       {stream_outcome::ok, stream_outcome::client_disconnect, stream_outcome::upstream_error,
        stream_outcome::upstream_reset, stream_outcome::timeout, stream_outcome::stream_error,
        stream_outcome::rejected})
    EXPECT_TRUE(names.insert(to_string(o)).second) << to_string(o);
  EXPECT_EQ(to_string(stream_outcome::client_disconnect), "client_disconnect");
  EXPECT_EQ(names.count("unknown"), 0u);
}

TEST(Tap, TheUpstreamFailedOn5xx429AndItsOwnBreakagesNotOnTheClientsOrOurRefusals) {
  EXPECT_TRUE(upstream_failed(500, stream_outcome::ok));
  EXPECT_TRUE(upstream_failed(429, stream_outcome::ok));
  EXPECT_TRUE(upstream_failed(200, stream_outcome::upstream_reset));
  EXPECT_TRUE(upstream_failed(200, stream_outcome::timeout));
  EXPECT_TRUE(upstream_failed(200, stream_outcome::stream_error));
  EXPECT_TRUE(upstream_failed(0, stream_outcome::upstream_error));
  EXPECT_FALSE(upstream_failed(200, stream_outcome::ok));
  EXPECT_FALSE(upstream_failed(404, stream_outcome::ok));
  EXPECT_FALSE(upstream_failed(200, stream_outcome::client_disconnect));
  EXPECT_FALSE(upstream_failed(403, stream_outcome::rejected));
}

TEST(Tap, AHeaderIsFoundByItsNameInAnyCase) {
  const std::vector<header_view> headers = {
      {"Content-Type", "text/event-stream"}, {"X-Queue-Time", "12"}, {"x_tenant", "a"}};
  EXPECT_EQ(find_header(headers, "content-type"), "text/event-stream");
  EXPECT_EQ(find_header(headers, "x-queue-time"), "12");
  EXPECT_EQ(find_header(headers, "x_tenant"), "a");  // '_' is a name character too
  EXPECT_EQ(find_header(headers, "x-tenant"), "");
  EXPECT_EQ(find_header(headers, "content-typ"), "");
  EXPECT_EQ(find_header(headers, "content-type2"), "");
}

}  // namespace
}  // namespace tokentap::hooks
