// A hook's section as config/ keeps it: the file's tree with each node's line, compared without
// lines (what a reload compares), and readers whose errors name the line.
#include "config/section.hpp"

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "config/config.hpp"

namespace tokentap::config {
namespace {

const section& hook(const config& c, std::string_view name) {
  return c.hook_section(name);
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const config_error& e) {
    return e.what();
  }
  return "";
}

TEST(Section, TheTreeKeepsEveryNodesLineAndComparesWithoutThem) {
  const auto a = parse_config("x:\n  n: 5\n  on: yes\n  list: [a, b]\n  empty:\n", false);
  const auto& x = hook(a, "x");
  EXPECT_EQ(x.type(), section::kind::map);
  EXPECT_EQ(x.line(), 2);
  EXPECT_EQ(x["n"].text(), "5");
  EXPECT_EQ(x["n"].line(), 2);
  EXPECT_EQ(x["list"].items().size(), 2u);
  EXPECT_EQ(x["empty"].type(), section::kind::null);
  EXPECT_EQ(x["missing"].type(), section::kind::absent);
  EXPECT_FALSE(x["missing"]);
  ASSERT_EQ(x.members().size(), 4u);
  EXPECT_EQ(x.members()[3].key, "empty");
  EXPECT_EQ(x.members()[3].key_line, 5);
  // The same content further down the file is the same section; another value is not.
  const auto b = parse_config("\n\nx: {n: 5, on: yes, list: [a, b], empty: }\n", false);
  EXPECT_EQ(hook(b, "x"), x);
  const auto c = parse_config("x: {n: 6, on: yes, list: [a, b], empty: }\n", false);
  EXPECT_FALSE(hook(c, "x") == x);
}

TEST(Section, ReadersTakeWhatYamlWritesAndNameTheLineOfWhatTheyRefuse) {
  const auto c = parse_config(
      "x:\n  n: +42\n  neg: -1\n  word: soon\n  big: 99999999999999999999\n  t: On\n  f: n\n"
      "  s: hello\n  l: [1, two]\n  nested: [[1]]\n",
      false);
  const auto& x = hook(c, "x");
  EXPECT_EQ(x["n"].non_negative("n"), 42u);
  EXPECT_EQ(error_of([&] { x["neg"].non_negative("neg"); }), "line 3: 'neg' must not be negative");
  EXPECT_EQ(error_of([&] { x["word"].non_negative("word"); }), "line 4: invalid value for 'word'");
  EXPECT_EQ(error_of([&] { x["big"].non_negative("big"); }), "line 5: invalid value for 'big'");
  EXPECT_TRUE(x["t"].boolean("t"));
  EXPECT_FALSE(x["f"].boolean("f"));
  EXPECT_EQ(error_of([&] { x["s"].boolean("s"); }), "line 8: invalid value for 's'");
  EXPECT_EQ(x["s"].string("s"), "hello");
  EXPECT_EQ(x["l"].strings("l"), (std::vector<std::string>{"1", "two"}));
  EXPECT_EQ(error_of([&] { x["s"].strings("s"); }), "line 8: s must be a list");
  EXPECT_EQ(error_of([&] { x["nested"].strings("nested"); }),
            "line 10: invalid value for 'nested'");
  EXPECT_EQ(error_of([&] { x.check_keys({"n"}, "x"); }), "line 3: unknown key 'neg' in x");
  EXPECT_EQ(error_of([&] { x["l"].check_keys({}, "x.l"); }), "line 9: x.l must be a mapping");
}

TEST(Section, NumbersAreFiniteDecimalsAsYamlWritesThem) {
  const auto c = parse_config(
      "x: {a: 0.9, b: +3, c: 1e-3, d: -2.5, e: .inf, f: nan, g: 1.5x, h: [1]}\n", false);
  const auto& x = hook(c, "x");
  EXPECT_DOUBLE_EQ(x["a"].number("a"), 0.9);
  EXPECT_DOUBLE_EQ(x["b"].number("b"), 3);
  EXPECT_DOUBLE_EQ(x["c"].number("c"), 0.001);
  EXPECT_DOUBLE_EQ(x["d"].number("d"), -2.5);
  for (const char* bad : {"e", "f", "g", "h"})
    EXPECT_EQ(error_of([&] { x[bad].number(bad); }),
              "line 1: invalid value for '" + std::string(bad) + "'");
}

// A program building its configuration in code sets a hook's section as a file would write it:
// the section replaces one of its name, others stay, and a key config/ reads itself is refused.
TEST(Section, SetHookSectionsReplacesByName) {
  auto c = parse_config("timing: {exact_samples: 512}\nsteps: {}\n", false);
  set_hook_sections(c, "timing: {exact_samples: 64}\ncache: {ttl_s: 20}");
  ASSERT_EQ(c.hook_settings.size(), 3u);
  EXPECT_EQ(c.hook_settings[0].key, "timing");
  EXPECT_EQ(hook(c, "timing")["exact_samples"].text(), "64");
  EXPECT_TRUE(hook(c, "steps"));
  EXPECT_EQ(hook(c, "cache")["ttl_s"].text(), "20");
  EXPECT_EQ(error_of([&] { set_hook_sections(c, "trace: {dir: /tmp}"); }),
            "line 1: 'trace' is not a hook's section");
  EXPECT_NE(error_of([&] { set_hook_sections(c, "cache: {ttl_s: [}"); }).find("YAML syntax error"),
            std::string::npos);
  EXPECT_EQ(hook(c, "cache")["ttl_s"].text(), "20");  // a refused call changes nothing
}

}  // namespace
}  // namespace tokentap::config
