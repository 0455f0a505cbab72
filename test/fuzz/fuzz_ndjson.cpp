// NDJSON framer: lines are identical for every split; no line carries LF or exceeds the cap; the
// emitted lines plus what was skipped never exceed the input.
#include "parsers/sse_parser.hpp"
#include "test/fuzz/fuzz_common.hpp"

using namespace tokentap;

namespace {

struct recorder : parsers::ndjson_handler {
  std::size_t max = 0, bytes = 0;
  std::string out;
  void on_line(std::string_view line, std::int64_t) noexcept override {
    FUZZ_CHECK(!line.empty());
    FUZZ_CHECK(line.size() <= max);
    FUZZ_CHECK(line.find('\n') == std::string_view::npos);
    bytes += line.size();
    out += "L" + std::to_string(line.size()) + ":" + std::string(line) + "\n";
  }
  void on_oversize(std::size_t, std::int64_t) noexcept override { out += "O\n"; }
};

std::string run(const std::vector<std::string_view>& parts, std::size_t max, std::size_t total) {
  parsers::ndjson_framer f(max);
  recorder r;
  r.max = max;
  for (auto c : parts) f.feed(c, 0, r);
  f.finish(0, r);
  FUZZ_CHECK(r.bytes <= total);
  return r.out + "oversized=" + std::to_string(f.oversized());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto in = fuzz::split_input(data, size);
  const std::size_t max = (in.plan & 0x80) ? 48 : (1u << 20);
  const auto n = in.payload.size();
  const auto whole = run({in.payload}, max, n);
  FUZZ_CHECK(run(fuzz::chunks(in.payload, in.plan), max, n) == whole);
  if (n <= fuzz::byte_by_byte_limit) FUZZ_CHECK(run(fuzz::bytes(in.payload), max, n) == whole);
  return 0;
}
