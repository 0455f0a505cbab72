// Cache events caused for real: the real proxy in front of the simulator with its prefix cache,
// each event's evidence checked in the trace record.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "test/support/http_client.hpp"
#include "test/support/stack.hpp"
#include "test/support/tls_cert.hpp"

namespace tokentap::test {
namespace {

std::string msg(const std::string& role, const std::string& content) {
  return R"({"role":")" + role + R"(","content":")" + content + R"("})";
}

const std::string system_prompt = "You are a meticulous assistant. " + std::string(1200, 's');

std::string convo(std::vector<std::string> messages, const std::string& model = "sim-small") {
  std::string b = R"({"model":")" + model +
                  R"(","stream":true,"stream_options":{"include_usage":true},"messages":[)";
  for (std::size_t i = 0; i < messages.size(); ++i) b += (i ? "," : "") + messages[i];
  return b + "]}";
}

struct cache_stack {
  explicit cache_stack(std::function<void(config::config&)> tweak = {}, double evict_rate = 0,
                       std::chrono::milliseconds sim_ttl = std::chrono::seconds(300))
      : dir(temp_dir() + "/traces"),
        s(
            [&](config::config& cfg) {
              cfg.trace.dir = dir;
              config::set_hook_sections(cfg, "cache: {min_prefix_tokens: 100}");
              if (tweak) tweak(cfg);
            },
            [&] {
              sim::server_options so;
              so.cache.capacity_blocks = 100000;
              so.cache.evict_rate = evict_rate;
              so.cache.ttl = sim_ttl;
              return so;
            }()) {}

  // Sends one request and returns its trace record line.
  std::string send(const std::string& body, const std::string& key = "Bearer sk-tenant-a",
                   std::vector<std::pair<std::string, std::string>> extra = {}) {
    request_options o;
    o.body = body;
    o.headers = {{"Authorization", key},
                 {"x-sim-tokens", "3"},
                 {"x-sim-ttft-ms", "5"},
                 {"x-sim-itl-ms", "1"}};
    for (auto& h : extra) o.headers.push_back(std::move(h));
    const auto r = fetch(s.proxy_ep(), o);
    EXPECT_TRUE(r.complete);
    ++sent;
    for (int i = 0; i < 300; ++i) {
      const auto l = lines();
      if (l.size() >= sent) return l.back();
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ADD_FAILURE() << "no trace record";
    return {};
  }

  std::vector<std::string> lines() const {
    std::vector<std::string> out;
    if (!std::filesystem::exists(dir)) return out;
    std::vector<std::filesystem::path> files;
    for (const auto& e : std::filesystem::directory_iterator(dir)) files.push_back(e.path());
    std::sort(files.begin(), files.end());
    for (const auto& f : files) {
      // Only complete lines: the writer may be in the middle of appending the next record.
      std::ifstream in(f);
      const std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      for (std::size_t at = 0, nl; (nl = all.find('\n', at)) != std::string::npos; at = nl + 1)
        out.push_back(all.substr(at, nl - at));
    }
    return out;
  }

  std::string dir;
  stack s;
  std::size_t sent = 0;
};

// The cache[] array of a record.
std::string cache_events(const std::string& record) {
  const auto k = record.find("\"cache\":[");
  return k == std::string::npos ? "" : record.substr(k + 9, record.rfind(']') - k - 9);
}

bool has(const std::string& events, const std::string& fragment) {
  return events.find(fragment) != std::string::npos;
}

TEST(Cache, PlainExtensionWithAHitRaisesNothingElse) {
  cache_stack c;
  const auto first =
      cache_events(c.send(convo({msg("system", system_prompt), msg("user", "hello")})));
  EXPECT_TRUE(has(first, R"("event":"miss")")) << first;
  const auto second =
      cache_events(c.send(convo({msg("system", system_prompt), msg("user", "hello"),
                                 msg("assistant", "hi"), msg("user", "how are you")})));
  EXPECT_TRUE(has(second, R"("event":"hit")") || has(second, R"("event":"partial")")) << second;
  for (const char* e :
       {"prefix_divergence", "truncation", "unexpected_miss", "expired", "repeated_miss"})
    EXPECT_FALSE(has(second, e)) << e << " in " << second;
}

TEST(Cache, AnthropicCacheWritesAndReadsAreReported) {
  cache_stack c;
  request_options o;
  o.target = "/v1/messages";
  const std::string body =
      R"({"model":"claude-sim","max_tokens":50,"stream":true,"system":[{"type":"text","text":")" +
      system_prompt +
      R"(","cache_control":{"type":"ephemeral"}}],"messages":[{"role":"user","content":"hello"}]})";
  o.body = body;
  o.headers = {{"Authorization", "Bearer sk-a"}, {"x-sim-tokens", "3"}, {"x-sim-ttft-ms", "5"}};
  ASSERT_TRUE(fetch(c.s.proxy_ep(), o).complete);
  ASSERT_TRUE(fetch(c.s.proxy_ep(), o).complete);
  c.sent = 2;
  std::vector<std::string> l;
  for (int i = 0; i < 300 && (l = c.lines()).size() < 2; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_EQ(l.size(), 2u);
  const auto first = cache_events(l[0]), second = cache_events(l[1]);
  EXPECT_TRUE(has(first, R"("event":"write","cache_write_tokens":)")) << first;
  EXPECT_TRUE(has(first, R"("event":"miss")")) << first;
  EXPECT_TRUE(has(second, R"("event":"hit")")) << second;
}

