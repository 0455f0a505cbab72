// One provider decoder (FUZZ_PROVIDER, set per target by CMake): token text per channel, stream
// errors, finish reasons, parse errors, usage and the detected provider are identical for every
// way the body is split (whole, fuzzer-chosen chunks, byte by byte); token events carry text and
// the decoder's per-channel counters match the events it emitted.
#include "parsers/stream_decoder.hpp"
#include "test/fuzz/fuzz_common.hpp"

using namespace tokentap;
using parsers::channel;

namespace {

struct transcript : parsers::decoder_handler {
  std::string text[3];
  std::string log;
  std::uint64_t tokens[3] = {0, 0, 0};
  void on_token(channel ch, std::string_view t, std::int64_t) noexcept override {
    FUZZ_CHECK(!t.empty());
    text[static_cast<int>(ch)] += t;
    ++tokens[static_cast<int>(ch)];
  }
  void on_stream_error(std::string_view type, std::string_view msg,
                       std::int64_t) noexcept override {
    log += "error(" + std::string(type) + "," + std::string(msg) + ")";
  }
  void on_finish_reason(std::string_view r) noexcept override {
    log += "finish(" + std::string(r) + ")";
  }
  void on_parse_error(parsers::parse_stage s, std::int64_t) noexcept override {
    log += "parse_error(" + std::string(to_string(s)) + ")";
  }
};

constexpr std::string_view content_types[] = {"text/event-stream", "application/x-ndjson",
                                              "application/json",
                                              "text/event-stream; charset=utf-8"};

std::string run(const std::vector<std::string_view>& parts, std::string_view ct, std::size_t max) {
  parsers::stream_decoder d(parsers::FUZZ_PROVIDER, ct, max);
  transcript t;
  for (auto c : parts) d.feed(c, 0, t);
  d.finish(0, t);
  for (int c = 0; c < 3; ++c) FUZZ_CHECK(d.token_events(static_cast<channel>(c)) == t.tokens[c]);
  const auto u = d.usage();
  return "content=" + t.text[0] + "|reasoning=" + t.text[1] + "|tool=" + t.text[2] + "|" + t.log +
         "|in=" + std::to_string(u.input_tokens) + " out=" + std::to_string(u.output_tokens) +
         " reasoning=" + std::to_string(u.reasoning_tokens) +
         " cached=" + std::to_string(u.cached_input_tokens) +
         " write=" + std::to_string(u.cache_write_tokens) +
         " cache_fields=" + (u.cache_fields ? "1" : "0") +
         "|provider=" + std::string(to_string(d.detected_provider()));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto in = fuzz::split_input(data, size);
  const auto ct = content_types[(in.plan >> 6) & 3];
  const std::size_t max = (in.plan & 0x20) ? 96 : (1u << 20);
  const auto whole = run({in.payload}, ct, max);
  FUZZ_CHECK(run(fuzz::chunks(in.payload, in.plan), ct, max) == whole);
  if (in.payload.size() <= fuzz::byte_by_byte_limit)
    FUZZ_CHECK(run(fuzz::bytes(in.payload), ct, max) == whole);
  return 0;
}
