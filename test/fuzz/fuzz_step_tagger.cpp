// Step tagger.  Invariants: step offsets, kinds and redundancy are identical however the text is
// cut into deltas (whole, fuzzer-chosen chunks, byte by byte); offsets strictly increase and lie
// inside the text; each step's time span is ordered; the step count respects max_steps.
#include "parsers/step_tagger.hpp"
#include "test/fuzz/fuzz_common.hpp"

using namespace tokentap;

namespace {

constexpr std::size_t max_steps = 64;

std::string run(const std::vector<std::string_view>& parts, std::size_t total) {
  parsers::step_tagger t(parsers::step_triggers::defaults(), max_steps);
  std::int64_t ts = 0;
  for (auto p : parts) t.feed(p, ++ts);
  t.finish();
  FUZZ_CHECK(t.text_bytes() == total);
  FUZZ_CHECK(t.steps().size() <= max_steps);
  std::string out;
  std::uint64_t last = 0;
  std::int64_t last_t = 0;
  std::uint64_t redundant_tokens = 0;
  for (std::size_t i = 0; i < t.steps().size(); ++i) {
    const auto& s = t.steps()[i];
    FUZZ_CHECK(i == 0 || s.offset > last);
    FUZZ_CHECK(s.offset < total || (total == 0 && s.offset == 0));
    FUZZ_CHECK(s.t_ns <= s.end_ns);
    FUZZ_CHECK(s.t_ns >= last_t);
    last = s.offset;
    last_t = s.t_ns;
    if (s.redundant) redundant_tokens += s.tokens;
    out += std::to_string(s.offset) + ":" + std::string(to_string(s.kind)) +
           (s.redundant ? "!" : "") + " ";
  }
  FUZZ_CHECK(t.redundant_tokens() == redundant_tokens);
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto in = fuzz::split_input(data, size);
  const auto n = in.payload.size();
  const auto whole = run({in.payload}, n);
  FUZZ_CHECK(run(fuzz::chunks(in.payload, in.plan), n) == whole);
  if (n <= fuzz::byte_by_byte_limit) FUZZ_CHECK(run(fuzz::bytes(in.payload), n) == whole);
  return 0;
}
