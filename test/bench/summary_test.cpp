// A run's summary.json (DESIGN.md §14) from its requests: warm-up left out, failures counted but
// not timed, ITL pooled apart from the gaps between events, throughput and goodput over the
// level's duration, schedule lag and whether the client kept up, accuracy with its interval.
#include "bench/summary.hpp"

#include <gtest/gtest.h>
#include <simdjson.h>

#include <algorithm>
#include <string>
#include <vector>

namespace tokentap::bench {
namespace {

request_result ok_request(std::string id, double ttft, double e2e, std::int64_t out) {
  request_result r;
  r.id = std::move(id);
  r.status = 200;
  r.ok = true;
  r.ttft_ms = ttft;
  r.ttfo_ms = ttft + 5;
  r.e2e_ms = e2e;
  r.output_tokens = out;
  r.tpot_ms = (e2e - ttft) / static_cast<double>(out - 1);
  r.mean_itl_ms = r.tpot_ms;
  r.itl_ms.assign(static_cast<std::size_t>(out - 1), r.tpot_ms);
  r.itl_per_token = true;
  r.chunk_gap_ms = {r.tpot_ms * 2};
  return r;
}

double num(simdjson::dom::element e) {
  double v = -1;
  if (e.is_double()) v = e.get_double().value();
  if (e.is_int64()) v = static_cast<double>(e.get_int64().value());
  if (e.is_uint64()) v = static_cast<double>(e.get_uint64().value());
  return v;
}

TEST(Summary, ALevelFromItsRequests) {
  std::vector<request_result> rs;
  rs.push_back(ok_request("a", 100, 1100, 11));  // TPOT 100
  rs.push_back(ok_request("b", 300, 800, 6));    // TPOT 100
  rs.push_back(ok_request("c", 900, 1900, 3));   // TPOT 500
  request_result failed;
  failed.id = "d";
  failed.status = 503;
  rs.push_back(failed);
  auto warm = ok_request("w", 5000, 9000, 2);
  warm.warmup = true;
  rs.push_back(warm);
  rs[0].itl_per_token = false;  // its server does not count tokens per chunk
  rs[0].schedule_lag_ms = 0.2;
  rs[1].schedule_lag_ms = 4;
  rs[2].tokens_estimated = true;
  rs[0].category = "math";
  rs[0].correct = true;
  rs[1].category = "math";
  rs[1].correct = false;
  rs[2].category = "code";
  rs[2].correct = true;
  rs[0].steps = 4;
  rs[0].backtracks = 1;
  rs[1].steps = 2;
  rs[0].cache_outcome = "miss";
  rs[0].cache_events = {"miss"};
  rs[1].cache_outcome = "miss";
  rs[1].cache_events = {"miss", "prefix_divergence"};
  rs[2].cache_outcome = "hit";
  rs[0].consistent = true;
  rs[1].consistent = false;
  const level l{.load = level::kind::concurrency, .value = 4, .duration_s = 2, .requests = rs};
  slo goodput;
  goodput.ttft_ms = 500;
  goodput.itl_ms = 200;
  const auto text = summary_json(std::span(&l, 1), goodput, 3);
  simdjson::dom::parser p;
  const auto doc = p.parse(text);
  ASSERT_FALSE(doc.error()) << text;
  const auto lv = doc["levels"].at(0);
  EXPECT_EQ(num(lv["load"]["concurrency"]), 4);
  EXPECT_EQ(num(lv["requests"]), 4);  // the warm-up request is not one
  EXPECT_EQ(num(lv["ok"]), 3);
  EXPECT_EQ(num(lv["errors"]), 1);
  EXPECT_EQ(num(lv["tokens_estimated"]), 1);
  EXPECT_FALSE(lv["itl_per_token"].get_bool().value());  // a's ITL is one gap per event
  const auto m = lv["metrics"];
  EXPECT_EQ(num(m["ttft_ms"]["n"]), 3);
  EXPECT_DOUBLE_EQ(num(m["ttft_ms"]["p50"]), 300);
  EXPECT_DOUBLE_EQ(num(m["ttft_ms"]["mean"]), 433.333);
  EXPECT_DOUBLE_EQ(num(m["ttfo_ms"]["p50"]), 305);
  EXPECT_EQ(num(m["itl_ms"]["n"]), 1 + 5 + 2);  // every gap, pooled; a's events for its tokens
  EXPECT_EQ(num(m["chunk_gap_ms"]["n"]), 3);
  // The gaps' percentiles 0…100 (the report's ITL CDF): 100 ×5, 200, 500 ×2.
  const auto cdf = lv["itl_percentiles_ms"].get_array();
  ASSERT_EQ(cdf.size(), 101u);
  EXPECT_DOUBLE_EQ(num(cdf.at(0)), 100);
  EXPECT_DOUBLE_EQ(num(cdf.at(50)), 100);
  EXPECT_DOUBLE_EQ(num(cdf.at(75)), 275);  // rank 5.25: 200 + 0.25 × 300
  EXPECT_DOUBLE_EQ(num(cdf.at(100)), 500);
  EXPECT_DOUBLE_EQ(num(m["tpot_ms"]["p50"]), 100);
  EXPECT_DOUBLE_EQ(num(m["e2e_ms"]["p99"]), 1884);  // 1100 + 0.98 × 800
  // 3 ok over 2 s; 20 output tokens.
  EXPECT_DOUBLE_EQ(num(lv["throughput"]["requests_per_s"]), 1.5);
  EXPECT_DOUBLE_EQ(num(lv["throughput"]["output_tokens_per_s"]), 10);
  // Good: a and b (c's TTFT 900 > 500, d failed) — half of the four.
  EXPECT_DOUBLE_EQ(num(lv["goodput"]["fraction"]), 0.5);
  EXPECT_DOUBLE_EQ(num(lv["goodput"]["requests_per_s"]), 1);
  // Lag: 0.2, 4, 0, 0 — its P99 is past 1 ms: the client did not keep up.
  EXPECT_FALSE(lv["client_kept_up"].get_bool().value());
  EXPECT_FALSE(client_kept_up(l));
  EXPECT_NEAR(schedule_lag_p99(l), 0.2 + 0.97 * (4 - 0.2), 1e-9);  // of 0, 0, 0.2, 4
  EXPECT_GT(num(lv["schedule_lag_ms"]["p99"]), 1);
  // Steps per response that succeeded, and the share that backtracked; cache by name.
  EXPECT_DOUBLE_EQ(num(lv["steps"]["mean"]), 2);
  EXPECT_NEAR(num(lv["steps"]["backtracking_share"]), 1.0 / 3, 1e-4);
  EXPECT_EQ(num(lv["steps"]["max"]), 3);
  EXPECT_EQ(num(lv["steps"]["over_max"]), 1);  // a's 4 steps
  EXPECT_EQ(num(lv["step_consistency"]["n"]), 2);
  EXPECT_DOUBLE_EQ(num(lv["step_consistency"]["share"]), 0.5);
  EXPECT_EQ(num(lv["cache"]["outcomes"]["miss"]), 2);
  EXPECT_EQ(num(lv["cache"]["outcomes"]["hit"]), 1);
  EXPECT_EQ(num(lv["cache"]["events"]["prefix_divergence"]), 1);
  EXPECT_EQ(num(lv["cache"]["events"]["miss"]), 2);
  const auto math = lv["accuracy"]["math"];
  EXPECT_EQ(num(math["n"]), 2);
  EXPECT_EQ(num(math["correct"]), 1);
  EXPECT_DOUBLE_EQ(num(math["accuracy"]), 0.5);
  EXPECT_NEAR(num(math["ci95"].at(0)), 0.0945, 1e-4);
  EXPECT_NEAR(num(math["ci95"].at(1)), 0.9055, 1e-4);
  EXPECT_EQ(num(lv["accuracy"]["code"]["correct"]), 1);
}

TEST(Summary, WithoutSlosOrRequestsTheFiguresAreNull) {
  const level l{.load = level::kind::rate, .value = 2.5, .duration_s = 10, .requests = {}};
  const auto text = summary_json(std::span(&l, 1), slo{});
  simdjson::dom::parser p;
  const auto lv = p.parse(text)["levels"].at(0);
  ASSERT_FALSE(lv.error()) << text;
  EXPECT_DOUBLE_EQ(num(lv["load"]["rate"]), 2.5);
  EXPECT_TRUE(lv["goodput"].is_null());
  EXPECT_TRUE(lv["metrics"]["ttft_ms"]["p99"].is_null());
  EXPECT_TRUE(lv["client_kept_up"].get_bool().value());
  EXPECT_TRUE(lv["itl_per_token"].get_bool().value());  // nothing says otherwise
}

TEST(Summary, GoodputBoundsAreParsedOrRefusedWithTheirReason) {
  std::string error;
  const auto s = parse_slo("ttft_ms:500,itl_ms:50", error);
  ASSERT_TRUE(s) << error;
  EXPECT_EQ(s->ttft_ms, 500);
  EXPECT_EQ(s->itl_ms, 50);
  EXPECT_LT(s->e2e_ms, 0);
  EXPECT_FALSE(parse_slo("ttft:500", error));
  EXPECT_EQ(error, "--goodput: unknown metric 'ttft' (ttft_ms, ttfo_ms, itl_ms, tpot_ms, e2e_ms)");
  EXPECT_FALSE(parse_slo("e2e_ms:0", error));
  EXPECT_EQ(error, "--goodput: e2e_ms needs a bound in ms above 0, as e2e_ms:500");
  EXPECT_FALSE(parse_slo("tpot_ms:5x", error));
  EXPECT_FALSE(parse_slo("", error));
  EXPECT_EQ(error, "--goodput needs at least one bound, as ttft_ms:500,itl_ms:50");
  // A request meets the bounds set, and only when it succeeded.
  request_result r;
  r.ok = true;
  r.ttft_ms = 400;
  r.mean_itl_ms = 60;
  EXPECT_FALSE(s->met_by(r));
  r.mean_itl_ms = 50;
  EXPECT_TRUE(s->met_by(r));
  r.ok = false;
  EXPECT_FALSE(s->met_by(r));
}

TEST(Summary, ARequestLine) {
  auto r = ok_request("q-7", 12.5, 100, 3);
  r.level = 2;
  r.input_tokens = 40;
  r.category = "math";
  r.correct = true;
  r.steps = 3;
  r.cache_outcome = "miss";
  r.cache_events = {"miss", "prefix_divergence"};
  EXPECT_EQ(
      request_json(r),
      R"({"id":"q-7","level":2,"status":200,"ok":true,"ttft_ms":12.500,"ttfo_ms":17.500,)"
      R"("e2e_ms":100.000,"tpot_ms":43.750,"input_tokens":40,"output_tokens":3,)"
      R"("cached_tokens":null,"schedule_lag_ms":0.000,"category":"math","correct":true,)"
      R"("steps":3,"backtracks":0,"cache":"miss","cache_events":["miss","prefix_divergence"],)"
      R"("attribution":{"connect_ms":null,"upstream_head_ms":null,"first_token_ms":null,)"
      R"("decode_ms":null}})");
  // A conversation's turn, and an attribution with the engine's account.
  r.id = "c1/2";
  r.turn = 2;
  r.correct.reset();
  r.steps = 0;
  r.cache_outcome.clear();
  r.cache_events.clear();
  r.attribution = {.connect_ms = 0.1,
                   .upstream_head_ms = 0.5,
                   .first_token_ms = 12,
                   .decode_ms = 87.5,
                   .engine = "vllm",
                   .engine_queue_ms = 1,
                   .engine_prefill_ms = 9,
                   .engine_decode_ms = 86,
                   .unexplained_ms = 2.5};
  EXPECT_EQ(request_json(r),
            R"({"id":"c1/2","level":2,"turn":2,"status":200,"ok":true,"ttft_ms":12.500,)"
            R"("ttfo_ms":17.500,"e2e_ms":100.000,"tpot_ms":43.750,"input_tokens":40,)"
            R"("output_tokens":3,"cached_tokens":null,"schedule_lag_ms":0.000,)"
            R"("attribution":{"connect_ms":0.100,"upstream_head_ms":0.500,)"
            R"("first_token_ms":12.000,"decode_ms":87.500,"engine":{"source":"vllm",)"
            R"("queue_ms":1.000,"prefill_ms":9.000,"decode_ms":86.000},)"
            R"("unexplained_ms":2.500}})");
  std::string error;
  const auto back = read_requests(request_json(r), "requests.jsonl", error);
  ASSERT_TRUE(back) << error;
  EXPECT_EQ((*back)[0].turn, 2u);
}

// requests.jsonl read back: what compare needs of every request, and a broken line refused.
TEST(Summary, RequestLinesReadBack) {
  auto a = ok_request("q-7", 12.5, 100, 3);
  a.level = 2;
  a.input_tokens = 40;
  a.category = "math";
  a.correct = true;
  a.warmup = true;
  a.schedule_lag_ms = 0.25;
  request_result failed;
  failed.id = "q-8";
  failed.status = 503;
  const auto text = request_json(a) + "\n\n" + request_json(failed) + "\n";
  std::string error;
  const auto back = read_requests(text, "requests.jsonl", error);
  ASSERT_TRUE(back) << error;
  ASSERT_EQ(back->size(), 2u);
  const auto& r = (*back)[0];
  EXPECT_EQ(r.id, "q-7");
  EXPECT_EQ(r.level, 2u);
  EXPECT_TRUE(r.ok);
  EXPECT_TRUE(r.warmup);
  EXPECT_DOUBLE_EQ(r.ttft_ms, 12.5);
  EXPECT_DOUBLE_EQ(r.tpot_ms, 43.75);
  EXPECT_EQ(r.input_tokens, 40);
  EXPECT_EQ(r.cached_tokens, -1);
  EXPECT_DOUBLE_EQ(r.schedule_lag_ms, 0.25);
  ASSERT_TRUE(r.correct.has_value());
  EXPECT_TRUE(*r.correct);
  EXPECT_EQ(r.category, "math");
  const auto& f = (*back)[1];
  EXPECT_FALSE(f.ok);
  EXPECT_EQ(f.status, 503);
  EXPECT_EQ(f.ttft_ms, -1);
  EXPECT_FALSE(f.correct.has_value());
  EXPECT_FALSE(read_requests(text + "{\"id\":\"x\"}\n", "requests.jsonl", error));
  EXPECT_EQ(error, "requests.jsonl:4: a request needs id, level, status and ok");
  EXPECT_FALSE(read_requests("oops\n", "r.jsonl", error));
  EXPECT_EQ(error, "r.jsonl:1: not a request (a JSON object)");
}

// A long run's gaps: every one while they fit, then a uniform sample of them — bounded, and its
// percentiles those of all the gaps; the summary reports the count of all of them.
TEST(Summary, AGapPoolKeepsAUniformSampleOfBoundedSize) {
  gap_pool pool(2000, 7);
  for (int i = 0; i < 200000; ++i) pool.add(static_cast<double>(i % 1000));
  EXPECT_EQ(pool.seen(), 200000u);
  ASSERT_EQ(pool.kept().size(), 2000u);
  auto kept = pool.kept();
  std::sort(kept.begin(), kept.end());
  EXPECT_NEAR(kept[1000], 500, 40);  // the median of 0 … 999
  EXPECT_NEAR(kept[1980], 990, 15);  // P99
  request_result r = ok_request("a", 10, 100, 3);
  level l;
  l.duration_s = 1;
  l.requests = std::span<const request_result>(&r, 1);
  l.itl_gaps = &pool;
  l.chunk_gaps = &pool;
  l.itl_per_token = false;
  const auto json = summary_json(std::span<const level>(&l, 1), slo{});
  EXPECT_NE(json.find(R"("itl_ms":{"n":200000,)"), std::string::npos) << json;
  EXPECT_NE(json.find(R"("itl_per_token":false)"), std::string::npos) << json;
}

}  // namespace
}  // namespace tokentap::bench
