// Trace records as a workload: each record's request as it was recorded, in the order they
// started, with its offset from the first; a record without its body cannot be replayed, a
// directory without records is refused, torn lines are counted and left out.
#include "bench/recorded.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "test/support/tls_cert.hpp"

namespace tokentap::bench {
namespace {

std::string record(const std::string& id, const std::string& start, const std::string& body) {
  return R"({"v":1,"id":")" + id + R"(","start":")" + start +
         R"(","request":{"method":"POST","path":"/v1/chat/completions")" +
         (body.empty() ? std::string() : R"(,"body":)" + body) + "}}\n";
}

TEST(Recorded, TheRecordsRequestsInTheOrderTheyStarted) {
  const auto dir = test::temp_dir();
  std::ofstream(dir + "/a.jsonl") << record("second", "2026-12-07T10:00:01.500000Z",
                                            R"("{\"model\":\"m\",\"stream\":true}")")
                                  << record("first", "2026-12-07T10:00:00.250000Z", R"("{}")")
                                  << "{\"v\":1,\"id\":\"torn";
  std::ofstream(dir + "/b.jsonl") << record("third", "2026-12-07T10:00:03.250000Z", R"("")");
  std::size_t skipped = 0;
  std::string err;
  const auto tasks = recorded_tasks(dir, skipped, err);
  ASSERT_TRUE(tasks) << err;
  ASSERT_EQ(tasks->size(), 3u);
  EXPECT_EQ(skipped, 1u);
  EXPECT_EQ((*tasks)[0].id, "first");
  EXPECT_EQ((*tasks)[0].at_s, 0);
  EXPECT_EQ((*tasks)[1].id, "second");
  EXPECT_DOUBLE_EQ((*tasks)[1].at_s, 1.25);
  EXPECT_EQ((*tasks)[1].method, "POST");
  EXPECT_EQ((*tasks)[1].path, "/v1/chat/completions");
  EXPECT_EQ((*tasks)[1].body, R"({"model":"m","stream":true})");
  EXPECT_DOUBLE_EQ((*tasks)[2].at_s, 3);
  EXPECT_EQ((*tasks)[2].body, "");  // an empty body is a body
}

TEST(Recorded, WhatCannotBeReplayedIsRefusedWithItsReason) {
  const auto dir = test::temp_dir();
  std::ofstream(dir + "/a.jsonl") << record("ok", "2026-12-07T10:00:00.000000Z", R"("{}")")
                                  << record("bodiless", "2026-12-07T10:00:01.000000Z", "");
  std::size_t skipped = 0;
  std::string err;
  EXPECT_FALSE(recorded_tasks(dir, skipped, err));
  EXPECT_EQ(err, dir +
                     ": record bodiless has no request body (traced with trace.bodies off, or "
                     "over its size limit): it cannot be replayed");
  const auto empty = test::temp_dir();
  EXPECT_FALSE(recorded_tasks(empty, skipped, err));
  EXPECT_EQ(err.rfind(empty + ": no trace records to replay", 0), 0u) << err;
}

}  // namespace
}  // namespace tokentap::bench
