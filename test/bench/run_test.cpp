// The runner on a real simulator (127.0.0.1): a closed loop sends its requests and no more, an
// open loop sends on its schedule and measures how late it was, warm-up requests are sent but
// marked, a short workload repeats under ids of its own, and graded tasks are judged.
#include "bench/run.hpp"

#include <gtest/gtest.h>
#include <simdjson.h>

#include <set>

#include "sim/sim_server.hpp"
#include "test/support/stack.hpp"

namespace tokentap::bench {
namespace {

std::vector<task> tasks_of(const std::string& jsonl) {
  std::string error;
  auto w = read_tasks(jsonl, "w.jsonl", error);
  EXPECT_TRUE(w.has_value()) << error;
  return w.value_or(std::vector<task>{});
}

struct simulator {
  simulator() : sim(test::loopback_sim(5, 2, 4)) { sim.start(); }
  run_options options() const {
    run_options o;
    o.port = sim.endpoint().port();
    o.model = "sim-small";
    return o;
  }
  sim::server sim;
};

TEST(Run, AClosedLoopSendsItsRequestsAndRepeatsAShortWorkload) {
  simulator s;
  const auto tasks = tasks_of(R"({"id":"a","prompt":"one"})"
                              "\n"
                              R"({"id":"b","messages":[{"role":"user","content":"two"}]})");
  auto o = s.options();
  o.values = {3};
  o.requests = 7;
  std::size_t seen = 0;
  o.on_request = [&](const request_result&) { ++seen; };
  const auto r = run(tasks, o);
  ASSERT_EQ(r.requests.size(), 7u);
  EXPECT_EQ(seen, 7u);
  std::set<std::string> ids;
  for (const auto& q : r.requests) {
    EXPECT_TRUE(q.ok) << q.id;
    EXPECT_EQ(q.status, 200);
    EXPECT_GE(q.ttft_ms, 5);
    EXPECT_EQ(q.output_tokens, 4);  // the server's usage
    EXPECT_FALSE(q.tokens_estimated);
    EXPECT_GT(q.input_tokens, 0);
    EXPECT_TRUE(q.chunk_gap_ms.empty());            // pooled into the level's gaps as it ended
    EXPECT_EQ(q.schedule_lag_ms, 0);                // a closed loop has no schedule
    EXPECT_FALSE(q.cache_outcome.empty()) << q.id;  // the cache hook judged it
    ids.insert(q.id);
  }
  EXPECT_EQ(ids, (std::set<std::string>{"a", "b", "a#2", "b#2", "a#3", "b#3", "a#4"}));
  ASSERT_EQ(r.levels.size(), 1u);
  EXPECT_EQ(r.levels[0].requests.size(), 7u);
  EXPECT_GT(r.levels[0].duration_s, 0);
  // Four tokens, one an event: three gaps a request, in the level's pools.
  ASSERT_NE(r.levels[0].chunk_gaps, nullptr);
  EXPECT_EQ(r.levels[0].chunk_gaps->seen(), 21u);
  EXPECT_EQ(r.levels[0].itl_gaps->kept().size(), 21u);
  EXPECT_FALSE(r.levels[0].itl_per_token);
  // A prompt and a conversation: both reached the simulator.
  EXPECT_EQ(s.sim.stats().requests.load(), 7u);
}

TEST(Run, AnOpenLoopKeepsItsScheduleAndEachLevelStartsTheWorkloadAgain) {
  simulator s;
  const auto tasks = tasks_of(R"({"prompt":"x"})");
  auto o = s.options();
  o.load = level::kind::rate;
  o.values = {50, 100};
  o.requests = 20;
  o.arrivals = arrival::constant;
  const auto r = run(tasks, o);
  ASSERT_EQ(r.levels.size(), 2u);
  for (const auto& l : r.levels) {
    ASSERT_EQ(l.requests.size(), 20u);
    EXPECT_EQ(l.requests.front().id, "line1");
    std::vector<double> lags;
    for (const auto& q : l.requests) {
      EXPECT_TRUE(q.ok);
      lags.push_back(q.schedule_lag_ms);
    }
    // 20 requests 1/rate apart: the level lasts about 20/rate, and the client kept up.
    EXPECT_GT(l.duration_s, 19 / l.value);
    std::sort(lags.begin(), lags.end());
    EXPECT_LT(lags[lags.size() / 2], 5) << "median lag";
  }
  EXPECT_EQ(r.levels[1].requests[0].level, 1u);
}

TEST(Run, WarmUpRequestsAreSentButMarkedAndADurationStopsALevel) {
  simulator s;
  const auto tasks = tasks_of(R"({"prompt":"x"})");
  auto o = s.options();
  o.values = {2};
  o.warmup_s = 0.2;
  o.duration_s = 0.3;
  const auto r = run(tasks, o);
  std::size_t warm = 0, counted = 0;
  for (const auto& q : r.requests) (q.warmup ? warm : counted) += 1;
  EXPECT_GT(warm, 2u);
  EXPECT_GT(counted, 2u);
  // Warm-up first, then the counted ones; the level's duration is the counted part's.
  EXPECT_TRUE(r.requests.front().warmup);
  EXPECT_FALSE(r.requests.back().warmup);
  EXPECT_GE(r.levels[0].duration_s, 0.25);
  EXPECT_LT(r.levels[0].duration_s, 2);
  // The summary leaves the warm-up out.
  simdjson::dom::parser p;
  const auto doc = p.parse(summary_json(r.levels, slo{}));
  ASSERT_FALSE(doc.error());
  EXPECT_EQ(doc["levels"].at(0)["requests"].get_uint64().value(), counted);
}

TEST(Run, GradedTasksAreJudgedOnTheAnswer) {
  simulator s;
  // The simulator's answers are prose from its own word list: an exact answer of "no such
  // answer" is wrong, a regex any answer matches is right.
  const auto tasks =
      tasks_of(R"({"id":"wrong","category":"c","prompt":"q","answer":"no such answer"})"
               "\n"
               R"({"id":"right","category":"c","prompt":"q","answer":"[a-z]","grader":"regex"})");
  auto o = s.options();
  o.requests = 2;
  const auto r = run(tasks, o);
  ASSERT_EQ(r.requests.size(), 2u);
  for (const auto& q : r.requests) {
    ASSERT_TRUE(q.correct.has_value());
    EXPECT_EQ(*q.correct, q.id == "right") << q.id;
    EXPECT_EQ(q.category, "c");
  }
}

TEST(Run, TheRequestATaskBecomes) {
  task chat;
  chat.messages = {{"system", "Be brief."}, {"user", "Hi \"you\""}};
  chat.max_tokens = 32;
  EXPECT_EQ(request_of(chat, "m").first, "/v1/chat/completions");
  EXPECT_EQ(request_of(chat, "m").second,
            R"({"model":"m","messages":[{"role":"system","content":"Be brief."},)"
            R"({"role":"user","content":"Hi \"you\""}],"max_tokens":32,"stream":true,)"
            R"("stream_options":{"include_usage":true}})");
  task completion;
  completion.prompt = "Once";
  EXPECT_EQ(request_of(completion, "m").first, "/v1/chat/completions");
  EXPECT_EQ(request_of(completion, "m").second,
            R"({"model":"m","messages":[{"role":"user","content":"Once"}],"stream":true,)"
            R"("stream_options":{"include_usage":true}})");
}

}  // namespace
}  // namespace tokentap::bench
