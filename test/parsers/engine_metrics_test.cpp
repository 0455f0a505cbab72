// Engines' own /metrics text, read for their load: vLLM's, SGLang's, TGI's and llama.cpp's names
// (recorded shapes), fed whole, at every split, byte by byte and in random chunks.
#include "parsers/engine_metrics.hpp"

#include <gtest/gtest.h>

#include "test/support/chunking.hpp"

namespace tokentap::parsers {
namespace {

std::string describe(const engine_load& l) {
  char b[200];
  std::snprintf(b, sizeof b, "%s running=%g waiting=%g kv=%g samples=%llu skipped=%llu",
                std::string(to_string(l.kind)).c_str(), l.running, l.waiting, l.kv_usage,
                static_cast<unsigned long long>(l.samples),
                static_cast<unsigned long long>(l.skipped));
  return b;
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
  EXPECT_EQ(read(vllm_text), "vllm running=5 waiting=7 kv=0.5 samples=7 skipped=0");
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
