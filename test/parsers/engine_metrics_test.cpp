// Engines' own /metrics text, read for their load and their TTFT histogram: vLLM's, SGLang's,
// TGI's and llama.cpp's names (recorded shapes), fed whole, at every split, byte by byte and in
// random chunks; the histogram's quantiles as Prometheus' histogram_quantile computes them.
#include "parsers/engine_metrics.hpp"

#include <gtest/gtest.h>

#include <limits>

#include "test/support/chunking.hpp"

namespace tokentap::parsers {
namespace {

std::string describe(const engine_load& l) {
  char b[200];
  std::snprintf(b, sizeof b, "%s running=%g waiting=%g kv=%g samples=%llu skipped=%llu",
                std::string(to_string(l.kind)).c_str(), l.running, l.waiting, l.kv_usage,
                static_cast<unsigned long long>(l.samples),
                static_cast<unsigned long long>(l.skipped));
  std::string out = b;
  if (!l.ttft.empty()) {
    out += " ttft=[";
    for (const auto& x : l.ttft) {
      std::snprintf(b, sizeof b, "%s%g:%g", out.back() == '[' ? "" : ",", x.le, x.count);
      out += b;
    }
    out += ']';
  }
  return out;
}

std::string read(std::string_view text, engine_kind asked = engine_kind::unknown) {
  return test::grind(text, [&](const std::vector<std::string_view>& chunks) {
    engine_metrics_reader r(asked);
    for (auto c : chunks) r.feed(c);
    return describe(r.finish());
  });
}

const std::string vllm_text =
    "# HELP vllm:num_requests_running Number of requests in model execution batches.\n"
    "# TYPE vllm:num_requests_running gauge\n"
    "vllm:num_requests_running{engine=\"0\",model_name=\"Qwen/Qwen3-0.6B\"} 3.0\n"
    "vllm:num_requests_running{engine=\"1\",model_name=\"Qwen/Qwen3-0.6B\"} 2.0\n"
    "# TYPE vllm:num_requests_waiting gauge\n"
    "vllm:num_requests_waiting{engine=\"0\",model_name=\"Qwen/Qwen3-0.6B\"} 7.0\n"
    "vllm:kv_cache_usage_perc{engine=\"0\",model_name=\"a}b\\\"c\"} 0.25\r\n"
    "vllm:kv_cache_usage_perc{engine=\"1\",model_name=\"Qwen/Qwen3-0.6B\"} 0.75\n"
    "vllm:time_to_first_token_seconds_bucket{le=\"0.001\",model_name=\"m\"} 0.0\n"
    "python_gc_objects_collected_total{generation=\"0\"} 12345.0\n"
    "vllm:prefix_cache_hits_total{model_name=\"m\"} 1.2e+06\n";

TEST(EngineMetrics, VllmSeriesAreSummedAndItsKvUseAveraged) {
  EXPECT_EQ(read(vllm_text), "vllm running=5 waiting=7 kv=0.5 samples=7 skipped=0 ttft=[0.001:0]");
  EXPECT_EQ(read(vllm_text, engine_kind::vllm), read(vllm_text));
}

TEST(EngineMetrics, SglangTgiAndLlamaCppByTheirNames) {
  EXPECT_EQ(read("sglang:num_running_reqs{model_name=\"x\"} 4\n"
                 "sglang:num_queue_reqs{model_name=\"x\"} 9\n"
                 "sglang:token_usage{model_name=\"x\"} 0.31\n"),
            "sglang running=4 waiting=9 kv=0.31 samples=3 skipped=0");
  EXPECT_EQ(read("tgi_queue_size 2\ntgi_batch_current_size 8\ntgi_request_count 100\n"),
            "tgi running=8 waiting=2 kv=-1 samples=3 skipped=0");
  // llama.cpp's server (no labels; recorded from the engine in ../shared/engines).
  EXPECT_EQ(read("# HELP llamacpp:prompt_tokens_total Number of prompt tokens processed.\n"
                 "# TYPE llamacpp:prompt_tokens_total counter\n"
                 "llamacpp:prompt_tokens_total 31\n"
                 "llamacpp:requests_processing 1\n"
                 "llamacpp:requests_deferred 3"),  // (no final newline)
            "llama.cpp running=1 waiting=3 kv=-1 samples=3 skipped=0");
}

TEST(EngineMetrics, GarbageIsNotRecognizedAndNeverAFigure) {
  engine_metrics_reader r;
  r.feed("<html><body>404 Not Found</body></html>\n{\"error\":\"nope\"}\n");
  const auto& l = r.finish();
  EXPECT_FALSE(l.recognized());
  EXPECT_EQ(l.running, -1);
  EXPECT_EQ(read("vllm:num_requests_running NaN\nvllm:num_requests_waiting +Inf\n"
                 "vllm:num_requests_running{unclosed=\"x} 3\nvllm:kv_cache_usage_perc 7\n"
                 "vllm:num_requests_waiting 1e999\n"),
            "vllm running=-1 waiting=-1 kv=-1 samples=1 skipped=4");
  // Asked for one engine, another's names are not read.
  EXPECT_EQ(read(vllm_text, engine_kind::sglang),
            "sglang running=-1 waiting=-1 kv=-1 samples=0 skipped=0");
  // An endless line is skipped whole, and the next one is read.
  engine_metrics_reader big;
  big.feed("vllm:num_requests_running " + std::string(engine_metrics_reader::max_line_bytes, '9'));
  big.feed("\nvllm:num_requests_waiting 2\n");
  EXPECT_EQ(describe(big.finish()), "vllm running=-1 waiting=2 kv=-1 samples=1 skipped=1");
}

// vLLM writes one TTFT histogram per model (and per engine behind one server): summed by bound.
const std::string vllm_ttft =
    "# TYPE vllm:time_to_first_token_seconds histogram\n"
    "vllm:time_to_first_token_seconds_sum{engine=\"0\",model_name=\"m\"} 2.5\n"
    "vllm:time_to_first_token_seconds_bucket{engine=\"0\",le=\"0.02\",model_name=\"m\"} 1.0\n"
    "vllm:time_to_first_token_seconds_bucket{engine=\"0\",le=\"0.04\",model_name=\"m\"} 6.0\n"
    "vllm:time_to_first_token_seconds_bucket{engine=\"0\",le=\"+Inf\",model_name=\"m\"} 8.0\n"
    "vllm:time_to_first_token_seconds_count{engine=\"0\",model_name=\"m\"} 8.0\n"
    "vllm:time_to_first_token_seconds_bucket{engine=\"1\",model_name=\"m\",le=\"0.02\"} 1.0\n"
    "vllm:time_to_first_token_seconds_bucket{engine=\"1\",model_name=\"m\",le=\"0.04\"} 2.0\n"
    "vllm:time_to_first_token_seconds_bucket{engine=\"1\",model_name=\"m\",le=\"+Inf\"} 2.0\n";

TEST(EngineMetrics, TheEnginesTtftHistogramIsSummedByBound) {
  EXPECT_EQ(read(vllm_ttft),
            "vllm running=-1 waiting=-1 kv=-1 samples=8 skipped=0 ttft=[0.02:2,0.04:8,inf:10]");
  EXPECT_EQ(read("sglang:time_to_first_token_seconds_bucket{le=\"0.1\",model_name=\"x\"} 4\n"
                 "sglang:time_to_first_token_seconds_bucket{le=\"+Inf\",model_name=\"x\"} 4\n"),
            "sglang running=-1 waiting=-1 kv=-1 samples=2 skipped=0 ttft=[0.1:4,inf:4]");
  // A bucket without a bound, or with a bound that is no number, is skipped.
  EXPECT_EQ(read("vllm:time_to_first_token_seconds_bucket{model_name=\"m\"} 3\n"
                 "vllm:time_to_first_token_seconds_bucket{le=\"soon\"} 3\n"
                 "vllm:time_to_first_token_seconds_bucket{le=\"-1\"} 3\n"),
            "vllm running=-1 waiting=-1 kv=-1 samples=3 skipped=3");
  // A sum past what a double holds is skipped, not turned into infinity.
  EXPECT_EQ(read("vllm:time_to_first_token_seconds_bucket{le=\"1\"} 1e308\n"
                 "vllm:time_to_first_token_seconds_bucket{le=\"1\"} 1e308\n"),
            "vllm running=-1 waiting=-1 kv=-1 samples=2 skipped=1 ttft=[1:1e+308]");
  // Bounded: past max_buckets distinct bounds, the rest are skipped and counted.
  std::string many;
  for (std::size_t i = 1; i <= engine_load::max_buckets + 5; ++i)
    many += "vllm:time_to_first_token_seconds_bucket{le=\"" + std::to_string(i) + "\"} 1\n";
  engine_metrics_reader r;
  r.feed(many);
  const auto& l = r.finish();
  EXPECT_EQ(l.ttft.size(), engine_load::max_buckets);
  EXPECT_EQ(l.skipped, 5u);
}

TEST(EngineMetrics, BucketQuantilesAreHistogramQuantiles) {
  const double inf = std::numeric_limits<double>::infinity();
  // 10 observations: 2 at or under 20 ms, 8 at or under 40 ms, 2 above.
  const std::vector<histogram_bucket> b{{0.02, 2}, {0.04, 8}, {inf, 10}};
  EXPECT_DOUBLE_EQ(bucket_quantile(0.1, b), 0.01);             // rank 1 of 2 in [0, 0.02]
  EXPECT_DOUBLE_EQ(bucket_quantile(0.5, b), 0.03);             // rank 5: 3 of 6 in (0.02, 0.04]
  EXPECT_DOUBLE_EQ(bucket_quantile(0.99, b), 0.04);            // in +Inf: the largest finite bound
  EXPECT_EQ(bucket_quantile(0.5, {{0.02, 0}, {inf, 0}}), -1);  // nothing observed
  EXPECT_EQ(bucket_quantile(0.5, {}), -1);
  // Never past the bucket's bound by rounding (0.1 · 3 / 3 is 0.10000000000000002 in doubles),
  // and a count below an earlier bucket's (a garbled text) is read as that one.
  EXPECT_LE(bucket_quantile(1.0, {{0.1, 3}, {inf, 3}}), 0.1);
  EXPECT_DOUBLE_EQ(bucket_quantile(0.9, {{0.02, 5}, {0.04, 1}, {inf, 10}}), 0.04);
  // A window: what was observed between two reads; a count that fell is a restarted engine.
  std::vector<histogram_bucket> d;
  ASSERT_TRUE(bucket_delta(b, {{0.02, 2}, {0.04, 3}, {inf, 3}}, d));
  EXPECT_EQ(d, (std::vector<histogram_bucket>{{0.02, 0}, {0.04, 5}, {inf, 7}}));
  EXPECT_DOUBLE_EQ(bucket_quantile(0.5, d), 0.02 + 0.02 * 3.5 / 5);
  EXPECT_FALSE(bucket_delta({{0.02, 1}, {inf, 1}}, b, d));
  EXPECT_TRUE(d.empty());
  EXPECT_FALSE(bucket_delta({{0.02, 2}, {0.05, 8}, {inf, 10}}, b, d));
}

TEST(EngineMetrics, KindNames) {
  engine_kind k = engine_kind::vllm;
  EXPECT_TRUE(engine_kind_of("auto", k));
  EXPECT_EQ(k, engine_kind::unknown);
  EXPECT_TRUE(engine_kind_of("llama.cpp", k));
  EXPECT_EQ(k, engine_kind::llamacpp);
  EXPECT_FALSE(engine_kind_of("triton", k));
}

}  // namespace
}  // namespace tokentap::parsers
