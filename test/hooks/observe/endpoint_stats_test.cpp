// The per-endpoint rows of /api/stats count why requests were routed to an endpoint by the
// reason's name as it comes, so a new balancing policy's reasons show without a change here;
// the names they learn are bounded.
#include "hooks/observe/endpoint_stats.hpp"

#include <gtest/gtest.h>

#include <string>

#include "base/json.hpp"

namespace tokentap::hooks {
namespace {

stream_info routed(const std::string& endpoint, const std::string& reason) {
  stream_info s;
  s.status = 200;
  s.upstream.attempts.push_back({"main", endpoint, "", reason, 0});
  return s;
}

std::string table(endpoint_stats& st) {
  std::string out;
  base::json::writer w(out);
  st.write_json(w, 60);
  return out;
}

TEST(EndpointStats, RoutingReasonsAreCountedByTheirNamesAsTheyCome) {
  endpoint_stats st(std::chrono::seconds(60));
  st.add(
      "main", "a:1", [] { return 0.0; }, [] { return endpoint_health{}; });
  st.add(
      "main", "b:2", [] { return 0.0; }, [] { return endpoint_health{}; });
  st.record(routed("a:1", "prefix_match"));
  st.record(routed("a:1", "prefix_match"));
  st.record(routed("a:1", "least_request"));
  st.record(routed("b:2", "a_policy_of_tomorrow"));
  st.record(routed("c:3", "hash"));  // no row: not counted anywhere
  const auto json = table(st);
  const auto a = json.find(R"("endpoint":"a:1")");
  const auto b = json.find(R"("endpoint":"b:2")");
  ASSERT_NE(a, std::string::npos) << json;
  ASSERT_NE(b, std::string::npos) << json;
  const auto row_a = json.substr(a, b - a), row_b = json.substr(b);
  EXPECT_NE(row_a.find(R"("reasons":{"prefix_match":2,"least_request":1})"), std::string::npos)
      << row_a;
  EXPECT_NE(row_b.find(R"("reasons":{"a_policy_of_tomorrow":1})"), std::string::npos) << row_b;
  EXPECT_EQ(json.find("hash"), std::string::npos) << json;
}

TEST(EndpointStats, TheReasonNamesLearnedAreBounded) {
  endpoint_stats st(std::chrono::seconds(60));
  st.add(
      "main", "a:1", [] { return 0.0; }, [] { return endpoint_health{}; });
  for (std::size_t i = 0; i < endpoint_stats::max_reasons + 5; ++i)
    st.record(routed("a:1", "reason_" + std::to_string(i)));
  const auto json = table(st);
  EXPECT_NE(json.find(R"("reason_)" + std::to_string(endpoint_stats::max_reasons - 1) + R"(":1)"),
            std::string::npos)
      << json;
  EXPECT_EQ(json.find(R"("reason_)" + std::to_string(endpoint_stats::max_reasons) + '"'),
            std::string::npos)
      << json;
  EXPECT_NE(json.find(R"("requests":)" + std::to_string(endpoint_stats::max_reasons + 5)),
            std::string::npos)
      << json;  // every request still counted
}

}  // namespace
}  // namespace tokentap::hooks
