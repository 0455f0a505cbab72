// The OTLP/HTTP span exporter against a receiver the test scripts, on a real socket: batches of
// batch_spans leave at once and a partial one at the stop, to the endpoint's path with the
// configured headers; the queue's bound drops what does not fit, counted; a 429/5xx is retried
// after its Retry-After up to max_attempts, another status or no answer drops the batch, counted.
#include "proxy/otlp_exporter.hpp"

#include <gtest/gtest.h>

#include <memory>

#include "test/proxy/scripted_http.hpp"

namespace tokentap::proxy {
namespace {

using namespace std::chrono_literals;
using test::eventually;
using test::scripted_http;

config::otel_config receiver(const std::string& url, std::size_t batch, std::size_t queue = 64) {
  config::otel_config c;
  c.endpoint = url;
  c.protocol = config::otel_config::protocol_kind::json;
  c.batch_spans = batch;
  c.queue_spans = queue;
  c.batch_delay = 60s;  // only full batches leave while it runs
  c.export_timeout = 2s;
  c.headers = {{"x-team", "latency"}};
  return c;
}

std::vector<hooks::otel_span> spans(std::initializer_list<const char*> names) {
  std::vector<hooks::otel_span> out;
  for (const auto* n : names) {
    hooks::otel_span s;
    s.name = n;
    s.trace_id[0] = 1;
    s.span_id[0] = 2;
    out.push_back(std::move(s));
  }
  return out;
}

TEST(OtlpExporter, FullBatchesLeaveAtOnceAndThePartialOneAtTheStop) {
  scripted_http up;
  {
    otlp_exporter x(receiver(up.url("/v1/traces"), 2));
    x.export_spans(spans({"a"}));
    x.export_spans(spans({"b", "c"}));
    x.export_spans(spans({"d", "e"}));
    ASSERT_TRUE(eventually([&] { return x.stats().requests.load() == 2; }));
    EXPECT_EQ(x.stats().exported.load(), 4u);
    std::this_thread::sleep_for(50ms);
    EXPECT_EQ(up.heads().size(), 2u);  // "e" waits for a batch or the stop
  }
  const auto heads = up.heads();
  const auto bodies = up.bodies();
  ASSERT_EQ(heads.size(), 3u);
  EXPECT_EQ(heads[0].rfind("POST /v1/traces HTTP/1.1\r\n", 0), 0u) << heads[0];
  for (const auto& h : heads) {
    EXPECT_NE(h.find("Content-Type: application/json"), std::string::npos) << h;
    EXPECT_NE(h.find("x-team: latency"), std::string::npos) << h;
  }
  EXPECT_NE(bodies[0].find("\"name\":\"a\""), std::string::npos) << bodies[0];
  EXPECT_NE(bodies[0].find("\"name\":\"b\""), std::string::npos) << bodies[0];
  EXPECT_NE(bodies[2].find("\"name\":\"e\""), std::string::npos) << bodies[2];
  EXPECT_NE(bodies[2].find("\"service.name\""), std::string::npos) << bodies[2];
}

TEST(OtlpExporter, WhatTheQueueCannotHoldIsDroppedAndCounted) {
  scripted_http up;
  {
    otlp_exporter x(receiver(up.url("/v1/traces"), 100, 4));
    x.export_spans(spans({"a", "b", "c"}));
    x.export_spans(spans({"d", "e"}));  // 5 > 4: both dropped, none half-taken
    x.export_spans(spans({"f"}));
    EXPECT_EQ(x.stats().queue_full.load(), 2u);
    EXPECT_EQ(x.stats().requests.load(), 0u);
  }  // the stop sends the four
  const auto bodies = up.bodies();
  ASSERT_EQ(bodies.size(), 1u);
  for (const char* kept : {"a", "b", "c", "f"})
    EXPECT_NE(bodies[0].find("\"name\":\"" + std::string(kept) + "\""), std::string::npos) << kept;
  EXPECT_EQ(bodies[0].find("\"name\":\"d\""), std::string::npos);
}

TEST(OtlpExporter, A503IsRetriedAfterItsRetryAfterUpToTheLimit) {
  scripted_http up;
  up.status = 503;
  up.retry_after_s = 0;
  otlp_exporter x(receiver(up.url("/v1/traces"), 1));
  x.export_spans(spans({"a"}));
  ASSERT_TRUE(eventually([&] { return x.stats().failed.load() == 1; }));
  EXPECT_EQ(x.stats().requests.load(), std::uint64_t(otlp_exporter::max_attempts));
  EXPECT_EQ(x.stats().retries.load(), std::uint64_t(otlp_exporter::max_attempts - 1));
  EXPECT_EQ(up.heads().size(), std::size_t(otlp_exporter::max_attempts));
  // The receiver recovers: the next batch goes through on its first attempt.
  up.status = 200;
  x.export_spans(spans({"b"}));
  ASSERT_TRUE(eventually([&] { return x.stats().exported.load() == 1; }));
  EXPECT_EQ(x.stats().requests.load(), std::uint64_t(otlp_exporter::max_attempts) + 1);
}

TEST(OtlpExporter, AnotherStatusOrNoAnswerDropsTheBatchAtOnce) {
  scripted_http up;
  up.status = 400;
  otlp_exporter x(receiver(up.url("/v1/traces"), 1));
  x.export_spans(spans({"a"}));
  ASSERT_TRUE(eventually([&] { return x.stats().failed.load() == 1; }));
  EXPECT_EQ(x.stats().requests.load(), 1u);
  EXPECT_EQ(x.stats().retries.load(), 0u);

  std::string gone_url;
  {
    scripted_http gone;
    gone_url = gone.url("/v1/traces");
  }  // its port now refuses
  otlp_exporter refused(receiver(gone_url, 1));
  refused.export_spans(spans({"a", "b"}));
  ASSERT_TRUE(eventually([&] { return refused.stats().failed.load() == 2; }));
  EXPECT_EQ(refused.stats().requests.load(), 2u);  // two batches of one, one attempt each
  EXPECT_EQ(refused.stats().exported.load(), 0u);
}

}  // namespace
}  // namespace tokentap::proxy
