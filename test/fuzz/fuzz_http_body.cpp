// Body-framing decoder (the relay loop's): payload, end, error and extra bytes are identical for
// every split of the input; the payload never exceeds the input, and with Content-Length never
// exceeds the length.  The plan byte's top bits choose chunked, Content-Length or until close.
#include "parsers/http_body.hpp"
#include "test/fuzz/fuzz_common.hpp"

using namespace tokentap;
using parsers::http_body_decoder;

namespace {

http_body_decoder make(std::uint8_t plan, std::size_t n) {
  switch (plan >> 6) {
    case 0:
    case 1:
      return http_body_decoder::chunked();
    case 2:
      return http_body_decoder::length(n / 2);
    default:
      return http_body_decoder::until_close();
  }
}

std::string run(const std::vector<std::string_view>& parts, std::uint8_t plan, std::size_t n) {
  auto d = make(plan, n);
  std::string payload;
  for (auto c : parts) {
    std::string buf(c);
    const auto got = d.decode(buf.data(), buf.size());
    FUZZ_CHECK(got.offset <= buf.size() && got.size <= buf.size() - got.offset);
    payload.append(buf.data() + got.offset, got.size);
  }
  FUZZ_CHECK(payload.size() <= n);
  if (d.kind() == http_body_decoder::framing::length) FUZZ_CHECK(payload.size() <= n / 2);
  FUZZ_CHECK(!(d.done() && d.failed() != http_body_decoder::error::none));
  const bool closed = d.close();
  return payload + "|" + std::to_string(d.done()) + std::to_string(static_cast<int>(d.failed())) +
         std::to_string(d.extra()) + std::to_string(closed);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto in = fuzz::split_input(data, size);
  const auto n = in.payload.size();
  const auto whole = run({in.payload}, in.plan, n);
  FUZZ_CHECK(run(fuzz::chunks(in.payload, in.plan), in.plan, n) == whole);
  if (n <= fuzz::byte_by_byte_limit) FUZZ_CHECK(run(fuzz::bytes(in.payload), in.plan, n) == whole);
  return 0;
}
