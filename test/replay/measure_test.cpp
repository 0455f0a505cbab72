// A request measured as the proxy measures (replay/measure.hpp), against a real simulator on
// 127.0.0.1: its times, its gaps between token events, the server's usage and the answer's text;
// a refused connection, an error status and a reset stream are failures that say why.
#include "replay/measure.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>

#include "replay/trace_reader.hpp"
#include "sim/sim_server.hpp"
#include "test/support/stack.hpp"
#include "test/support/tls_cert.hpp"

namespace tokentap::replay {
namespace {

measurement measure_one(const measurer& m, const outgoing& out) {
  measurement got;
  asio::io_context ioc(1);
  asio::co_spawn(ioc, m.measure(out, got), asio::detached);
  ioc.run();
  return got;
}

outgoing chat(std::vector<std::pair<std::string, std::string>> sim_headers) {
  outgoing o;
  o.target = "/v1/chat/completions";
  o.headers = std::move(sim_headers);
  o.headers.emplace_back("content-type", "application/json");
  o.body = R"({"model":"sim-small","stream":true,"stream_options":{"include_usage":true},)"
           R"("messages":[{"role":"user","content":"hello there"}]})";
  return o;
}

TEST(Measure, AStreamedAnswerIsTimedCountedAndKept) {
  sim::server sim(test::loopback_sim(30, 10, 6));
  sim.start();
  const measurer m(
      {.host = "127.0.0.1", .port = sim.endpoint().port(), .max_gaps = 3, .max_text = 12});
  const auto got = measure_one(m, chat({}));
  EXPECT_TRUE(got.ok) << got.error;
  EXPECT_EQ(got.status, 200);
  EXPECT_EQ(got.outcome, "ok");
  EXPECT_GE(got.ttft_ms, 30);
  EXPECT_LT(got.ttft_ms, 1000);
  EXPECT_DOUBLE_EQ(got.ttfo_ms, got.ttft_ms);  // no reasoning
  EXPECT_GE(got.e2e_ms, got.ttft_ms + 5 * 10 * 0.9);
  EXPECT_NEAR(got.tpot_ms, 10, 5);
  EXPECT_EQ(got.token_events, 6u);
  EXPECT_EQ(got.event_gaps_ms.size(), 3u);  // the first max_gaps of 5
  for (const double g : got.event_gaps_ms) EXPECT_GT(g, 5);
  EXPECT_EQ(got.usage.output_tokens, 6);
  EXPECT_GT(got.usage.input_tokens, 0);
  EXPECT_EQ(got.content.size(), 12u);  // the first max_text bytes of the answer
  EXPECT_GT(got.sent_ns, 0);
}

TEST(Measure, ReasoningComesBeforeTheFirstAnswerToken) {
  sim::server sim(test::loopback_sim(5, 20, 3));
  sim.start();
  const measurer m({.host = "127.0.0.1", .port = sim.endpoint().port(), .max_text = 1000});
  const auto got = measure_one(m, chat({{"x-sim-reasoning-tokens", "4"}}));
  ASSERT_TRUE(got.ok) << got.error;
  EXPECT_GE(got.ttfo_ms, got.ttft_ms + 4 * 20 * 0.9);
  EXPECT_FALSE(got.content.empty());
  EXPECT_EQ(got.token_events, 7u);
}

// With `analyze`, the steps and cache hooks run as in the proxy: reasoning steps are counted,
// and a conversation whose system prompt changed is a miss the cache hook explains.
TEST(Measure, StepsAndCacheEventsAsTheProxyFindsThem) {
  sim::server sim(test::loopback_sim(5, 2, 20));
  sim.start();
  const measurer m({.host = "127.0.0.1", .port = sim.endpoint().port(), .analyze = true});
  const auto ask = [&](const std::string& system) {
    auto o = chat({{"x-sim-reasoning-tokens", "30"}});
    o.body = R"({"model":"sim-small","stream":true,"stream_options":{"include_usage":true},)"
             R"("messages":[{"role":"system","content":")" +
             system + R"("},{"role":"user","content":"hello there, what is up"}]})";
    return measure_one(m, o);
  };
  const auto first = ask("You are a helpful assistant who answers briefly.");
  ASSERT_TRUE(first.ok) << first.error;
  EXPECT_GT(first.steps, 0u);
  EXPECT_EQ(first.cache_outcome, "miss");
  // The reasoning's last conclusion step, as text: from "Therefore" / "So" / "因此" to the next
  // step.
  const measurer texts(
      {.host = "127.0.0.1", .port = sim.endpoint().port(), .max_text = 100000, .analyze = true});
  const auto long_reasoning = measure_one(texts, chat({{"x-sim-reasoning-tokens", "200"}}));
  ASSERT_TRUE(long_reasoning.ok);
  const auto& c = long_reasoning.conclusion;
  ASSERT_FALSE(c.empty());
  const auto head = c.substr(0, 12);
  EXPECT_TRUE(head.find("Therefore") != std::string::npos || head.find("So") != std::string::npos ||
              head.find("因此") != std::string::npos)
      << c;
  EXPECT_LT(c.size(), 200u) << "one step, not the whole reasoning";
  const auto changed = ask("You are a terse assistant.");
  ASSERT_TRUE(changed.ok);
  EXPECT_NE(
      std::find(changed.cache_events.begin(), changed.cache_events.end(), "prefix_divergence"),
      changed.cache_events.end());
  // Without it, neither hook runs.
  const measurer plain({.host = "127.0.0.1", .port = sim.endpoint().port()});
  const auto none = measure_one(plain, chat({{"x-sim-reasoning-tokens", "30"}}));
  EXPECT_EQ(none.steps, 0u);
  EXPECT_TRUE(none.cache_events.empty());
}

