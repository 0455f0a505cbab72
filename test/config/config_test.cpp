#include "config/config.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>

namespace tokentap::config {
namespace {

TEST(Url, ParsesSchemesPortsAndBasePath) {
  std::string err;
  auto u = parse_url("https://api.example.com/openai/v1/", err);
  ASSERT_TRUE(u) << err;
  EXPECT_TRUE(u->tls);
  EXPECT_EQ(u->host, "api.example.com");
  EXPECT_EQ(u->port, 443);
  EXPECT_EQ(u->base_path, "/openai/v1");
  EXPECT_EQ(u->host_header(), "api.example.com");

  u = parse_url("http://127.0.0.1:8000", err);
  ASSERT_TRUE(u) << err;
  EXPECT_FALSE(u->tls);
  EXPECT_EQ(u->port, 8000);
  EXPECT_EQ(u->base_path, "");
  EXPECT_EQ(u->host_header(), "127.0.0.1:8000");

  u = parse_url("http://[::1]:9000/x", err);
  ASSERT_TRUE(u) << err;
  EXPECT_EQ(u->host, "::1");
  EXPECT_EQ(u->host_header(), "[::1]:9000");
}

TEST(Url, RejectsWhatItCannotServe) {
  std::string err;
  for (const char* bad : {"ftp://x", "127.0.0.1:80", "http://", "http://h:99999", "http://h:0",
                          "http://user:pw@h/", "http://h/?q=1", "http://::1:80"}) {
    err.clear();
    EXPECT_FALSE(parse_url(bad, err)) << bad;
    EXPECT_FALSE(err.empty()) << bad;
  }
}

TEST(HostPort, ParsesListenAddresses) {
  std::string err;
  auto hp = parse_host_port("127.0.0.1:8080", err);
  ASSERT_TRUE(hp);
  EXPECT_EQ(hp->host, "127.0.0.1");
  EXPECT_EQ(hp->port, 8080);
  hp = parse_host_port(":9464", err);
  ASSERT_TRUE(hp);
  EXPECT_EQ(hp->host, "0.0.0.0");
  hp = parse_host_port("[::1]:0", err);
  ASSERT_TRUE(hp);
  EXPECT_EQ(hp->host, "::1");
  EXPECT_FALSE(parse_host_port("localhost", err));
  EXPECT_FALSE(parse_host_port("h:http", err));
}

constexpr const char* full_yaml = R"(
listen: 0.0.0.0:8080
admin: 127.0.0.1:9464
threads: 4
reuse_port: true
upstreams:
  vllm:
    url: http://10.0.0.5:8000
    max_idle_connections: 8
  openai:
    url: https://api.openai.com
    tls_verify: true
routes:
  - {name: chat, prefix: /v1/, upstream: vllm}
  - {name: openai, prefix: /v1/responses, upstream: openai}
timeouts: {connect_ms: 1000, upstream_header_ms: 2000, total_ms: 0}
limits: {max_request_body_bytes: 1048576}
accept_encoding: passthrough
log: {level: warn, access_log: false}
)";

TEST(Config, LoadsEveryField) {
  const auto cfg = parse_config(full_yaml);
  EXPECT_EQ(cfg.listen.to_string(), "0.0.0.0:8080");
  EXPECT_EQ(cfg.threads, 4u);
  EXPECT_TRUE(cfg.reuse_port);
  ASSERT_EQ(cfg.upstreams.size(), 2u);
  EXPECT_EQ(cfg.upstreams[0].max_idle, 8u);
  EXPECT_TRUE(cfg.upstreams[1].endpoints.at(0).tls);
  EXPECT_EQ(cfg.timeouts.connect, ms(1000));
  EXPECT_EQ(cfg.timeouts.upstream_header, ms(2000));
  EXPECT_EQ(cfg.limits.max_request_body_bytes, 1048576u);
  EXPECT_FALSE(cfg.identity_encoding);
  EXPECT_EQ(cfg.log_level, "warn");
  EXPECT_FALSE(cfg.access_log);
}

TEST(Config, LongestPrefixWins) {
  const auto cfg = parse_config(full_yaml);
  const auto* r = match_route(cfg, "/v1/responses");
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->name, "openai");
  EXPECT_EQ(cfg.upstreams[r->upstream_index].name, "openai");
  r = match_route(cfg, "/v1/chat/completions");
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->name, "chat");
  EXPECT_EQ(match_route(cfg, "/metrics"), nullptr);
}