TEST(Cache, ChangedSystemPromptIsAPrefixDivergenceAtMessageZero) {
  cache_stack c;
  c.send(convo({msg("system", system_prompt + " Today is Monday."), msg("user", "plan my week")}));
  const auto ev = cache_events(c.send(
      convo({msg("system", system_prompt + " Today is Tuesday."), msg("user", "plan my week"),
             msg("assistant", "sure"), msg("user", "add gym")})));
  EXPECT_TRUE(has(
      ev, R"("event":"prefix_divergence","at_message":0,"role":"system","previous_messages":2)"))
      << ev;
}

// Each replica has its own cache: a request is compared with what its own endpoint saw.  The
// first turn went to one replica, the second (another system prompt) to the other, which never
// saw the conversation: its miss is no divergence of a prompt it did not hold.
TEST(Cache, ARequestIsComparedWithWhatItsEndpointSaw) {
  sim::server_options so;
  so.port = 0;
  sim::server other(so);
  other.start();
  cache_stack c([&](config::config& cfg) {
    auto& u = cfg.upstreams[0];
    std::string err;
    u.endpoints.push_back(
        *config::parse_url("http://127.0.0.1:" + std::to_string(other.endpoint().port()), err));
    u.balance = "round_robin";
  });
  c.send(convo({msg("system", system_prompt + " Today is Monday."), msg("user", "plan my week")}));
  const auto ev = cache_events(c.send(
      convo({msg("system", system_prompt + " Today is Tuesday."), msg("user", "plan my week"),
             msg("assistant", "sure"), msg("user", "add gym")})));
  EXPECT_FALSE(has(ev, R"("event":"prefix_divergence")")) << ev;
  EXPECT_TRUE(has(ev, R"("event":"miss")")) << ev;  // the other replica had nothing cached
  other.shutdown();
  other.join();
}

// A first turn that opens with a longer conversation's first message is a new conversation.
TEST(Cache, ANewConversationWithAKnownFirstMessageIsNoDivergence) {
  cache_stack c;
  c.send(convo({msg("system", system_prompt + " App one."), msg("user", "hello"),
                msg("assistant", "hi"), msg("user", "what can you do")}));
  const auto ev = cache_events(
      c.send(convo({msg("system", system_prompt + " App two."), msg("user", "hello")})));
  EXPECT_FALSE(has(ev, R"("event":"prefix_divergence")")) << ev;
}

TEST(Cache, EditedHistoryDivergesWhereItChanged) {
  cache_stack c;
  c.send(convo({msg("system", system_prompt), msg("user", "q1"), msg("assistant", "a1"),
                msg("user", "q2")}));
  const auto ev = cache_events(c.send(
      convo({msg("system", system_prompt), msg("user", "q1"), msg("assistant", "a1 (edited)"),
             msg("user", "q2"), msg("assistant", "a2"), msg("user", "q3")})));
  EXPECT_TRUE(has(ev, R"("event":"prefix_divergence","at_message":2,"role":"assistant")")) << ev;
}

TEST(Cache, DroppedHeadIsATruncation) {
  cache_stack c;
  c.send(convo({msg("system", system_prompt), msg("user", "q1"), msg("assistant", "a1"),
                msg("user", "q2"), msg("assistant", "a2"), msg("user", "q3")}));
  const auto ev = cache_events(
      c.send(convo({msg("system", system_prompt), msg("user", "q2"), msg("assistant", "a2"),
                    msg("user", "q3"), msg("assistant", "a3"), msg("user", "q4")})));
  EXPECT_TRUE(has(ev, R"("event":"truncation","reason":"head_dropped","dropped_user_messages":1)"))
      << ev;
}

TEST(Cache, NearTheContextWindowIsATruncation) {
  cache_stack c([](config::config& cfg) {
    config::set_hook_sections(cfg,
                              "cache: {min_prefix_tokens: 100, context_windows: {sim-small: 300}}");
  });
  const auto ev =
      cache_events(c.send(convo({msg("system", system_prompt), msg("user", "long one")})));
  EXPECT_TRUE(has(ev, R"("event":"truncation","reason":"context_window")")) << ev;
  EXPECT_TRUE(has(ev, R"("context_window":300)")) << ev;
}

