// A request's conversation in the GenAI semantic conventions' shapes.  Invariants:
//  - what comes out is empty or valid JSON (an array) and valid UTF-8, whatever went in: the
//    attribute goes to a tracing backend as it is;
//  - the body with its keys reordered (sorted, reversed, shuffled) gives the same conversation
//    (up to the order of the keys of tool arguments given as objects, which are kept as sent);
//  - a budget of 0 leaves every text empty, and nothing is cut when the budget is the body's size
//    (a text is never longer than the body that carries it).
#include <simdjson.h>

#include "base/json.hpp"
#include "parsers/gen_ai_messages.hpp"
#include "test/fuzz/fuzz_common.hpp"
#include "test/support/json_keys.hpp"

using namespace tokentap;

namespace {

void valid(const std::string& json) {
  if (json.empty()) return;
  FUZZ_CHECK(base::json::valid_utf8(json));
  simdjson::dom::parser parser;
  simdjson::dom::array a;
  FUZZ_CHECK(!parser.parse(json).get_array().get(a));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  const auto whole = parsers::gen_ai_input_of(body, size);
  valid(whole.input_messages);
  valid(whole.system_instructions);
  FUZZ_CHECK(!whole.truncated);
  const auto none = parsers::gen_ai_input_of(body, 0);
  valid(none.input_messages);
  const auto count = [&](std::string_view what) {
    std::size_t n = 0;
    for (auto at = none.input_messages.find(what); at != std::string::npos;
         at = none.input_messages.find(what, at + 1))
      ++n;
    return n;
  };
  FUZZ_CHECK(count(R"("content":")") == count(R"("content":"")"));
  const auto reordered = test::reorder_keys(body, static_cast<test::key_order>(size % 3), size);
  if (reordered != body) {
    const auto o = parsers::gen_ai_input_of(reordered, size);
    // (Tool arguments given as objects keep their keys' order: compared sorted.)
    FUZZ_CHECK(test::reorder_keys(o.input_messages, test::key_order::sorted) ==
               test::reorder_keys(whole.input_messages, test::key_order::sorted));
    FUZZ_CHECK(o.system_instructions == whole.system_instructions);
  }
  return 0;
}
