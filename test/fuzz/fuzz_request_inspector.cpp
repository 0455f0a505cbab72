// Request inspector (model / messages / prefix hashing).  Invariants:
//  - the basic fields do not depend on which extras were asked for (on a valid body: On-Demand
//    parsing validates only what it reads, so an error inside a value that only the digest pass
//    walks, like `tools`, legitimately ends that pass early);
//  - the digests are identical with and without the canonical text (the hashing fast path on raw
//    string tokens must agree with the unescaping path);
//  - chars_before is the running sum of chars, and the canonical text has exactly one
//    "role \x1f text \x1e" per digest;
//  - a reused inspector (the proxy keeps one per session) gives what a fresh one gives;
//  - the body with its keys reordered (sorted, reversed, shuffled) gives the same fields,
//    digests and canonical text.
#include "parsers/request_inspector.hpp"
#include "test/fuzz/fuzz_common.hpp"
#include "test/support/json_keys.hpp"

using namespace tokentap;
using parsers::inspect_options;
using parsers::request_info;

namespace {

void same_basics(const request_info& a, const request_info& b) {
  FUZZ_CHECK(a.model == b.model);
  FUZZ_CHECK(a.stream == b.stream);
  FUZZ_CHECK(a.include_usage == b.include_usage);
  FUZZ_CHECK(a.reasoning == b.reasoning);
  FUZZ_CHECK(a.max_tokens == b.max_tokens);
  FUZZ_CHECK(a.messages == b.messages);
  FUZZ_CHECK(a.prompt_chars == b.prompt_chars);
  FUZZ_CHECK(a.error == b.error);
}

void same_digests(const request_info& a, const request_info& b) {
  FUZZ_CHECK(a.digests.size() == b.digests.size());
  for (std::size_t i = 0; i < a.digests.size(); ++i) {
    FUZZ_CHECK(a.digests[i].hash == b.digests[i].hash);
    FUZZ_CHECK(a.digests[i].chain == b.digests[i].chain);
    FUZZ_CHECK(a.digests[i].chars == b.digests[i].chars);
    FUZZ_CHECK(a.digests[i].chars_before == b.digests[i].chars_before);
    FUZZ_CHECK(a.digests[i].role == b.digests[i].role);
  }
}

// A body that exercises every field, inspected first by the reused instance.
constexpr std::string_view warmup =
    R"({"model":"warm\u00e9","stream":true,"stream_options":{"include_usage":true},)"
    R"("max_tokens":9,"system":"s","tools":[{"b":1,"a":[2]}],"thinking":{"type":"enabled"},)"
    R"("messages":[{"role":"user","content":[{"type":"text","text":"x\ny"},{"text":"z"}]}]})";

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  parsers::request_inspector plain, digests, canonical;
  const auto a = plain.inspect(body);
  const auto b = digests.inspect(body, inspect_options{true, false});
  const auto c = canonical.inspect(body, inspect_options{true, true});
  FUZZ_CHECK(a.digests.empty() && a.canonical.empty());
  FUZZ_CHECK(b.error == c.error);
  same_digests(b, c);
  if (!b.error.empty()) return 0;
  same_basics(a, b);
  same_basics(a, c);

  std::uint64_t before = 0;
  std::size_t canonical_size = 0;
  for (const auto& d : c.digests) {
    FUZZ_CHECK(d.chars_before == before);
    before += d.chars;
    canonical_size += d.role.size() + 1 + d.chars + 1;
  }
  FUZZ_CHECK(c.canonical.size() == canonical_size);

  parsers::request_inspector reused;
  (void)reused.inspect(warmup, inspect_options{true, true});
  const auto r = reused.inspect(body, inspect_options{true, false});
  same_basics(a, r);
  same_digests(b, r);

  const auto reordered = test::reorder_keys(body, static_cast<test::key_order>(size % 3), size);
  if (reordered != body) {
    parsers::request_inspector other;
    const auto o = other.inspect(reordered, inspect_options{true, true});
    FUZZ_CHECK(o.error.empty());
    same_basics(c, o);
    same_digests(c, o);
    FUZZ_CHECK(o.canonical == c.canonical);
  }
  return 0;
}