TEST(Cache, ReusablePrefixNotReusedIsAnUnexpectedMiss) {
  cache_stack c({}, /*evict_rate=*/1.0);  // the simulator loses every prefix
  const auto body = convo({msg("system", system_prompt), msg("user", "same question")});
  c.send(body);
  const auto ev = cache_events(c.send(body));
  EXPECT_TRUE(has(ev, R"("event":"unexpected_miss","at_message":2,"shared_tokens_est":)")) << ev;
  EXPECT_TRUE(has(ev, R"("cached_tokens":0)")) << ev;
}

TEST(Cache, PrefixSeenLongerAgoThanTheTtlIsExpired) {
  cache_stack c(
      [](config::config& cfg) {
        config::set_hook_sections(cfg, "cache: {min_prefix_tokens: 100, ttl_s: 1}");
      },
      0, std::chrono::milliseconds(1000));
  const auto body = convo({msg("system", system_prompt), msg("user", "again later")});
  c.send(body);
  std::this_thread::sleep_for(std::chrono::milliseconds(1300));
  const auto ev = cache_events(c.send(body));
  EXPECT_TRUE(has(ev, R"("event":"expired")")) << ev;
  EXPECT_FALSE(has(ev, "unexpected_miss")) << ev;
}

TEST(Cache, SamePrefixMissingAgainAndAgainIsARepeatedMiss) {
  cache_stack c(
      [](config::config& cfg) {
        config::set_hook_sections(cfg, "cache: {min_prefix_tokens: 100, repeated_miss_count: 3}");
      },
      1.0);
  const auto body = convo({msg("system", system_prompt), msg("user", "penetrate")});
  EXPECT_FALSE(has(cache_events(c.send(body)), "repeated_miss"));
  EXPECT_FALSE(has(cache_events(c.send(body)), "repeated_miss"));
  const auto ev = cache_events(c.send(body));
  EXPECT_TRUE(has(ev, R"("event":"repeated_miss","prefix_misses":3)")) << ev;
}

TEST(Cache, SlowPrefillPerUncachedTokenIsAnAnomaly) {
  cache_stack c([](config::config& cfg) {
    config::set_hook_sections(cfg, "cache: {min_prefix_tokens: 100, prefill_min_samples: 5}");
  });
  for (int i = 0; i < 5; ++i)
    c.send(convo({msg("user", "warm-up " + std::to_string(i) + std::string(400, 'w'))}),
           "Bearer sk-a", {{"x-sim-ttft-ms", "20"}});
  const auto ev = cache_events(c.send(convo({msg("user", "slow one" + std::string(400, 'w'))}),
                                      "Bearer sk-a", {{"x-sim-ttft-ms", "300"}}));
  EXPECT_TRUE(has(ev, R"("event":"prefill_anomaly")")) << ev;
  EXPECT_TRUE(has(ev, R"("samples":5)")) << ev;
}

// A conversation past 1 MiB (~750 k tokens here) is inspected whole: its record has the model
// and the cache events its digests explain (an edit deep in its history).
TEST(Cache, LongConversationsAreInspected) {
  cache_stack c([](config::config& cfg) {
    config::set_hook_sections(cfg, "cache: {min_prefix_tokens: 100}");
  });
  std::vector<std::string> history{msg("system", system_prompt)};
  for (int i = 0; i < 60; ++i) {
    history.push_back(msg("user", "q" + std::to_string(i) + std::string(25000, 'u')));
    history.push_back(msg("assistant", "a" + std::to_string(i) + std::string(25000, 'a')));
  }
  history.push_back(msg("user", "next"));
  const auto first = convo(history);
  ASSERT_GT(first.size(), 2u << 20);
  c.send(first);
  history[101] = msg("user", "edited" + std::string(25000, 'u'));
  history.push_back(msg("assistant", "sure"));
  history.push_back(msg("user", "more"));
  const auto record = c.send(convo(history));
  EXPECT_NE(record.find(R"("model":"sim-small")"), std::string::npos) << record.substr(0, 400);
  const auto ev = cache_events(record);
  EXPECT_TRUE(has(ev, R"("event":"prefix_divergence","at_message":101,"role":"user")")) << ev;
}

TEST(Cache, AnotherTenantsIdenticalPromptMatchesNothing) {
  cache_stack c({}, 1.0);
  const auto body = convo({msg("system", system_prompt), msg("user", "shared words")});
  c.send(body, "Bearer sk-tenant-a");
  const auto ev = cache_events(c.send(body, "Bearer sk-tenant-b"));
  for (const char* e :
       {"unexpected_miss", "expired", "prefix_divergence", "truncation", "repeated_miss"})
    EXPECT_FALSE(has(ev, e)) << e << " in " << ev;
  // And neither key reached the trace.
  for (const auto& l : c.lines()) EXPECT_EQ(l.find("sk-tenant"), std::string::npos);
}

}  // namespace
}  // namespace tokentap::test
