// SSE framer: events, retry and the end-of-stream verdict are identical for every way the input is
// split; no dispatched event exceeds the event cap; an id never carries NUL; the parser's event
// count matches the handler's.
#include <algorithm>

#include "parsers/sse_parser.hpp"
#include "test/fuzz/fuzz_common.hpp"

using namespace tokentap;

namespace {

struct recorder : parsers::sse_handler {
  std::size_t max = 0;
  std::uint64_t events = 0;
  std::string out;
  void on_event(const parsers::sse_event& e) noexcept override {
    FUZZ_CHECK(e.data.size() <= max);
    FUZZ_CHECK(e.id.find('\0') == std::string_view::npos);
    ++events;
    out += "E" + std::to_string(e.type.size()) + ":" + std::string(e.type) +
           std::to_string(e.data.size()) + ":" + std::string(e.data) + std::to_string(e.id.size()) +
           ":" + std::string(e.id) + "\n";
  }
  void on_oversize(std::size_t, std::int64_t) noexcept override { out += "O\n"; }
};

std::string run(const std::vector<std::string_view>& parts, std::size_t max) {
  parsers::sse_parser p(max);
  recorder r;
  r.max = max;
  for (auto c : parts) p.feed(c, 0, r);
  FUZZ_CHECK(p.events() == r.events);
  r.out += "retry=" + std::to_string(p.retry_ms());
  r.out += p.finish() ? " cut" : " clean";
  // finish() leaves the parser ready for a new stream: the same input gives the same events.
  recorder again;
  again.max = max;
  for (auto c : parts) p.feed(c, 0, again);
  p.finish();
  FUZZ_CHECK(r.out.compare(0, again.out.size(), again.out) == 0);
  return r.out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto in = fuzz::split_input(data, size);
  // A small cap now and then so the oversize path (skip until the blank line) is explored too.
  const std::size_t max = (in.plan & 0x80) ? 64 : (1u << 20);
  const auto whole = run({in.payload}, max);
  FUZZ_CHECK(run(fuzz::chunks(in.payload, in.plan), max) == whole);
  if (in.payload.size() <= fuzz::byte_by_byte_limit)
    FUZZ_CHECK(run(fuzz::bytes(in.payload), max) == whole);
  return 0;
}
