// An engine's /metrics text.  Invariants, for any input:
//  - the load read is identical whole, in fuzzer-chosen chunks and byte by byte;
//  - every figure is -1 (unknown) or a finite number at or above 0, KV use at most 1;
//  - the TTFT buckets are at most max_buckets, by strictly ascending bound, counts at or above 0;
//  - a quantile of them is -1 or lies between 0 and the largest finite bound, and does not fall
//    as q grows; a delta of the buckets with themselves observes nothing.
#include <cmath>

#include "parsers/engine_metrics.hpp"
#include "test/fuzz/fuzz_common.hpp"

using namespace tokentap;

namespace {

parsers::engine_load run(const std::vector<std::string_view>& parts, parsers::engine_kind k) {
  parsers::engine_metrics_reader r(k);
  for (auto c : parts) r.feed(c);
  return r.finish();
}

bool same(const parsers::engine_load& a, const parsers::engine_load& b) {
  return a.kind == b.kind && a.running == b.running && a.waiting == b.waiting &&
         a.kv_usage == b.kv_usage && a.samples == b.samples && a.skipped == b.skipped &&
         a.ttft == b.ttft;
}

bool figure(double v) {
  return v == -1 || (std::isfinite(v) && v >= 0);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto in = fuzz::split_input(data, size);
  const auto kind = static_cast<parsers::engine_kind>(in.plan % 5);  // auto and the four engines
  const auto whole = run({in.payload}, kind);
  FUZZ_CHECK(same(run(fuzz::chunks(in.payload, in.plan), kind), whole));
  if (in.payload.size() <= fuzz::byte_by_byte_limit)
    FUZZ_CHECK(same(run(fuzz::bytes(in.payload), kind), whole));

  FUZZ_CHECK(figure(whole.running) && figure(whole.waiting) && figure(whole.kv_usage));
  FUZZ_CHECK(whole.kv_usage <= 1);
  const auto& b = whole.ttft;
  FUZZ_CHECK(b.size() <= parsers::engine_load::max_buckets);
  double largest = 0;
  for (std::size_t i = 0; i < b.size(); ++i) {
    FUZZ_CHECK(b[i].le >= 0 && b[i].count >= 0);
    FUZZ_CHECK(i == 0 || b[i].le > b[i - 1].le);
    if (std::isfinite(b[i].le)) largest = b[i].le;
  }
  double last = -1;
  for (const double q : {0.0, 0.5, 0.95, 0.99, 1.0}) {
    const double v = parsers::bucket_quantile(q, b);
    FUZZ_CHECK(v == -1 || (v >= 0 && v <= largest));
    if (v != -1 && last != -1) FUZZ_CHECK(v >= last - 1e-9 * largest);
    if (v != -1) last = v;
  }
  std::vector<parsers::histogram_bucket> d;
  FUZZ_CHECK(parsers::bucket_delta(b, b, d));
  FUZZ_CHECK(parsers::bucket_quantile(0.5, d) == -1);
  return 0;
}