void expect_error(const std::string& yaml, const std::string& fragment) {
  try {
    parse_config(yaml);
    ADD_FAILURE() << "accepted: " << yaml;
  } catch (const config_error& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

TEST(Config, ErrorsNameTheProblemAndLine) {
  expect_error("upstreams: {a: {url: http://h}}\nroutes: [{prefix: /v1, upstream: b}]\n",
               "unknown upstream 'b'");
  expect_error("upstreams: {a: {url: gopher://h}}\n", "http:// or https://");
  expect_error("upstreams: {a: {url: http://h}}\ntimeouts: {connect_ms: -1}\n", "negative");
  expect_error("upstreams: {a: {url: http://h}}\ntimeouts: {connect_ms: soon}\n", "connect_ms");
  expect_error("upstreams: {a: {url: http://h}}\nroutes: [{prefix: v1, upstream: a}]\n",
               "must start with '/'");
  expect_error("upstreams: {a: {url: http://h}, b: {url: http://g}}\n", "no routes");
  expect_error("listen: [oops\n", "YAML syntax error");
  expect_error("", "no upstream");
}

// Found by fuzz_config (test/fuzz/regressions/config-*): a mapping used as a key escaped as a raw
// yaml-cpp exception, and a YAML error quoting a newline printed a two-line message.
// An upstream is a cluster: `url:` is the one-endpoint form of `endpoints:`.
TEST(Config, UpstreamsAreClustersOfEndpoints) {
  const auto cfg = parse_config(
      "upstreams:\n  a: {url: http://h:8000/base}\n  b: {endpoints: [https://g]}\n"
      "routes: [{prefix: /a, upstream: a}, {prefix: /b, upstream: b}]\n");
  ASSERT_EQ(cfg.upstreams.size(), 2u);
  ASSERT_EQ(cfg.upstreams[0].endpoints.size(), 1u);
  EXPECT_EQ(cfg.upstreams[0].endpoints[0].port, 8000);
  EXPECT_EQ(cfg.upstreams[0].endpoints[0].base_path, "/base");
  ASSERT_EQ(cfg.upstreams[1].endpoints.size(), 1u);
  EXPECT_TRUE(cfg.upstreams[1].endpoints[0].tls);
  expect_error("upstreams: {a: {url: http://h, endpoints: [http://g]}}\n", "a url or endpoints");
  expect_error("upstreams: {a: {}}\n", "a url or endpoints");
  expect_error("upstreams: {a: {endpoints: []}}\n", "endpoints must be a list");
  expect_error("upstreams: {a: {endpoints: http://h}}\n", "endpoints must be a list");
  expect_error("upstreams: {a: {endpoints: [http://h, ftp://g]}}\n", "http:// or https://");
  expect_error("upstreams: {a: {endpoints: [http://h, https://g]}}\n", "mixes http");
}

TEST(Config, AClusterBalancesAndRetriesAsConfigured) {
  const auto cfg = parse_config(
      "upstreams:\n  a: {endpoints: [http://h, http://g], balance: round_robin, retries: 2}\n"
      "  b: {endpoints: [http://h, http://g]}\n"
      "routes: [{prefix: /a, upstream: a}, {prefix: /b, upstream: b}]\n");
  ASSERT_EQ(cfg.upstreams[0].endpoints.size(), 2u);
  EXPECT_EQ(cfg.upstreams[0].balance, "round_robin");
  EXPECT_EQ(cfg.upstreams[0].balance_line, 2);
  EXPECT_EQ(cfg.upstreams[0].retries, 2u);
  EXPECT_EQ(cfg.upstreams[1].balance, "least_request");
  EXPECT_EQ(cfg.upstreams[1].retries, 1u);
  // (Which names are policies is the proxy's to say: cluster_test.)
  expect_error("upstreams: {a: {url: http://h, retries: 9}}\n", "retries is at most 8");
  expect_error("upstreams: {a: {url: http://h, retries: -1}}\n", "retries");
}

TEST(Config, PrefixBalancingHasLoadBoundsOnByDefaultAndTunablePlacement) {
  auto cfg = parse_config("upstreams: {a: {endpoints: [http://h, http://g], balance: prefix}}\n");
  const auto& d = cfg.upstreams[0].prefix;
  EXPECT_EQ(cfg.upstreams[0].balance, "prefix");
  EXPECT_EQ(d.new_conversations, prefix_config::placement::least_load);
  EXPECT_TRUE(d.load_bounds);
  EXPECT_EQ(d.max_imbalance, 1.5);
  EXPECT_EQ(d.min_gap, 8u);
  EXPECT_EQ(d.index_entries, 65536u);
  cfg = parse_config(
      "upstreams:\n  a:\n    endpoints: [http://h, http://g]\n    balance: prefix\n"
      "    prefix: {new: hash, load_bounds: false, max_imbalance: 2.5, min_gap: 3, "
      "index_entries: 1000}\n");
  const auto& p = cfg.upstreams[0].prefix;
  EXPECT_EQ(p.new_conversations, prefix_config::placement::hash);
  EXPECT_FALSE(p.load_bounds);
  EXPECT_EQ(p.max_imbalance, 2.5);
  EXPECT_EQ(p.min_gap, 3u);
  EXPECT_EQ(p.index_entries, 1000u);
  expect_error("upstreams: {a: {url: http://h, prefix: {new: hash}}}\n", "needs balance: prefix");
  expect_error("upstreams: {a: {url: http://h, balance: prefix, prefix: {new: random}}}\n",
               "new must be least_load or hash, not 'random'");
  expect_error("upstreams: {a: {url: http://h, balance: prefix, prefix: {max_imbalance: 0.5}}}\n",
               "max_imbalance must be a ratio from 1");
  expect_error("upstreams: {a: {url: http://h, balance: prefix, prefix: {index_entries: 10}}}\n",
               "index_entries must be from 64");
  expect_error("upstreams: {a: {url: http://h, balance: prefix, prefix: {gap: 1}}}\n",
               "unknown key 'gap'");
}

TEST(Config, AnActiveHealthProbeIsOptIn) {
  auto cfg = parse_config("upstreams: {a: {endpoints: [http://h, http://g]}}\n");
  EXPECT_FALSE(cfg.upstreams[0].health.enabled);
  cfg = parse_config(
      "upstreams: {a: {endpoints: [http://h, http://g], health: {path: /ready, interval_ms: 500, "
      "timeout_ms: 200, unhealthy_threshold: 3, healthy_threshold: 2}}}\n");
  const auto& h = cfg.upstreams[0].health;
  EXPECT_TRUE(h.enabled);
  EXPECT_EQ(h.path, "/ready");
  EXPECT_EQ(h.interval, ms(500));
  EXPECT_EQ(h.timeout, ms(200));
  EXPECT_EQ(h.unhealthy_threshold, 3u);
  EXPECT_EQ(h.healthy_threshold, 2u);
  cfg = parse_config("upstreams: {a: {url: http://h, health: {}}}\n");
  EXPECT_TRUE(cfg.upstreams[0].health.enabled);
  EXPECT_EQ(cfg.upstreams[0].health.path, "/health");
  EXPECT_EQ(cfg.upstreams[0].health.interval, ms(5000));
  expect_error("upstreams: {a: {url: http://h, health: {path: health}}}\n", "must start with '/'");
  expect_error("upstreams: {a: {url: http://h, health: {interval_ms: 10}}}\n",
               "interval_ms is at least 100");
  expect_error("upstreams: {a: {url: http://h, health: {interval_ms: 500, timeout_ms: 900}}}\n",
               "timeout_ms must be from 1 to interval_ms");
  expect_error("upstreams: {a: {url: http://h, health: {unhealthy_threshold: 0}}}\n",
               "unhealthy_threshold must be from 1 to 100");
  expect_error("upstreams: {a: {url: http://h, health: {every: 1}}}\n", "unknown key 'every'");
}

TEST(Config, EngineMetricsAreOptIn) {
  auto cfg = parse_config("upstreams: {a: {url: http://h}}\n");
  EXPECT_FALSE(cfg.upstreams[0].engine_metrics.enabled);
  cfg = parse_config("upstreams: {a: {url: http://h, engine_metrics: {}}}\n");
  const auto& e = cfg.upstreams[0].engine_metrics;
  EXPECT_TRUE(e.enabled);
  EXPECT_EQ(e.path, "/metrics");
  EXPECT_EQ(e.interval, ms(2000));
  EXPECT_EQ(e.kind, "auto");
  EXPECT_FALSE(e.engine_load);
  cfg = parse_config("upstreams: {a: {url: http://h, engine_metrics: {engine_load: true}}}\n");
  EXPECT_TRUE(cfg.upstreams[0].engine_metrics.engine_load);
  expect_error("upstreams: {a: {url: http://h, engine_metrics: {engine_load: sometimes}}}\n",
               "engine_load");
  cfg = parse_config(
      "upstreams: {a: {url: http://h, engine_metrics: {path: /m, interval_ms: 500, kind: "
      "llama.cpp}}}\n");
  EXPECT_EQ(cfg.upstreams[0].engine_metrics.kind, "llama.cpp");
  EXPECT_EQ(cfg.upstreams[0].engine_metrics.interval, ms(500));
  expect_error("upstreams: {a: {url: http://h, engine_metrics: {kind: triton}}}\n",
               "kind must be auto, vllm, sglang, tgi or llama.cpp");
  expect_error("upstreams: {a: {url: http://h, engine_metrics: {interval_ms: 50}}}\n",
               "interval_ms is at least 100");
  expect_error("upstreams: {a: {url: http://h, engine_metrics: {path: metrics}}}\n",
               "must start with '/'");
  expect_error("upstreams: {a: {url: http://h, engine_metrics: {every: 1}}}\n",
               "unknown key 'every'");
}

TEST(Config, FaultRulesAreOneKindEach) {
  const std::string base =
      "upstreams: {a: {url: http://h}}\nroutes: [{name: local, prefix: /, upstream: a}]\n";
  auto cfg = parse_config(base +
                          "faults:\n"
                          "  - {name: slow-net, route: local, percent: 10, delay_ms: 200}\n"
                          "  - {name: jitter, percent: 5, event_delay_ms: 30}\n"
                          "  - {name: cut, route: local, percent: 1, cut_after_events: 20}\n"
                          "  - {name: refuse, route: local, abort_status: 503}\n"
                          "  - {name: header, route: local, from_header: true}\n");
  using kind = tokentap::config::fault_rule::kind_t;
  ASSERT_EQ(cfg.faults.size(), 5u);
  EXPECT_EQ(cfg.faults[0].kind, kind::delay);
  EXPECT_EQ(cfg.faults[0].value, 200u);
  EXPECT_EQ(cfg.faults[0].percent, 10);
  EXPECT_EQ(cfg.faults[1].route, "");  // every route
  EXPECT_EQ(cfg.faults[1].kind, kind::event_delay);
  EXPECT_EQ(cfg.faults[2].kind, kind::cut);
  EXPECT_EQ(cfg.faults[2].value, 20u);
  EXPECT_EQ(cfg.faults[3].kind, kind::abort);
  EXPECT_EQ(cfg.faults[3].percent, 100);
  EXPECT_EQ(cfg.faults[4].kind, kind::from_header);
  EXPECT_TRUE(parse_config(base).faults.empty());  // off unless configured
  expect_error(base + "faults: [{name: x, delay_ms: 5, abort_status: 503}]\n",
               "needs exactly one of delay_ms, event_delay_ms");
  expect_error(base + "faults: [{name: x, percent: 5}]\n", "needs exactly one of");
  expect_error(base + "faults: [{name: x, abort_status: 200}]\n",
               "abort_status must be from 400 to 599");
  expect_error(base + "faults: [{name: x, percent: 101, delay_ms: 1}]\n",
               "percent must be from 0 to 100");
  expect_error(base + "faults: [{name: x, route: nowhere, delay_ms: 1}]\n",
               "names unknown route 'nowhere'");
  expect_error(base + "faults: [{name: x, delay_ms: 1}, {name: x, delay_ms: 2}]\n",
               "duplicate fault rule 'x'");
  expect_error(base + "faults: [{name: x, from_header: false}]\n", "from_header is true or absent");
  expect_error(base + "faults: [{name: x, delay: 1}]\n", "unknown key 'delay'");
  expect_error(base + "faults: {name: x, delay_ms: 1}\n", "faults must be a list of rules");
}

TEST(Config, SharedStateAndTenants) {
  auto cfg = parse_config(
      "upstreams: {a: {url: http://h}}\n"
      "routes: [{name: local, prefix: /, upstream: a}]\n"
      "tenants: {header: x-tokentap-tenant, max: 50}\n"
      "shared_state: {redis: 'redis://127.0.0.1:6380', timeout_ms: 20, sync_ms: 50}\n");
  EXPECT_TRUE(cfg.tenants.enabled);
  EXPECT_EQ(cfg.tenants.header, "x-tokentap-tenant");
  EXPECT_EQ(cfg.tenants.max, 50u);
  EXPECT_EQ(cfg.shared_state.redis_host, "127.0.0.1");
  EXPECT_EQ(cfg.shared_state.redis_port, 6380);
  EXPECT_EQ(cfg.shared_state.timeout.count(), 20);
  EXPECT_EQ(cfg.shared_state.sync.count(), 50);
  const std::string base =
      "upstreams: {a: {url: http://h}}\nroutes: [{name: local, prefix: /, upstream: a}]\n";
  expect_error(base + "shared_state: {redis: 'http://h:1'}\n",
               "line 3: shared_state.redis must be redis://host:port");
  expect_error(base + "shared_state: {redis: 'redis://h:1', timeout_ms: 0}\n",
               "line 3: shared_state.timeout_ms must be from 1 to 5000");
  expect_error("upstreams: {a: {url: http://h}}\ntenants: {header: 'x y'}\n",
               "tenants.header must be a header name");
  expect_error("upstreams: {a: {url: http://h}}\ntenants: {max: 0}\n",
               "tenants.max must be from 1 to 10000");
}

TEST(Config, AFallbackNamesAnotherUpstream) {
  const auto cfg = parse_config(
      "upstreams: {a: {url: http://h, fallback: b}, b: {url: http://g}}\n"
      "routes: [{prefix: /, upstream: a}]\n");
  EXPECT_EQ(cfg.upstreams[0].fallback, "b");
  EXPECT_EQ(cfg.upstreams[cfg.upstreams[0].fallback_index].name, "b");
  expect_error("upstreams: {a: {url: http://h, fallback: c}}\n",
               "upstream 'a' falls back to unknown upstream 'c'");
  expect_error("upstreams: {a: {url: http://h, fallback: a}}\n", "falls back to itself");
}

TEST(Config, OutlierDetectionIsOnWithEnvoysDefaultsAndTunable) {
  auto cfg = parse_config("upstreams: {a: {endpoints: [http://h, http://g]}}\n");
  EXPECT_EQ(cfg.upstreams[0].outlier.consecutive_failures, 5u);
  EXPECT_EQ(cfg.upstreams[0].outlier.base_ejection, ms(30000));
  EXPECT_EQ(cfg.upstreams[0].outlier.max_ejected_percent, 50u);
  cfg = parse_config(
      "upstreams: {a: {endpoints: [http://h, http://g], outlier: {consecutive_failures: 2, "
      "base_ejection_ms: 100, max_ejection_ms: 1000, max_ejected_percent: 100}}}\n");
  const auto& o = cfg.upstreams[0].outlier;
  EXPECT_EQ(o.consecutive_failures, 2u);
  EXPECT_EQ(o.base_ejection, ms(100));
  EXPECT_EQ(o.max_ejection, ms(1000));
  EXPECT_EQ(o.max_ejected_percent, 100u);
  expect_error("upstreams: {a: {url: http://h, outlier: {max_ejected_percent: 101}}}\n",
               "max_ejected_percent is at most 100");
  expect_error(
      "upstreams: {a: {url: http://h, outlier: {base_ejection_ms: 10, "
      "max_ejection_ms: 5}}}\n",
      "max_ejection_ms is less than base_ejection_ms");
  expect_error("upstreams: {a: {url: http://h, outlier: {consecutive: 2}}}\n",
               "unknown key 'consecutive'");
}

TEST(Config, EveryErrorIsOneLineConfigError) {
  expect_error("upstreams:\n  ? [a, b]\n  : {url: http://h}\n", "mapping keys must be plain names");
  expect_error("listen: \"\\\x01\"\n", "unknown escape character: \\x01");
  EXPECT_STREQ(config_error("bad \"a\nb\"\t\n").what(), "bad \"a\\nb\"\\x09\\n");
}

TEST(Config, SingleUpstreamFlagReplacesRoutes) {
  auto cfg = parse_config(full_yaml);
  set_single_upstream(cfg, "http://127.0.0.1:1234/base");
  validate(cfg);
  ASSERT_EQ(cfg.upstreams.size(), 1u);
  EXPECT_EQ(cfg.upstreams[0].endpoints.at(0).base_path, "/base");
  EXPECT_EQ(match_route(cfg, "/anything")->upstream, "default");
  EXPECT_THROW(set_single_upstream(cfg, "127.0.0.1:1234"), config_error);
}

}  // namespace
}  // namespace tokentap::config

