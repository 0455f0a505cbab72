// One provider decoder (FUZZ_PROVIDER, set per target by CMake): token text per channel, stream
// errors, finish reasons, parse errors, usage and the detected provider are identical for every
// way the body is split (whole, fuzzer-chosen chunks, byte by byte); token events carry text and
// the decoder's per-channel counters match the events it emitted; and the decoder without its
// fast paths (simdjson for every payload) reports the same calls in the same order; and the body
// with the keys of its JSON objects reordered (sorted, reversed or shuffled, chosen by the plan
// byte) reports exactly what the body does (test/support/json_keys.hpp).
#include "parsers/stream_decoder.hpp"
#include "test/fuzz/fuzz_common.hpp"
#include "test/support/decoder_transcript.hpp"
#include "test/support/json_keys.hpp"

using namespace tokentap;
using parsers::channel;

namespace {

constexpr std::string_view content_types[] = {"text/event-stream", "application/x-ndjson",
                                              "application/json",
                                              "text/event-stream; charset=utf-8"};

std::string run(const std::vector<std::string_view>& parts, std::string_view ct, std::size_t max,
                bool fast_paths = true) {
  parsers::stream_decoder d(parsers::FUZZ_PROVIDER, ct, max);
  d.set_fast_paths(fast_paths);
  test::decoder_transcript t;
  for (auto c : parts) d.feed(c, 0, t);
  d.finish(0, t);
  FUZZ_CHECK(!t.empty_token);
  for (int c = 0; c < 3; ++c) FUZZ_CHECK(d.token_events(static_cast<channel>(c)) == t.tokens[c]);
  return t.describe(d) + "\n" + t.sequence;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto in = fuzz::split_input(data, size);
  const auto ct = content_types[(in.plan >> 6) & 3];
  const std::size_t max = (in.plan & 0x20) ? 96 : (1u << 20);
  const auto whole = run({in.payload}, ct, max);
  FUZZ_CHECK(run({in.payload}, ct, max, false) == whole);
  FUZZ_CHECK(run(fuzz::chunks(in.payload, in.plan), ct, max) == whole);
  if (in.payload.size() <= fuzz::byte_by_byte_limit)
    FUZZ_CHECK(run(fuzz::bytes(in.payload), ct, max) == whole);
  const auto order = static_cast<test::key_order>(in.plan % 3);
  const auto reordered = test::reorder_stream_keys(in.payload, order, in.plan);
  FUZZ_CHECK(reordered.size() == in.payload.size());
  if (reordered != in.payload) {
    FUZZ_CHECK(run({reordered}, ct, max) == whole);
    FUZZ_CHECK(run({reordered}, ct, max, false) == whole);
    FUZZ_CHECK(run(fuzz::chunks(reordered, in.plan), ct, max) == whole);
  }
  return 0;
}