// With a trace directory, each request leaves the proxy's trace record, read back as `analyze`
// reads it, under the id the measurement names.
TEST(Measure, EachRequestLeavesATraceRecord) {
  sim::server sim(test::loopback_sim(5, 2, 3));
  sim.start();
  const auto dir = test::temp_dir() + "/traces";
  std::filesystem::create_directories(dir);
  std::string id;
  {
    const measurer m({.host = "127.0.0.1", .port = sim.endpoint().port(), .trace_dir = dir});
    const auto got = measure_one(m, chat({}));
    ASSERT_TRUE(got.ok) << got.error;
    id = got.trace_record_id;
  }  // the writer writes what is queued as the measurer goes
  ASSERT_EQ(id.size(), 16u);
  const auto read = read_traces({dir});
  ASSERT_EQ(read.records.size(), 1u);
  EXPECT_EQ(read.records[0].id, id);
  EXPECT_EQ(read.records[0].status, 200);
  EXPECT_GE(read.records[0].ttft_ms, 5);
  EXPECT_NE(read.records[0].body.value_or("").find("hello there"), std::string::npos);
}

TEST(Measure, FailuresSayWhy) {
  sim::server sim(test::loopback_sim(1, 1, 4));
  sim.start();
  const measurer m({.host = "127.0.0.1", .port = sim.endpoint().port()});
  const auto refused = measure_one(m, chat({{"x-sim-status", "503"}}));
  EXPECT_FALSE(refused.ok);
  EXPECT_EQ(refused.status, 503);
  const auto reset = measure_one(m, chat({{"x-sim-reset-after", "2"}}));
  EXPECT_FALSE(reset.ok);
  EXPECT_EQ(reset.status, 200);
  EXPECT_EQ(reset.outcome, "upstream_reset");
  EXPECT_EQ(reset.error.rfind("response: ", 0), 0u) << reset.error;
  const auto in_stream = measure_one(m, chat({{"x-sim-error-after", "1"}}));
  EXPECT_FALSE(in_stream.ok);
  EXPECT_EQ(in_stream.outcome, "stream_error");
  // Nobody listens there once the simulator is gone.
  std::uint16_t port = 0;
  {
    sim::server gone_soon(test::loopback_sim(1, 1, 1));
    gone_soon.start();
    port = gone_soon.endpoint().port();
  }
  const measurer gone({.host = "127.0.0.1", .port = port});
  const auto none = measure_one(gone, chat({}));
  EXPECT_FALSE(none.ok);
  EXPECT_EQ(none.status, 0);
  EXPECT_EQ(none.outcome, "no_response");
  EXPECT_EQ(none.error.rfind("connect: ", 0), 0u) << none.error;
}

}  // namespace
}  // namespace tokentap::replay
