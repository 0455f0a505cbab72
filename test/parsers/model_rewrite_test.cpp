// A request sent to another model: only the top-level `model` value changes.
#include "parsers/model_rewrite.hpp"

#include <gtest/gtest.h>

namespace tokentap::parsers {
namespace {

TEST(ModelRewrite, OnlyTheTopLevelModelValueChanges) {
  EXPECT_EQ(with_model(R"({"model":"big-70b","stream":true})", "small-8b"),
            R"({"model":"small-8b","stream":true})");
  // Spacing, key order and a nested "model" are the client's; the new name is escaped.
  EXPECT_EQ(with_model(" {\"messages\":[{\"model\":\"x\"}],\n \"model\" : \"big\" ,\"n\":1}\n",
                       "sm\"all"),
            " {\"messages\":[{\"model\":\"x\"}],\n \"model\" : \"sm\\\"all\" ,\"n\":1}\n");
  EXPECT_EQ(with_model(R"({"model":"a\"b","x":2})", "c"), R"({"model":"c","x":2})");
}

TEST(ModelRewrite, NothingWithoutATopLevelModelString) {
  EXPECT_FALSE(with_model(R"({"prompt":"hi"})", "m"));
  EXPECT_FALSE(with_model(R"({"model":7})", "m"));
  EXPECT_FALSE(with_model(R"(["model","x"])", "m"));
  EXPECT_FALSE(with_model(R"({"model":"x")", "m"));  // not JSON
  EXPECT_FALSE(with_model("", "m"));
}

}  // namespace
}  // namespace tokentap::parsers
