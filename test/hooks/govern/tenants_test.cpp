// Tenant names (bounded, escaped, never the credential), the credential hash's salt, and the
// per-tenant table of /api/stats.
#include "hooks/govern/tenants.hpp"

#include <gtest/gtest.h>

#include <string>

namespace tokentap::hooks {
namespace {

TEST(TenantNames, HeaderValuesAreBoundedAndEscapedCredentialsNeverShown) {
  tenant_names names(2);
  EXPECT_EQ(names.name_of("team-a", 0), "team-a");
  EXPECT_EQ(names.name_of("", 0), "anonymous");
  const auto key = names.name_of("", 0x123456789abcdef0ull);
  EXPECT_EQ(key, "key-123456789abc");
  EXPECT_EQ(names.name_of("team-b", 0), "other");  // past max
  EXPECT_EQ(names.name_of("team-a", 0), "team-a");
  tenant_names wide(10);
  EXPECT_EQ(wide.name_of(std::string("a b\"c\n\xff", 7), 0), "a_b_c__");
  EXPECT_EQ(wide.name_of(std::string(500, 'x'), 0), std::string(64, 'x'));
}

TEST(TenantNames, AConfiguredSaltNamesAKeyAlikeInEveryProcessARandomOneDoesNot) {
  const std::string key = "Bearer sk-live-0123456789";
  const auto a = credential_hash(key, credential_salt("shared salt"));
  EXPECT_EQ(a, credential_hash(key, credential_salt("shared salt")));
  EXPECT_NE(a, credential_hash(key, credential_salt("another salt")));
  EXPECT_NE(credential_hash(key, credential_salt("")), credential_hash(key, credential_salt("")));
  EXPECT_NE(a, 0u);
  // The name shows 48 bits of the hash, nothing of the key.
  tenant_names names(10);
  const auto name = names.name_of("", a);
  EXPECT_EQ(name.size(), 16u);
  EXPECT_EQ(name.find("sk-live"), std::string::npos);
}

stream_info exchange_of(std::string tenant, unsigned status, std::int64_t in, std::int64_t out,
                        stream_outcome outcome = stream_outcome::ok) {
  stream_info s;
  s.tenant = std::move(tenant);
  s.status = status;
  s.outcome = outcome;
  s.usage.input_tokens = in;
  s.usage.output_tokens = out;
  s.start_ns = 1'000'000'000;
  s.first_token_ns = s.start_ns + 40'000'000;  // 40 ms
  return s;
}

TEST(TenantStats, RowsCountRequestsRejectionsErrorsAndTokensBusiestFirst) {
  tenant_stats stats(std::chrono::seconds(60), 3);
  stats.record(exchange_of("team-a", 200, 100, 20));
  for (int i = 0; i < 3; ++i) stats.record(exchange_of("team-b", 200, 10, 5));
  stats.record(exchange_of("team-b", 429, -1, -1, stream_outcome::rejected));
  stats.record(exchange_of("team-b", 503, -1, -1));
  stats.record(exchange_of("", 200, 1, 1));  // tenants not known: not a row
  std::string out;
  {
    base::json::writer w(out);
    stats.write_json(w, 10);
  }
  const auto b = out.find("\"tenant\":\"team-b\"");
  const auto a = out.find("\"tenant\":\"team-a\"");
  ASSERT_NE(b, std::string::npos) << out;
  ASSERT_NE(a, std::string::npos) << out;
  EXPECT_LT(b, a) << out;  // busiest first
  const auto row_b = out.substr(b, a - b);
  EXPECT_NE(row_b.find("\"requests\":5,\"rejected\":1,\"errors\":1"), std::string::npos) << out;
  EXPECT_NE(row_b.find("\"input_tokens\":30,\"output_tokens\":15"), std::string::npos) << out;
  EXPECT_NE(row_b.find("\"request_rate\":0.500"), std::string::npos) << out;
  EXPECT_NE(out.find("\"p50\":40"), std::string::npos) << out;
  // Rows are bounded: a fourth tenant past max_rows is not added.
  stats.record(exchange_of("team-c", 200, 1, 1));
  stats.record(exchange_of("team-d", 200, 1, 1));
  out.clear();
  {
    base::json::writer w(out);
    stats.write_json(w, 10);
  }
  EXPECT_NE(out.find("team-c"), std::string::npos);
  EXPECT_EQ(out.find("team-d"), std::string::npos);
}

}  // namespace
}  // namespace tokentap::hooks
