// Cache hints written into request bodies.  Invariants, for any input:
//  - a hint is written only into a valid JSON object, and the result is valid JSON;
//  - the prompt_cache_key result is the input with exactly one member inserted after its `{`;
//  - the breakpoint result keeps every byte of the input outside the changed system prompt, and
//    has exactly one cache_control more than the input had (which was none);
//  - applied to its own result, each hint changes nothing (it sees its own hint).
#include <simdjson.h>

#include "parsers/cache_hints.hpp"
#include "test/fuzz/fuzz_common.hpp"

using namespace tokentap;

namespace {

bool valid(std::string_view s) {
  simdjson::dom::parser p;
  simdjson::dom::element e;
  return p.parse(s.data(), s.size()).get(e) == simdjson::SUCCESS;
}

std::size_t count(std::string_view s, std::string_view what) {
  std::size_t n = 0;
  for (auto at = s.find(what); at != std::string_view::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  constexpr std::string_view key = "tokentap-0123456789abcdef";
  if (const auto out = parsers::with_prompt_cache_key(body, key)) {
    FUZZ_CHECK(valid(body));
    FUZZ_CHECK(valid(*out));
    constexpr std::string_view member = "\"prompt_cache_key\":\"tokentap-0123456789abcdef\"";
    const auto at = out->find(member);
    FUZZ_CHECK(at != std::string::npos);
    std::string rest = out->substr(0, at) + out->substr(at + member.size());
    if (rest.size() == body.size() + 1 && rest[at] == ',') rest.erase(at, 1);
    FUZZ_CHECK(rest == body);
    FUZZ_CHECK(!parsers::with_prompt_cache_key(*out, key));
  }
  if (const auto out = parsers::with_system_cache_breakpoint(body)) {
    FUZZ_CHECK(valid(body));
    FUZZ_CHECK(valid(*out));
    FUZZ_CHECK(out->size() > body.size());
    // Same head up to the change and same tail after it.
    std::size_t head = 0;
    while (head < body.size() && body[head] == (*out)[head]) ++head;
    std::size_t tail = 0;
    while (tail < body.size() - head &&
           body[body.size() - 1 - tail] == (*out)[out->size() - 1 - tail])
      ++tail;
    const std::string_view added(out->data() + head, out->size() - head - tail);
    FUZZ_CHECK(count(added, "\"cache_control\":{\"type\":\"ephemeral\"}") == 1);
    FUZZ_CHECK(!parsers::with_system_cache_breakpoint(*out));
  }
  return 0;
}
