// Metrics from real traffic through the real proxy: exact counts and sums on /metrics, promtool's
// verdict, a real Prometheus scraping the admin port, /api/stats and the dashboard in Chromium.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <regex>
#include <set>
#include <thread>
#include <vector>

#include <simdjson.h>
#include <boost/asio/ip/address.hpp>

#include "test/support/browser.hpp"
#include "test/support/canned_upstream.hpp"
#include "test/support/http_client.hpp"
#include "test/support/metrics_text.hpp"
#include "test/support/ports.hpp"
#include "test/support/process.hpp"
#include "test/support/stack.hpp"
#include "test/support/tls_cert.hpp"
#include "tokentap/version.hpp"

namespace tokentap::test {
namespace {

std::string scrape(const tcp::endpoint& admin, const std::string& path = "/metrics") {
  request_options o;
  o.method = "GET";
  o.target = path;
  const auto r = fetch(admin, o);
  EXPECT_EQ(r.status, 200) << path;
  return r.body;
}

request_options stream_req(const std::string& model, int ttft_ms, int tokens, int reasoning) {
  request_options o;
  o.body = chat_body(true, "metrics", true, model);
  o.headers = {{"x-sim-ttft-ms", std::to_string(ttft_ms)},
               {"x-sim-itl-ms", "4"},
               {"x-sim-tokens", std::to_string(tokens)},
               {"x-sim-reasoning-tokens", std::to_string(reasoning)}};
  return o;
}

// Waits until the proxy has finished its bookkeeping for `n` requests.
void wait_requests(const tcp::endpoint& admin, double n) {
  for (int i = 0; i < 200; ++i) {
    if (metric_sum(parse_metrics(scrape(admin)), "tokentap_requests_total") >= n) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

// 6 streamed requests (TTFT 120 ms, 10 tokens + 4 reasoning), 2 plain ones (7 tokens), and one
// the upstream answers 503.
void mixed_traffic(const stack& s) {
  for (int i = 0; i < 6; ++i)
    ASSERT_TRUE(fetch(s.proxy_ep(), stream_req("sim-small", 120, 10, 4)).complete);
  for (int i = 0; i < 2; ++i) {
    request_options plain;
    plain.body = chat_body(false, "plain", false, "sim-small");
    plain.headers = {{"x-sim-tokens", "7"}, {"x-sim-ttft-ms", "1"}, {"x-sim-itl-ms", "0"}};
    ASSERT_TRUE(fetch(s.proxy_ep(), plain).complete);
  }
  auto fault = stream_req("sim-small", 1, 5, 0);
  fault.headers.push_back({"x-sim-status", "503"});
  EXPECT_EQ(fetch(s.proxy_ep(), fault).status, 503);
}

TEST(Metrics, ExactCountsAndSumsFromRealTraffic) {
  stack s;
  const auto admin = s.proxy->admin_endpoint();
  ASSERT_NO_FATAL_FAILURE(mixed_traffic(s));
  wait_requests(admin, 9);
  // /proc counts CPU time in clock ticks (10 ms): a quick run of this process (the proxy's) may
  // not have used one yet.  Two ticks of work first, so process_cpu_seconds_total must show it.
  {
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(30);
    volatile std::uint64_t spins = 0;
    while (std::chrono::steady_clock::now() < until) spins = spins + 1;
  }

  const auto text = scrape(admin);
  const auto m = parse_metrics(text);
  const std::map<std::string, std::string> base = {
      {"route", "default"}, {"model", "sim-small"}, {"provider", "openai-chat"}};
  auto with = [&](std::map<std::string, std::string> extra) {
    auto l = base;
    l.insert(extra.begin(), extra.end());
    return l;
  };
  EXPECT_EQ(metric_sum(m, "tokentap_requests_total", with({{"code", "200"}})), 8);
  EXPECT_EQ(metric_sum(m, "tokentap_requests_total", with({{"code", "503"}})), 1);
  // Tokens from the simulator's usage blocks: 6 x (10 + 4) streamed, 2 x 7 plain.  The types
  // are disjoint parts: the answer's tokens and the reasoning's add up to the output.
  EXPECT_EQ(metric_sum(m, "tokentap_tokens_total", with({{"type", "output_answer"}})),
            6 * 10 + 2 * 7);
  EXPECT_EQ(metric_sum(m, "tokentap_tokens_total", with({{"type", "reasoning"}})), 6 * 4);
  EXPECT_EQ(metric_sum(m, "tokentap_tokens_total", with({{"type", "cached_input"}})), 0);
  EXPECT_EQ(metric_sum(m, "tokentap_tokens_total", with({{"type", "output"}})), 0);  // no more
  EXPECT_EQ(metric_sum(m, "tokentap_tokens_total", with({{"type", "input"}})), 0);
  // TTFT only for streamed responses; the simulator reports cached_tokens 0: a cache miss.
  EXPECT_EQ(metric_sum(m, "tokentap_time_to_first_token_seconds_count", with({{"cache", "miss"}})),
            6);
  const double ttft_sum =
      metric_sum(m, "tokentap_time_to_first_token_seconds_sum", with({{"cache", "miss"}}));
  EXPECT_GE(ttft_sum, 6 * 0.120);
  EXPECT_LT(ttft_sum, 6 * 0.140);
  // Every TTFT sits in the (0.1, 0.25] bucket.
  EXPECT_EQ(metric_sum(m, "tokentap_time_to_first_token_seconds_bucket",
                       with({{"cache", "miss"}, {"le", "0.1"}})),
            0);
  EXPECT_EQ(metric_sum(m, "tokentap_time_to_first_token_seconds_bucket",
                       with({{"cache", "miss"}, {"le", "0.25"}})),
            6);
  // 14 token events per stream: 13 gaps, 3 of them into reasoning, 10 into content.
  EXPECT_EQ(
      metric_sum(m, "tokentap_inter_token_latency_seconds_count", with({{"channel", "reasoning"}})),
      6 * 3);
  EXPECT_EQ(
      metric_sum(m, "tokentap_inter_token_latency_seconds_count", with({{"channel", "content"}})),
      6 * 10);
  EXPECT_EQ(metric_sum(m, "tokentap_request_duration_seconds_count", base), 9);
  EXPECT_EQ(metric_sum(m, "tokentap_upstream_errors_total", with({{"reason", "status_5xx"}})), 1);
  EXPECT_EQ(metric_sum(m, "tokentap_active_streams", base), 0);
  EXPECT_EQ(metric_sum(m, "tokentap_time_per_output_token_seconds_count", base), 6);
  EXPECT_GT(metric_sum(m, "tokentap_proxy_overhead_seconds_count", base), 6);
  // Reasoning steps: every streamed response's reasoning opens at least one step.
  const double steps = metric_sum(m, "tokentap_reasoning_steps_total", base);
  EXPECT_GE(steps, 6);
  EXPECT_EQ(metric_sum(m, "tokentap_reasoning_step_duration_seconds_count", base), steps);
  // The build and the process, as every Prometheus client library reports them.
  EXPECT_EQ(metric_sum(m, "tokentap_build_info", {{"version", version_string}}), 1) << text;
  EXPECT_GT(metric_sum(m, "process_cpu_seconds_total"), 0);
  EXPECT_GT(metric_sum(m, "process_resident_memory_bytes"), 1 << 20);
  EXPECT_GT(metric_sum(m, "process_open_fds"), 2);
  EXPECT_GT(metric_sum(m, "process_max_fds"), metric_sum(m, "process_open_fds"));
  EXPECT_GT(metric_sum(m, "process_start_time_seconds"), 1.7e9);
  EXPECT_GE(metric_sum(m, "process_threads"), 2);
  const auto [rc, out] = promtool_check(text);
  EXPECT_EQ(rc, 0) << "promtool check metrics: " << out;
  // The semantic-convention histograms are opt-in.
  EXPECT_EQ(text.find("gen_ai_"), std::string::npos);
}

// metrics.semconv: the OpenTelemetry GenAI histograms beside tokentap's own, with the
// conventions' names, labels and advisory buckets, from the same real traffic.
TEST(Metrics, SemanticConventionHistogramsWhenAskedFor) {
  stack s([](config::config& cfg) { cfg.metrics.semconv = true; });
  const auto admin = s.proxy->admin_endpoint();
  ASSERT_NO_FATAL_FAILURE(mixed_traffic(s));
  // (Each stream is recorded at its end, which may come just after the client's last byte.)
  std::string text;
  for (int i = 0; i < 200; ++i) {
    text = scrape(admin);
    if (metric_sum(parse_metrics(text), "gen_ai_client_operation_duration_seconds_count") >= 9)
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const auto m = parse_metrics(text);
  const std::map<std::string, std::string> base = {
      {"gen_ai_operation_name", "chat"},
      {"gen_ai_provider_name", "openai"},
      {"gen_ai_request_model", "sim-small"},
      {"server_address", "127.0.0.1"},
      {"server_port", std::to_string(s.sim_ep().port())}};
  auto with = [&](std::map<std::string, std::string> extra) {
    auto l = base;
    l.insert(extra.begin(), extra.end());
    return l;
  };
  // Every answered request's duration; the failed one with its error.type.
  EXPECT_EQ(metric_sum(m, "gen_ai_client_operation_duration_seconds_count", base), 9);
  EXPECT_EQ(metric_sum(m, "gen_ai_client_operation_duration_seconds_count",
                       with({{"error_type", "503"}})),
            1);
  // Tokens per request as the provider reported them (input includes cached), the same totals
  // as tokentap's counters.
  EXPECT_EQ(
      metric_sum(m, "gen_ai_client_token_usage_count", with({{"gen_ai_token_type", "output"}})), 8);
  EXPECT_EQ(metric_sum(m, "gen_ai_client_token_usage_sum", with({{"gen_ai_token_type", "output"}})),
            6 * 14 + 2 * 7);
  EXPECT_EQ(metric_sum(m, "gen_ai_client_token_usage_sum", with({{"gen_ai_token_type", "input"}})),
            metric_sum(m, "tokentap_tokens_total", {{"type", "input_uncached"}}) +
                metric_sum(m, "tokentap_tokens_total", {{"type", "cached_input"}}) +
                metric_sum(m, "tokentap_tokens_total", {{"type", "cache_write"}}));
  // Every sum over the types counts each token once: input + output, as reported.
  EXPECT_EQ(metric_sum(m, "tokentap_tokens_total", {}),
            metric_sum(m, "gen_ai_client_token_usage_sum", {{"gen_ai_token_type", "input"}}) +
                metric_sum(m, "gen_ai_client_token_usage_sum", {{"gen_ai_token_type", "output"}}));
  // TTFT of the 6 successful streams, in the conventions' buckets; TPOT per streamed request.
  EXPECT_EQ(metric_sum(m, "gen_ai_server_time_to_first_token_seconds_count", base), 6);
  const double ttft_sum = metric_sum(m, "gen_ai_server_time_to_first_token_seconds_sum", base);
  EXPECT_GE(ttft_sum, 6 * 0.120);
  EXPECT_LT(ttft_sum, 6 * 0.140);
  EXPECT_EQ(
      metric_sum(m, "gen_ai_server_time_to_first_token_seconds_bucket", with({{"le", "0.1"}})), 0);
  EXPECT_EQ(
      metric_sum(m, "gen_ai_server_time_to_first_token_seconds_bucket", with({{"le", "0.25"}})), 6);
  EXPECT_EQ(metric_sum(m, "gen_ai_server_time_per_output_token_seconds_count", base), 6);
  // The advisory boundaries, exactly.
  const auto les = [&](const std::string& name) {
    std::vector<std::string> out;
    for (const auto& x : m)
      if (x.name == name && x.labels.count("error_type") == 0 &&
          x.labels.at("gen_ai_request_model") == "sim-small")
        out.push_back(x.labels.at("le"));
    return out;
  };
  EXPECT_EQ(
      les("gen_ai_client_operation_duration_seconds_bucket"),
      (std::vector<std::string>{"0.01", "0.02", "0.04", "0.08", "0.16", "0.32", "0.64", "1.28",
                                "2.56", "5.12", "10.24", "20.48", "40.96", "81.92", "+Inf"}));
  EXPECT_EQ(les("gen_ai_server_time_per_output_token_seconds_bucket"),
            (std::vector<std::string>{"0.01", "0.025", "0.05", "0.075", "0.1", "0.15", "0.2", "0.3",
                                      "0.4", "0.5", "0.75", "1", "2.5", "+Inf"}));
  const auto [rc, out] = promtool_check(text);
  EXPECT_EQ(rc, 0) << "promtool check metrics: " << out;
}

// `provider` means in the metrics what it means in the trace record: the format the stream
// turned out to speak.  A path that names no provider (a gateway's own route) gets the decoder's
// recognition, not `unknown`.
TEST(Metrics, ProviderIsTheStreamsAsInTheTrace) {
  canned_upstream up({{"/gateway/run",
                       {"text/event-stream",
                        {"data: {\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,"
                         "\"delta\":{\"content\":\"hi\"}}]}\n\n",
                         "data: [DONE]\n\n"}}}});
  const auto dir =
      std::filesystem::temp_directory_path() / ("tokentap-provider-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  stack s([&](config::config& cfg) {
    config::set_single_upstream(cfg, "http://127.0.0.1:" + std::to_string(up.port()));
    cfg.hooks = {"timing", "metrics", "trace"};
    cfg.trace.dir = dir.string();
  });
  request_options o;
  o.target = "/gateway/run";
  o.body = chat_body(true);
  ASSERT_EQ(fetch(s.proxy_ep(), o).status, 200);
  wait_requests(s.proxy->admin_endpoint(), 1);
  const auto m = parse_metrics(scrape(s.proxy->admin_endpoint()));
  EXPECT_EQ(metric_sum(m, "tokentap_requests_total", {{"provider", "openai-chat"}}), 1);
  EXPECT_EQ(metric_sum(m, "tokentap_requests_total", {{"provider", "unknown"}}), 0);
  std::string record;
  for (int i = 0; i < 200 && record.empty(); ++i) {
    for (const auto& f : std::filesystem::directory_iterator(dir)) {
      std::ifstream in(f.path());
      std::getline(in, record);
    }
    if (record.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_NE(record.find(R"("provider":"openai-chat")"), std::string::npos) << record;
  s.proxy.reset();  // its trace writer is done with the directory
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}

TEST(Metrics, ModelLabelCardinalityIsBounded) {
  stack s([](config::config& cfg) { cfg.metrics.max_models = 2; });
  for (const char* model : {"a", "b", "c", "d"})
    ASSERT_TRUE(fetch(s.proxy_ep(), stream_req(model, 1, 2, 0)).complete);
  wait_requests(s.proxy->admin_endpoint(), 4);
  const auto m = parse_metrics(scrape(s.proxy->admin_endpoint()));
  std::set<std::string> models;
  for (const auto& x : m)
    if (x.name == "tokentap_requests_total") models.insert(x.labels.at("model"));
  EXPECT_EQ(models, (std::set<std::string>{"a", "b", "other"}));
  EXPECT_EQ(metric_sum(m, "tokentap_requests_total", {{"model", "other"}}), 2);
}

TEST(Metrics, UpstreamFailuresAreCountedByReason) {
  auto cfg = test_config("http://127.0.0.1:" + std::to_string(closed_port()));
  proxy::proxy_server p(cfg);
  p.start();
  EXPECT_EQ(fetch(p.endpoint(), stream_req("m", 1, 1, 0)).status, 502);
  wait_requests(p.admin_endpoint(), 1);
  const auto m = parse_metrics(scrape(p.admin_endpoint()));
  EXPECT_EQ(metric_sum(m, "tokentap_upstream_errors_total", {{"reason", "connect"}}), 1);
  EXPECT_EQ(metric_sum(m, "tokentap_requests_total", {{"code", "502"}}), 1);
}

TEST(Metrics, LongStreamsShowUpWhileRunning) {
  // Folding at least once a second: a 3 s stream's gaps appear on /metrics before it ends.
  stack s;
  auto o = stream_req("sim-small", 10, 150, 0);
  o.headers[1] = {"x-sim-itl-ms", "20"};
  auto running = std::async(std::launch::async, [&] { return fetch(s.proxy_ep(), o); });
  std::this_thread::sleep_for(std::chrono::milliseconds(1800));
  const auto m = parse_metrics(scrape(s.proxy->admin_endpoint()));
  EXPECT_GT(metric_sum(m, "tokentap_inter_token_latency_seconds_count", {{"channel", "content"}}),
            30);
  EXPECT_EQ(metric_sum(m, "tokentap_active_streams"), 1);
  EXPECT_TRUE(running.get().complete);
}

// "Cache hit ratio" is cached input tokens / input tokens wherever it is shown, the share of
// requests judged a hit a figure of its own: a long prompt sent twice (a hit the second time)
// and a short one sent once make the two differ.
TEST(Metrics, CacheHitRatioIsByTokens) {
  sim::server_options so;
  so.cache.capacity_blocks = 100000;
  stack s({}, so);
  const std::string long_prompt = "Summarize: " + std::string(4000, 'x');
  for (const auto& prompt : {long_prompt, long_prompt, std::string("short one")}) {
    request_options o;
    o.body = chat_body(true, prompt);
    o.headers = {{"x-sim-tokens", "2"}, {"x-sim-ttft-ms", "5"}, {"x-sim-itl-ms", "1"}};
    ASSERT_TRUE(fetch(s.proxy_ep(), o).complete);
  }
  wait_requests(s.proxy->admin_endpoint(), 3);
  const auto m = parse_metrics(scrape(s.proxy->admin_endpoint()));
  const double cached = metric_sum(m, "tokentap_tokens_total", {{"type", "cached_input"}});
  const double input = cached +
                       metric_sum(m, "tokentap_tokens_total", {{"type", "input_uncached"}}) +
                       metric_sum(m, "tokentap_tokens_total", {{"type", "cache_write"}});
  ASSERT_GT(cached, 0);
  const double hits =
      metric_sum(m, "tokentap_time_to_first_token_seconds_count", {{"cache", "hit"}});
  const double judged =
      hits + metric_sum(m, "tokentap_time_to_first_token_seconds_count", {{"cache", "partial"}}) +
      metric_sum(m, "tokentap_time_to_first_token_seconds_count", {{"cache", "miss"}});
  ASSERT_EQ(judged, 3);
  ASSERT_GT(std::abs(cached / input - hits / judged), 0.05) << "the two figures coincide";
  simdjson::dom::parser parser;
  const auto body = scrape(s.proxy->admin_endpoint(), "/api/stats");
  simdjson::dom::element doc;
  ASSERT_FALSE(parser.parse(body).get(doc)) << body;
  for (const auto* where : {"all", "series"}) {
    auto w = std::string(where) == "all" ? doc["all"] : doc["series"].at(0)["window"];
    double ratio = -1, share = -1;
    ASSERT_FALSE(w["cache_hit_ratio"].get(ratio)) << body;
    ASSERT_FALSE(w["cache_hit_requests_share"].get(share)) << body;
    EXPECT_NEAR(ratio, cached / input, 1e-4) << where;
    EXPECT_NEAR(share, hits / judged, 1e-4) << where;
  }
  // The endpoint table says the same by tokens.
  double endpoint_ratio = -1;
  ASSERT_FALSE(doc["endpoints"].at(0)["hit_ratio"].get(endpoint_ratio)) << body;
  EXPECT_NEAR(endpoint_ratio, cached / input, 1e-3);
}

TEST(Metrics, ApiStatsReportsWindowQuantiles) {
  stack s;
  for (int i = 0; i < 5; ++i)
    ASSERT_TRUE(fetch(s.proxy_ep(), stream_req("sim-small", 150, 8, 2)).complete);
  wait_requests(s.proxy->admin_endpoint(), 5);
  const auto body = scrape(s.proxy->admin_endpoint(), "/api/stats");
  // {"window_s":60,...,"series":[{"route":"default","model":"sim-small","window":{"requests":5,...
  EXPECT_NE(body.find("\"model\":\"sim-small\",\"window\":{\"requests\":5,"), std::string::npos)
      << body;
  const auto k = body.find("\"all\":");
  ASSERT_NE(k, std::string::npos);
  const auto t = body.find("\"ttft_ms\":{\"p50\":", k);
  ASSERT_NE(t, std::string::npos);
  const double p50 = std::atof(body.c_str() + t + 17);
  // The slowest requests: every one of the five, slowest first, with what the dashboard shows.
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  ASSERT_FALSE(parser.parse(body).get(doc)) << body;
  simdjson::dom::array rows;
  ASSERT_FALSE(doc["slowest"].get_array().get(rows)) << body;
  EXPECT_EQ(rows.size(), 5u);
  double previous = 1e300;
  std::vector<double> ttfts;
  for (auto row : rows) {
    std::string_view route, model, provider, outcome, cache;
    std::uint64_t status = 0;
    double e2e = -1, ttft = -1;
    simdjson::dom::array steps;
    ASSERT_FALSE(row["route"].get(route) || row["model"].get(model) ||
                 row["provider"].get(provider) || row["outcome"].get(outcome) ||
                 row["cache"].get(cache) || row["status"].get(status) || row["e2e_ms"].get(e2e) ||
                 row["ttft_ms"].get(ttft) || row["steps"].get_array().get(steps))
        << simdjson::to_string(row);
    EXPECT_EQ(route, "default");
    EXPECT_EQ(model, "sim-small");
    EXPECT_EQ(provider, "openai-chat");
    EXPECT_EQ(outcome, "ok");
    EXPECT_EQ(status, 200u);
    // The simulator sends the first token 150 ms after the request; a loaded machine (the
    // sanitizer suites) delays it by tens of ms, never brings it forward.
    EXPECT_GE(ttft, 150 * 0.98);
    EXPECT_LT(ttft, 150 + 100);
    EXPECT_GE(e2e, ttft);
    EXPECT_LE(e2e, previous);
    previous = e2e;
    ttfts.push_back(ttft);
  }
  // The window's P50 is the median of the same five requests' TTFTs, within the sketch's 2 %
  // relative error: between the second and the fourth of them.
  ASSERT_EQ(ttfts.size(), 5u);
  std::sort(ttfts.begin(), ttfts.end());
  EXPECT_GE(p50, ttfts[1] * 0.98) << body.substr(t, 80);
  EXPECT_LE(p50, ttfts[3] * 1.02) << body.substr(t, 80);
}

// ---- a real Prometheus scraping the admin port

std::string http_get_text(const tcp::endpoint& ep, const std::string& target) {
  request_options o;
  o.method = "GET";
  o.target = target;
  return fetch(ep, o).body;
}

TEST(Prometheus, ScrapesTheAdminPortAndComputesTtftQuantiles) {
  stack s;
  const auto admin = s.proxy->admin_endpoint();
  const auto dir = temp_dir();
  const auto prom_port = closed_port();
  std::ofstream(dir + "/prometheus.yml")
      << "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
         "scrape_configs:\n  - job_name: tokentap\n    static_configs:\n      - targets: "
         "['127.0.0.1:"
      << admin.port() << "']\n";
  const std::string cmd = "exec prometheus --config.file=" + dir +
                          "/prometheus.yml --storage.tsdb.path=" + dir +
                          "/data --web.listen-address=127.0.0.1:" + std::to_string(prom_port) +
                          " > " + dir + "/prom.log 2>&1";
  pid_t pid = fork();
  if (pid == 0) {
    execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  struct killer {
    pid_t pid;
    ~killer() {
      kill(pid, SIGTERM);
      waitpid(pid, nullptr, 0);
    }
  } guard{pid};
  const tcp::endpoint prom(boost::asio::ip::make_address("127.0.0.1"), prom_port);
  // Wait until Prometheus has scraped the admin port once: traffic sent before its first scrape
  // would all land in that scrape, and rate() would then see no increase at all.  (Its start-up
  // took over 6 s once on a loaded machine.)
  bool scraped = false;
  for (int i = 0; i < 120 && !scraped; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
    try {
      scraped = http_get_text(prom, "/api/v1/query?query=up").find("\"1\"]") != std::string::npos;
    } catch (const std::exception&) {
      // not listening yet
    }
  }
  ASSERT_TRUE(scraped) << "Prometheus never scraped the admin port";
  // Traffic with a known TTFT of 300 ms, spread over several scrapes.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(6);
  while (std::chrono::steady_clock::now() < until)
    ASSERT_TRUE(fetch(s.proxy_ep(), stream_req("sim-small", 300, 3, 0)).complete);
  std::string answer;
  double q = -1;
  for (int i = 0; i < 40 && q < 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    answer = http_get_text(prom,
                           "/api/v1/"
                           "query?query=histogram_quantile(0.95,sum(rate(tokentap_time_to_first_"
                           "token_seconds_bucket[20s]))by(le))");
    const auto k = answer.find("\"value\":[");
    if (k == std::string::npos) continue;
    const auto v = answer.find(",\"", k);
    const double val = std::atof(answer.c_str() + v + 2);
    if (val > 0) q = val;
  }
  ASSERT_GT(q, 0) << "Prometheus never produced a TTFT quantile: " << answer;
  // The simulator's 300 ms lies in the (0.25, 0.5] bucket; histogram_quantile interpolates in it.
  EXPECT_GT(q, 0.25);
  EXPECT_LE(q, 0.5);

  // Every query of the shipped Grafana dashboard is valid PromQL and returns data here.
  std::ifstream in(std::string(TOKENTAP_SOURCE_DIR) + "/deploy/grafana-dashboard.json");
  const std::string dash((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  int checked = 0;
  for (std::size_t k = dash.find("\"expr\": \""); k != std::string::npos;
       k = dash.find("\"expr\": \"", k + 1)) {
    std::string expr;
    for (std::size_t i = k + 9; i < dash.size() && dash[i] != '"'; ++i) {
      if (dash[i] == '\\') ++i;
      expr.push_back(dash[i]);
    }
    auto replace = [&](const std::string& from, const std::string& to) {
      for (auto p = expr.find(from); p != std::string::npos; p = expr.find(from, p + to.size()))
        expr.replace(p, from.size(), to);
    };
    replace("$__rate_interval", "20s");
    replace("$route", ".*");
    replace("$model", ".*");
    std::string encoded;
    for (unsigned char c : expr) {
      if (std::isalnum(c) || c == '_' || c == '.' || c == '-')
        encoded.push_back(static_cast<char>(c));
      else {
        char b[4];
        std::snprintf(b, sizeof b, "%%%02X", c);
        encoded += b;
      }
    }
    const auto r = http_get_text(prom, "/api/v1/query?query=" + encoded);
    EXPECT_NE(r.find("\"status\":\"success\""), std::string::npos) << expr << " -> " << r;
    ++checked;
  }
  EXPECT_GE(checked, 12);
}

// ---- the shipped Grafana dashboard

// Every metric a panel of deploy/grafana-dashboard.json queries is one the proxy exports: the real
// binary with endpoints, routing, admission, shedding and a canary configured, after traffic.
// (The Prometheus test above runs each query; this one makes sure none asks for a name that
// does not exist, which PromQL answers with an empty success.)
TEST(Grafana, EveryMetricItQueriesExists) {
  sim::server_options so;
  so.port = 0;
  sim::server a(so), b(so), next(so);
  for (auto* x : {&a, &b, &next}) x->start();
  const auto port = [](sim::server& x) { return std::to_string(x.endpoint().port()); };
  const auto dir = temp_dir();
  std::ofstream(dir + "/all.yaml")
      << "listen: 127.0.0.1:0\nadmin: 127.0.0.1:0\nthreads: 2\n"
      << "upstreams:\n  main:\n    endpoints: [http://127.0.0.1:" << port(a)
      << ", http://127.0.0.1:" << port(b) << "]\n    balance: round_robin\n"
      << "    engine_metrics: {interval_ms: 200}\n"
      << "  next: {url: http://127.0.0.1:" << port(next) << "}\n"
      << "routes:\n  - {name: chat, prefix: /, upstream: main}\n"
      << "trace: {dir: " << dir << "/traces}\n"
      << "priority: {header: x-tokentap-priority}\n"
      << "admission:\n  - {name: per-route, scope: route, requests_per_minute: 100000}\n"
      << "shed:\n  - {route: chat, when: {ttft_p95_ms: 60000}, drop: [low], reroute: next}\n"
      << "faults:\n  - {name: rare, percent: 0, delay_ms: 1}\n"
      << "canary:\n  - {route: chat, upstream: next, steps: [50]}\n";
  proxy_process p({"--config", dir + "/all.yaml"});
  ASSERT_NE(p.proxy.port(), 0) << p.proc.err();
  const auto proxy_ep = p.proxy;
  for (int i = 0; i < 6; ++i)
    ASSERT_TRUE(fetch(proxy_ep, stream_req("sim-small", 5, 1, 1)).complete);
  request_options none;
  none.target = "/no/such/thing";
  none.body = "{";
  fetch(proxy_ep, none);
  const auto text = scrape(p.admin);

  std::ifstream in(std::string(TOKENTAP_SOURCE_DIR) + "/deploy/grafana-dashboard.json");
  const std::string dash((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::regex name(R"(\b(tokentap_[a-z_]+|process_[a-z_]+))");
  std::set<std::string> queried;
  for (std::sregex_iterator it(dash.begin(), dash.end(), name), end; it != end; ++it) {
    auto n = (*it)[1].str();
    for (const char* suffix : {"_bucket", "_sum", "_count"})
      if (n.size() > std::strlen(suffix) && n.ends_with(suffix) &&
          text.find("# TYPE " + n + " ") == std::string::npos)
        n.resize(n.size() - std::strlen(suffix));
    queried.insert(n);
  }
  for (const char* covered :  // what the built-in dashboard shows beyond latency and tokens
       {"tokentap_upstream_endpoint_requests_total", "tokentap_upstream_endpoint_healthy",
        "tokentap_routing_decisions_total", "tokentap_upstream_ejections_total",
        "tokentap_upstream_retries_total", "tokentap_admission_rejections_total",
        "tokentap_shed_active", "tokentap_canary_weight", "tokentap_canary_rollbacks_total",
        "tokentap_latency_phase_seconds", "tokentap_engine_ttft_gap_seconds",
        "tokentap_faults_injected_total", "tokentap_shed_rerouted_total"})
    EXPECT_TRUE(queried.count(covered)) << covered << " is on no panel";
  EXPECT_GE(queried.size(), 20u);
  for (const auto& n : queried)
    EXPECT_NE(text.find("# TYPE " + n + " "), std::string::npos) << n << " is not in /metrics";
  p.proc.signal(SIGTERM);
  EXPECT_EQ(p.proc.wait(std::chrono::seconds(10)), 0);
}

// ---- the dashboard in a real browser

TEST(Dashboard, RendersLiveNumbersInHeadlessChromium) {
  // The cards show the sliding window (60 s by default). Chromium's first start on a fresh CI
  // machine once took over a minute, and the six requests had left the window by the time the
  // page asked: the window here is an hour, so the test checks the rendering, not the clock.
  const auto traces = temp_dir() + "/traces";
  stack s([&](config::config& cfg) {
    cfg.metrics.window = std::chrono::seconds(3600);
    cfg.trace.dir = traces;
    cfg.upstreams[0].engine_metrics.enabled = true;  // the simulator speaks vLLM's /metrics
    cfg.upstreams[0].engine_metrics.interval = std::chrono::milliseconds(100);
  });
  // The engine's TTFT window starts at the first scrape.
  for (int i = 0; i < 100 && s.sim->stats().requests.load() == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  for (int i = 0; i < 6; ++i)
    ASSERT_TRUE(fetch(s.proxy_ep(), stream_req("sim-small", 200, 10, 3)).complete);
  wait_requests(s.proxy->admin_endpoint(), 6);
  const auto url =
      "http://127.0.0.1:" + std::to_string(s.proxy->admin_endpoint().port()) + "/dashboard";
  const auto artifacts = std::string(TOKENTAP_BINARY_DIR) + "/test-artifacts";
  std::filesystem::create_directories(artifacts);
  const auto dom = dump_dom(url);
  ASSERT_FALSE(dom.empty()) << "chromium failed";
  // The TTFT card shows the simulator's 200 ms (within the sketch's 2 % and scheduling noise).
  const auto k = dom.find("id=\"ttft-p50\">");
  ASSERT_NE(k, std::string::npos) << dom.substr(0, 500);
  const double shown = std::atof(dom.c_str() + k + 14);
  EXPECT_NEAR(shown, 200, 20) << dom.substr(k, 40);
  EXPECT_NE(dom.find("<td>sim-small</td>"), std::string::npos);
  // The cache-events cards: the simulator reports cached_tokens 0 for these cold prompts.
  const auto miss = dom.find("id=\"cache-miss\">");
  ASSERT_NE(miss, std::string::npos);
  EXPECT_EQ(std::atoi(dom.c_str() + miss + 16), 6) << dom.substr(miss, 40);
  EXPECT_NE(dom.find("live · updated"), std::string::npos);
  // The endpoints table: the simulator's row, in balancing, with its six requests' routing.
  const auto row = dom.find("<td>127.0.0.1:" + std::to_string(s.sim_ep().port()) + "</td>");
  ASSERT_NE(row, std::string::npos) << dom;
  EXPECT_NE(dom.find("<td class=\"ok\">healthy</td>", row), std::string::npos)
      << dom.substr(row, 400);
  EXPECT_NE(dom.find("least_request 6", row), std::string::npos) << dom.substr(row, 400);
  // Engine vs proxy TTFT: the engine's own (its 200 ms in vLLM's 100–250 ms bucket reads as
  // 175), and what lies between.
  const std::regex engine_cells(R"(<td>(\d+) / (\d+)</td><td>([+-]\d+) / ([+-]\d+)</td>)");
  std::smatch m;
  const std::string rest = dom.substr(row, 1200);
  ASSERT_TRUE(std::regex_search(rest, m, engine_cells)) << rest;
  EXPECT_EQ(m[1].str(), "175") << rest;
  EXPECT_NEAR(std::stod(m[3].str()), 25, 15) << rest;
  // Inter-token and end to end at P50 / P95 / P99, and how many requests the TTFT cards hold.
  auto card = [&](const std::string& id) {
    const auto at = dom.find("id=\"" + id + "\">");
    if (at == std::string::npos) return std::string();
    const auto b = dom.find('>', at) + 1;
    return dom.substr(b, dom.find('<', b) - b);
  };
  for (const char* id : {"itl", "e2e"}) {
    const auto text = card(id);
    EXPECT_EQ(std::count(text.begin(), text.end(), '/'), 2) << id << ": " << text;
    EXPECT_EQ(text.find("–"), std::string::npos) << id << ": " << text;
  }
  EXPECT_EQ(card("ttft-n"), "6");
  // Where TTFT goes: the route's row, its six requests, their mean TTFT (the simulator's 200 ms),
  // stacked — here, with no engine account, mostly the wait between the head and the first token.
  const auto phases = dom.find("id=\"ttft-phases\"");
  ASSERT_NE(phases, std::string::npos) << dom;
  const std::string row_head = "<td>sim-small</td><td>6</td><td>";
  const auto prow = dom.find(row_head, phases);
  ASSERT_NE(prow, std::string::npos) << dom.substr(phases, 1500);
  EXPECT_NEAR(std::atof(dom.c_str() + prow + row_head.size()), 200, 20) << dom.substr(prow, 200);
  EXPECT_NE(dom.find("<svg class=\"phases\"", prow), std::string::npos) << dom.substr(prow, 600);
  const auto said = dom.find("head to first token ", prow);
  ASSERT_NE(said, std::string::npos) << dom.substr(prow, 1500);
  EXPECT_NEAR(std::atof(dom.c_str() + said + 20), 200, 20) << dom.substr(said, 40);
  // The slowest requests carry their trace record, as a command that shows it; that command
  // finds it.
  const std::string command = "tokentap analyze " + traces + " --id ";
  const auto cmd = dom.find(command);
  ASSERT_NE(cmd, std::string::npos) << dom.substr(dom.find("id=\"slowest\""), 2000);
  const auto id = dom.substr(cmd + command.size(), 16);
  const auto shown_record = run({"analyze", traces, "--id", id});
  EXPECT_EQ(shown_record.status, 0) << shown_record.err;
  EXPECT_EQ(shown_record.out.rfind("record " + id, 0), 0u) << shown_record.out;
  EXPECT_NE(shown_record.out.find("replay serve --trace " + traces + " --id " + id),
            std::string::npos)
      << shown_record.out;
  const std::string shot = "chromium " + chromium_flags() + "--screenshot=" + artifacts +
                           "/dashboard.png " + url + " >/dev/null 2>&1";
  EXPECT_EQ(std::system(shot.c_str()), 0);
  EXPECT_GT(std::filesystem::file_size(artifacts + "/dashboard.png"), 10000u);
  std::printf("dashboard screenshot: %s/dashboard.png\n", artifacts.c_str());
}

}  // namespace
}  // namespace tokentap::test