namespace tokentap::config {
namespace {

TEST(Config, InterceptionSections) {
  const auto cfg = parse_config(R"(
upstreams: {a: {url: http://h}}
hooks: [timing, steps, trace]
max_event_bytes: 65536
trace: {dir: /tmp/t, max_file_bytes: 8192, max_files: 3, queue_records: 10, sample_rate: 0.5, bodies: false}
timing: {stall_threshold_ms: 250, exact_samples: 512}
metrics: {max_models: 5, window_s: 30, ttft_buckets: [0.1, 0.5, 1]}
steps:
  max_steps: 100
  triggers: {replace: true, step: [Primero], backtrack: [Espera]}
upstream: {}
)");
  EXPECT_EQ(cfg.hooks, (std::vector<std::string>{"timing", "steps", "trace"}));
  EXPECT_EQ(cfg.max_event_bytes, 65536u);
  EXPECT_EQ(cfg.trace.dir, "/tmp/t");
  EXPECT_EQ(cfg.trace.max_files, 3u);
  EXPECT_DOUBLE_EQ(cfg.trace.sample_rate, 0.5);
  EXPECT_FALSE(cfg.trace.bodies);
  EXPECT_EQ(cfg.metrics.max_models, 5u);
  EXPECT_EQ(cfg.metrics.window, std::chrono::seconds(30));
  EXPECT_EQ(cfg.metrics.ttft_buckets, (std::vector<double>{0.1, 0.5, 1}));
  // The hooks' own sections (and a key no one knows) are kept as written, with their lines,
  // for the hook registry: config/ does not read them.
  ASSERT_EQ(cfg.hook_settings.size(), 3u);
  EXPECT_EQ(cfg.hook_settings[0].key, "timing");
  EXPECT_EQ(cfg.hook_settings[0].key_line, 6);
  EXPECT_EQ(cfg.hook_section("timing")["exact_samples"].text(), "512");
  const auto& steps = cfg.hook_section("steps");
  EXPECT_EQ(steps.line(), 9);
  EXPECT_EQ(steps["triggers"]["step"].items().at(0).text(), "Primero");
  EXPECT_EQ(steps["triggers"]["step"].items().at(0).line(), 10);
  EXPECT_EQ(steps["triggers"]["replace"].type(), section::kind::scalar);
  EXPECT_EQ(cfg.hook_settings[2].key, "upstream");
  EXPECT_EQ(cfg.hook_section("upstream").type(), section::kind::map);
  EXPECT_FALSE(cfg.hook_section("nothing"));
  EXPECT_FALSE(cfg.metrics.semconv);
  // The semantic-convention histograms bring their hook.
  const auto sc = parse_config("upstreams: {a: {url: http://h}}\nmetrics: {semconv: true}\n");
  EXPECT_TRUE(sc.metrics.semconv);
  EXPECT_EQ(sc.hooks.back(), "gen_ai_metrics");
}

TEST(Config, InterceptionSectionErrors) {
  for (const auto& [yaml, fragment] : std::vector<std::pair<std::string, std::string>>{
           {"metrics: {ttft_buckets: [1, 0.5]}", "strictly increasing"},
           {"trace: {sample_rate: 2}", "sample_rate"},
           {"metrics: {window_s: 0}", "window_s"}}) {
    try {
      parse_config("upstreams: {a: {url: http://h}}\n" + yaml + "\n");
      ADD_FAILURE() << "accepted: " << yaml;
    } catch (const config_error& e) {
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    }
  }
}

// What a reload may not change: each named as in the file; everything else may change.
TEST(Config, RestartOnlyChanges) {
  const auto base = parse_config("upstreams:\n  a: {url: http://127.0.0.1:1}\n");
  auto next = base;
  next.routes.front().prefix = "/v1/";
  next.timeouts.idle = ms(5);
  next.upstreams.front().retries = 3;
  set_hook_sections(next, "admission: [{name: cap, requests_per_minute: 1}]");
  next.log_level = "debug";
  EXPECT_EQ(restart_only_changes(base, next), "");
  next.listen.port = 1;
  next.threads = 3;
  next.metrics.max_models = 2;
  next.tenants.header = "x-team";
  next.trace.dir = "/tmp";
  next.limits.max_connections = 5;
  EXPECT_EQ(restart_only_changes(base, next),
            "listen, threads, limits.max_connections, metrics, tenants, trace");
  next = base;
  next.admin.host = "0.0.0.0";
  next.admin_token = "another-token-0123";
  next.reuse_port = true;
  EXPECT_EQ(restart_only_changes(base, next), "admin, admin_token_file, reuse_port");
}

// The otel section (DESIGN.md §12): the file first, then the OTEL_* variables for what it leaves
// unset; bad values are one-line errors.
TEST(Config, OtelSectionAndEnvironment) {
  auto cfg = parse_config(
      "upstreams:\n  a: {url: http://127.0.0.1:1}\n"
      "otel:\n  endpoint: http://collector:4318\n  protocol: http/json\n"
      "  headers: {x-team: infra}\n  sample_rate: 0.5\n");
  EXPECT_EQ(cfg.otel.endpoint, "http://collector:4318/v1/traces");
  EXPECT_EQ(cfg.otel.protocol, otel_config::protocol_kind::json);
  ASSERT_EQ(cfg.otel.headers.size(), 1u);
  EXPECT_EQ(cfg.otel.sample_rate, 0.5);
  EXPECT_NE(std::find(cfg.hooks.begin(), cfg.hooks.end(), "otel"), cfg.hooks.end())
      << "an endpoint brings the otel hook";
  EXPECT_EQ(parse_config("upstreams:\n  a: {url: http://127.0.0.1:1}\notel:\n  endpoint: "
                         "http://c:4318/custom/path\n")
                .otel.endpoint,
            "http://c:4318/custom/path");

  const std::map<std::string, std::string> env{
      {"OTEL_EXPORTER_OTLP_ENDPOINT", "https://otel.example:4318/"},
      {"OTEL_EXPORTER_OTLP_HEADERS", "authorization=Bearer%20abc, x-team = sre"},
      {"OTEL_SERVICE_NAME", "gateway-7"},
      {"OTEL_TRACES_SAMPLER", "parentbased_traceidratio"},
      {"OTEL_TRACES_SAMPLER_ARG", "0.1"},
      {"OTEL_EXPORTER_OTLP_TIMEOUT", "2500"}};
  const auto get = [&env](const char* name) -> const char* {
    const auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  otel_config o;
  apply_otel_environment(o, get);
  EXPECT_EQ(o.endpoint, "https://otel.example:4318/v1/traces");
  ASSERT_EQ(o.headers.size(), 2u);
  EXPECT_EQ(o.headers[0], (std::pair<std::string, std::string>{"authorization", "Bearer abc"}));
  EXPECT_EQ(o.headers[1], (std::pair<std::string, std::string>{"x-team", "sre"}));
  EXPECT_EQ(o.service_name, "gateway-7");
  EXPECT_EQ(o.sample_rate, 0.1);
  EXPECT_EQ(o.export_timeout, ms(2500));
  // What the file set stays; the signal-specific endpoint is used as given.
  otel_config f;
  f.endpoint = "http://from-file:4318/v1/traces";
  f.service_name = "from-file";
  apply_otel_environment(f, get);
  EXPECT_EQ(f.endpoint, "http://from-file:4318/v1/traces");
  EXPECT_EQ(f.service_name, "from-file");
  otel_config t;
  apply_otel_environment(t, [](const char* n) -> const char* {
    return std::string_view(n) == "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT" ? "http://x:1/t" : nullptr;
  });
  EXPECT_EQ(t.endpoint, "http://x:1/t");
  EXPECT_THROW(apply_otel_environment(t,
                                      [](const char* n) -> const char* {
                                        return std::string_view(n) == "OTEL_EXPORTER_OTLP_PROTOCOL"
                                                   ? "grpc"
                                                   : nullptr;
                                      }),
               config_error);

  // Compression and the Resource: the file's first, then the variables; service.name in
  // OTEL_RESOURCE_ATTRIBUTES names the service when nothing else does.
  const auto file = parse_config(
      "upstreams:\n  a: {url: http://127.0.0.1:1}\n"
      "otel:\n  endpoint: http://c:4318\n  compression: gzip\n"
      "  resource_attributes: {deployment.environment: prod}\n");
  EXPECT_EQ(file.otel.compression, otel_config::compression_kind::gzip);
  ASSERT_EQ(file.otel.resource_attributes.size(), 1u);
  EXPECT_EQ(file.otel.resource_attributes[0].second, "prod");
  const std::map<std::string, std::string> resource_env{
      {"OTEL_EXPORTER_OTLP_COMPRESSION", "gzip"},
      {"OTEL_RESOURCE_ATTRIBUTES",
       "service.name=ledger, deployment.environment=staging,k8s.pod.name=gw%2D1"}};
  const auto rget = [&resource_env](const char* name) -> const char* {
    const auto it = resource_env.find(name);
    return it == resource_env.end() ? nullptr : it->second.c_str();
  };
  otel_config r = file.otel;
  apply_otel_environment(r, rget);
  EXPECT_EQ(r.service_name, "ledger");
  EXPECT_EQ(r.resource_attributes,
            (std::vector<std::pair<std::string, std::string>>{{"deployment.environment", "prod"},
                                                              {"k8s.pod.name", "gw-1"}}));
  otel_config plain;
  apply_otel_environment(plain, rget);
  EXPECT_EQ(plain.compression, otel_config::compression_kind::gzip);
  for (const auto& [name, value] : std::map<std::string, std::string>{
           {"OTEL_EXPORTER_OTLP_COMPRESSION", "zstd"}, {"OTEL_RESOURCE_ATTRIBUTES", "novalue"}}) {
    otel_config x;
    EXPECT_THROW(
        apply_otel_environment(
            x, [&](const char* n) -> const char* { return name == n ? value.c_str() : nullptr; }),
        config_error)
        << name << "=" << value;
  }

  for (const char* bad :
       {"otel:\n  endpoint: ftp://x\n", "otel:\n  sample_rate: 2\n", "otel:\n  protocol: grpc\n",
        "otel:\n  compression: br\n", "otel:\n  resource_attributes: {service.name: x}\n",
        "otel:\n  bogus: 1\n", "otel:\n  endpoint: http://c:1\n  batch_spans: 5000\n",
        "otel:\n  headers: {\"bad name\": x}\n"})
    EXPECT_THROW(parse_config(std::string("upstreams:\n  a: {url: http://127.0.0.1:1}\n") + bad),
                 config_error)
        << bad;
}

}  // namespace
}  // namespace tokentap::config
