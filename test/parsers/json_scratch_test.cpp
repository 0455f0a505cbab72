// The per-thread simdjson scratch: a padded copy that simdjson can read past its end, one buffer
// reused once warm, one scratch per user and per thread, and memory given back on request.
#include "parsers/json_scratch.hpp"

#include <gtest/gtest.h>

#include <string>
#include <thread>

namespace tokentap::parsers::detail {
namespace {

struct first_user {};
struct second_user {};

TEST(JsonScratch, ThePaddedCopyParsesAndHasTheSlackSimdjsonReads) {
  auto& s = thread_json_scratch<first_user>();
  const std::string doc = R"({"a":[1,2,3],"b":"x"})";
  const auto padded = s.pad(doc);
  EXPECT_EQ(std::string_view(padded), doc);
  EXPECT_GE(padded.padding(), simdjson::SIMDJSON_PADDING);
  simdjson::ondemand::document d;
  ASSERT_FALSE(s.parser.iterate(padded).get(d));
  std::string_view b;
  ASSERT_FALSE(d["b"].get_string().get(b));
  EXPECT_EQ(b, "x");
}

TEST(JsonScratch, OnceWarmTheBufferIsReusedAndReleaseGivesItBack) {
  auto& s = thread_json_scratch<first_user>();
  s.pad(std::string(4096, ' '));
  const char* const buffer = s.padded.data();
  const auto capacity = s.padded.capacity();
  for (std::size_t n : {1u, 100u, 4096u}) {
    const auto padded = s.pad(std::string(n, '1'));
    EXPECT_EQ(padded.data(), buffer);  // no reallocation for a document that fits
    EXPECT_EQ(padded.size(), n);
  }
  EXPECT_EQ(s.padded.capacity(), capacity);
  s.release();
  EXPECT_LT(s.padded.capacity(), capacity);
  EXPECT_EQ(std::string_view(s.pad("[]")), "[]");  // usable again after release
}

TEST(JsonScratch, EachUserAndEachThreadHasItsOwn) {
  auto& first = thread_json_scratch<first_user>();
  auto& second = thread_json_scratch<second_user>();
  EXPECT_NE(&first, &second);
  EXPECT_EQ(&first, &thread_json_scratch<first_user>());
  // A live document of one user survives the other's parse.
  const auto a = first.pad(R"({"k":1})");
  second.pad(R"({"other":2})");
  EXPECT_EQ(std::string_view(a), R"({"k":1})");
  json_scratch* elsewhere = nullptr;
  std::thread([&] { elsewhere = &thread_json_scratch<first_user>(); }).join();
  EXPECT_NE(elsewhere, &first);
}

}  // namespace
}  // namespace tokentap::parsers::detail
