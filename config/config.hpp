#pragma once
// The proxy's configuration: schema, YAML loading and validation.  Exceptions are allowed here
// only because this runs at start-up (Envoy's rule); the data path never throws.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "config/section.hpp"
#include "config/url.hpp"

namespace tokentap::config {

using ms = std::chrono::milliseconds;

/// A bad configuration file or flag value.  `what()` is a one-line reason for the user.
/// Control characters from the offending input are escaped so the message stays one line.
class config_error : public std::runtime_error {
 public:
  explicit config_error(const std::string& what) : std::runtime_error(one_line(what)) {}
  static std::string one_line(const std::string& s);
};

/// Throws config_error for `what` at the file's 1-based `line` ("line N: what"; without the
/// prefix when the line is unknown, 0).
[[noreturn]] void fail_at(int line, const std::string& what);

/// An upstream is a cluster (DESIGN.md §10): a name, its endpoints, and how they are used.
/// `url:` in the file is the one-endpoint form of `endpoints:`.
/// At most this many further attempts per request (`retries`).
inline constexpr unsigned max_retries = 8;
/// At most this many endpoints per upstream (`endpoints`): metric labels stay bounded.
inline constexpr std::size_t max_endpoints = 256;

/// Passive outlier detection (as Envoy's): an endpoint that failed `consecutive_failures` times in
/// a row (refused, reset or timed out before the head; 502, 503 or 504) is left out of balancing
/// for base_ejection × the times it was ejected (at most max_ejection), while at most
/// max_ejected_percent of the upstream's endpoints are out; then it rejoins by itself.
struct outlier_config {
  unsigned consecutive_failures = 5;  ///< 0: never eject
  ms base_ejection{30000};
  ms max_ejection{300000};
  unsigned max_ejected_percent = 50;
};

/// `balance: prefix` (DESIGN.md §10).  A request goes to the endpoint that recently served the
/// longest prefix of its conversation, from a bounded index of `index_entries` prefixes per
/// upstream.  A conversation that matches nothing is placed by `new_conversations`.  With
/// `load_bounds`, affinity gives way to the least busy endpoint when the matched one has more
/// than `min_gap` streams more than it *and* more than `max_imbalance` times as many.
struct prefix_config {
  enum class placement {
    least_load,  ///< fewest streams in flight, then the smallest prefix footprint
    hash,        ///< rendezvous hash of the conversation's root: instances agree unshared
  };
  placement new_conversations = placement::least_load;
  bool load_bounds = true;
  double max_imbalance = 1.5;
  unsigned min_gap = 8;
  std::size_t index_entries = 65536;
};

/// The optional active probe (`health:`): every `interval` each endpoint gets `GET path` (as given,
/// not under the endpoint's base path); a 2xx answer within `timeout` passes.
/// `unhealthy_threshold` failures in a row take the endpoint out of balancing until
/// `healthy_threshold` passes in a row bring it back.
struct health_config {
  bool enabled = false;
  std::string path = "/health";
  ms interval{5000};
  ms timeout{1000};
  unsigned unhealthy_threshold = 2;
  unsigned healthy_threshold = 1;
};

/// `engine_metrics:` (DESIGN.md §13): every interval, `GET path` from each endpoint — the
/// engine's own Prometheus text — for its running and waiting requests, KV-cache use and TTFT.
struct engine_metrics_config {
  bool enabled = false;
  std::string path = "/metrics";
  ms interval{2000};
  std::string kind = "auto";  ///< auto | vllm | sglang | tgi | llama.cpp
  /// Balancers count the engine's waiting requests as load, beside the proxy's own streams in
  /// flight (as llm-d's queue scorer does).
  bool engine_load = false;
};

struct upstream_config {
  std::string name;
  std::vector<url> endpoints;  ///< at least one; all http:// or all https://
  /// How its endpoints are chosen (DESIGN.md §10): a balancing policy's name, checked by the
  /// proxy against the policies it has (proxy/cluster.cpp: least_request, round_robin, prefix).
  std::string balance = "least_request";
  int balance_line = 0;  ///< the file's line naming it (0: none), for that check's error
  /// Further attempts on other endpoints for a request none of whose response reached the client
  /// (refused, reset or timed out before the head; 502, 503 or 429), within the retry budget.
  unsigned retries = 1;
  outlier_config outlier;
  health_config health;
  engine_metrics_config engine_metrics;
  prefix_config prefix;  ///< for balance: prefix
  /// Another upstream for a request none of this one's endpoints can take (all ejected, or all
  /// tried); empty: none.  One hop: the fallback's own fallback is not followed.
  std::string fallback;
  std::size_t fallback_index = 0;  ///< resolved by validate()
  bool tls_verify = true;          ///< verify the certificate chain and host name (system store)
  std::string ca_file;             ///< extra PEM bundle to trust, empty = system store only
  std::size_t max_idle = 64;       ///< idle keep-alive connections kept per I/O thread
  ms idle_ttl{4000};  ///< drop idle connections older than this (uvicorn closes at 5 s)
};

struct route_config {
  std::string name;
  std::string prefix;              ///< path prefix, starts with '/'
  std::string upstream;            ///< name of an upstream
  std::size_t upstream_index = 0;  ///< resolved by validate()
  bool operator==(const route_config&) const = default;
};

struct timeouts_config {
  ms connect{5000};            ///< TCP connect (+ TLS handshake) to the upstream
  ms upstream_header{300000};  ///< request written -> response head read (covers queueing + TTFT)
  ms idle{60000};              ///< between two upstream body reads
  ms total{0};                 ///< whole exchange; 0 = unlimited
  ms client_header{10000};     ///< reading a request head from the client (slowloris guard)
  ms keepalive{60000};         ///< idle client connection between requests
  ms client_write{60000};      ///< one write to the client (a client that stops reading)
  ms shutdown_grace{30000};    ///< SIGTERM: how long in-flight streams may finish
};

struct limits_config {
  std::size_t max_request_header_bytes = 16 * 1024;
  std::size_t max_request_body_bytes = 32u * 1024 * 1024;
  std::size_t max_response_header_bytes = 64 * 1024;
  std::size_t max_connections = 10000;  ///< open client connections; more are closed at accept
};

/// Trace records (DESIGN.md §5).  Disabled while `dir` is empty.
struct trace_config {
  std::string dir;
  std::size_t max_file_bytes = 64u << 20;   ///< rotate past this size
  std::size_t max_files = 20;               ///< keep this many files, delete the oldest
  std::size_t queue_records = 1024;         ///< records waiting for the writer; a full queue drops
  std::size_t max_record_bytes = 8u << 20;  ///< events/texts beyond this are cut (marked truncated)
  double sample_rate = 1.0;                 ///< fraction of exchanges recorded
  bool bodies = true;                       ///< record request bodies and response texts
  bool operator==(const trace_config&) const = default;
};

struct metrics_config {
  std::size_t max_models = 20;       ///< distinct `model` label values; later ones are "other"
  std::chrono::seconds window{60};   ///< sliding window of /api/stats
  std::vector<double> ttft_buckets;  ///< seconds; empty = vLLM's TTFT boundaries
  std::vector<double> itl_buckets;   ///< seconds; empty = 50 µs .. 10 s (also TPOT, overhead)
  std::vector<double> e2e_buckets;   ///< seconds; empty = 50 ms .. 1920 s
  /// Also the OpenTelemetry GenAI semantic-convention histograms (the gen_ai_metrics hook).
  bool semconv = false;
  bool operator==(const metrics_config&) const = default;
};

/// Who a request is for (DESIGN.md §11): the value of `header` when the request has it, else the
/// salted hash of its credential (never the key), else `anonymous`.  At most `max` distinct
/// tenants are told apart; later ones share `other`.
struct tenants_config {
  /// Tenants are told apart (the `tenants:` section, or what a hook's section implies: an
  /// admission rule of scope tenant, hooks/registry.hpp complete()): requests_total and
  /// tokens_total gain a `tenant` label, /api/stats a row per tenant.
  bool enabled = false;
  std::string header;  ///< empty: by credential only
  std::size_t max = 100;
  /// File holding the salt of the credential hash (`salt_file`).  Instances that share budgets
  /// (shared_state) need the same salt to name a key's tenant alike; without one, each process
  /// draws its own.  The salt itself (read by load_config_file), not YAML.
  std::string salt_file, salt;
  bool operator==(const tenants_config&) const = default;
};

/// One fault to inject (`faults:`, DESIGN.md §13), for experiments that change one variable:
/// on requests of `route` (empty: every route), `percent` of them get it.  A rule injects one
/// kind; the first rule in order that fires is the exchange's one fault.
struct fault_rule {
  enum class kind_t : std::uint8_t {
    delay,        ///< `delay_ms` before forwarding
    event_delay,  ///< `event_delay_ms` before each forwarded event
    cut,          ///< the stream ends visibly after `cut_after_events` events
    abort,        ///< answered at once with `abort_status` and a provider-shaped error body
    from_header,  ///< per request, from x-tokentap-fault-* headers (with the admin token)
  };
  std::string name, route;
  double percent = 100;
  kind_t kind = kind_t::delay;
  std::uint32_t value = 0;  ///< ms, events or a status, by kind (0 for from_header)
  bool operator==(const fault_rule&) const = default;
};

/// State several proxy instances share (`shared_state`): with a Redis URL, the request and token
/// budgets of the admission rules are kept in Redis.  Each instance decides locally, on its view
/// of the shared budget, and exchanges what it used for the budget's new level every `sync`, in
/// one pipelined round trip off the request path; while Redis cannot be reached it falls back to
/// its local budgets (fail open) and says so.  Concurrency caps stay per instance.
struct shared_state_config {
  std::string redis_host;  ///< empty: local state only
  std::uint16_t redis_port = 6379;
  ms sync{100};          ///< how often each instance exchanges its counts with Redis
  ms timeout{50};        ///< connecting and one round trip; past it, the instance is local
  ms retry_after{1000};  ///< after a failure, how long to stay local before trying again
  std::string key_prefix = "tokentap:";
  bool operator==(const shared_state_config&) const = default;
};

/// OpenTelemetry span export (DESIGN.md §12): two spans per exchange to an OTLP/HTTP receiver.
/// Off while `endpoint` is empty.
struct otel_config {
  enum class protocol_kind { protobuf, json };
  /// Where spans are POSTed: a URL without a path gets /v1/traces (OTEL_EXPORTER_OTLP_ENDPOINT's
  /// rule), one with a path is used as given (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT's).
  std::string endpoint;
  protocol_kind protocol = protocol_kind::protobuf;
  std::vector<std::pair<std::string, std::string>> headers;  ///< sent with every export
  enum class compression_kind { none, gzip };
  compression_kind compression = compression_kind::none;  ///< of export bodies
  std::string service_name = "tokentap";
  /// More attributes of the Resource the spans come from (deployment.environment,
  /// k8s.pod.name, ...), beside service.name and what the exporter names itself.
  std::vector<std::pair<std::string, std::string>> resource_attributes;
  double sample_rate = 1.0;      ///< of traces tokentap starts; a client's sampled flag is followed
  bool capture_content = false;  ///< prompts and answers on the spans (opt-in)
  std::size_t queue_spans = 2048;  ///< spans waiting for the exporter; a full queue drops
  std::size_t batch_spans = 512;   ///< spans per export request at most
  ms batch_delay{5000};            ///< a partial batch waits at most this long
  ms export_timeout{10000};        ///< one export request, connect included
  bool operator==(const otel_config&) const = default;
};
std::string_view to_string(otel_config::protocol_kind p) noexcept;

/// The OTEL_* environment variables of the OpenTelemetry specification that apply to span export
/// (OTEL_EXPORTER_OTLP[_TRACES]_{ENDPOINT,PROTOCOL,HEADERS,TIMEOUT}, OTEL_SERVICE_NAME,
/// OTEL_TRACES_SAMPLER_ARG with a ratio sampler): what the file leaves unset takes them.
/// `env` reads a variable (nullptr: unset).  Throws config_error for a bad value.
void apply_otel_environment(otel_config& otel, const std::function<const char*(const char*)>& env);

struct config {
  host_port listen{"127.0.0.1", 8080};
  host_port admin{"127.0.0.1", 9464};
  /// File holding a bearer token for the admin endpoints (all but /healthz and /readyz); empty =
  /// no authentication (the admin port binds to loopback by default).  Read by the CLI.
  std::string admin_token_file;
  std::string admin_token;  ///< the token itself (from the file or TOKENTAP_ADMIN_TOKEN), not YAML
  unsigned threads = 0;     ///< 0 = number of cores
  /// Bind the client listener with SO_REUSEPORT: several proxy processes share one port and the
  /// kernel spreads new connections over them (each process its own descriptor limit; a new
  /// binary can start beside the old one before the old one drains).
  bool reuse_port = false;
  std::vector<upstream_config> upstreams;
  std::vector<route_config> routes;  ///< sorted longest prefix first by validate()
  timeouts_config timeouts;
  limits_config limits;
  bool identity_encoding =
      true;  ///< send `Accept-Encoding: identity` upstream so streams stay parseable
  std::string log_level = "info";
  bool access_log = true;
  /// Hooks run on every intercepted stream, in this order (names from the hook registry).
  std::vector<std::string> hooks{"timing", "steps", "cache", "metrics", "trace"};
  std::size_t max_event_bytes = 1u << 20;  ///< SSE event / NDJSON line cap for the decoders
  trace_config trace;
  metrics_config metrics;
  tenants_config tenants;
  shared_state_config shared_state;
  otel_config otel;
  std::vector<fault_rule> faults;  ///< checked in order; off while empty
  /// The top-level sections config/ does not read, in file order: hooks' own settings
  /// (`timing:`, `steps:`, `cache:`, `canary:`, `admission:`, `priority:`, `shed:`), each read
  /// by its hook (hooks/registry.hpp); the hook registry refuses a section that no hook reads,
  /// naming its line.
  std::vector<section::member> hook_settings;
  /// The section `name` of hook_settings, or an absent one.
  const section& hook_section(std::string_view name) const noexcept;
};

/// Reads a YAML file.  Unknown keys are errors, so typos do not pass silently (at the top level
/// the hook registry's: a key config/ does not know is kept as a hook's section).  With `check`,
/// also validates (pass false when command-line flags still have to be applied first).
config load_config_file(const std::string& path, bool check = true);

/// Parses YAML text; with `check`, also validates.
config parse_config(const std::string& yaml_text, bool check = true);

/// Sets hook sections from YAML text written as in a file (`cache: {ttl_s: 20}`), each replacing a
/// section of its name; for programs that build a configuration in code (the demo, tests).
/// Throws config_error for bad YAML or a key config/ reads itself.
void set_hook_sections(config& cfg, const std::string& yaml_text);

/// Checks cross references, fills derived fields and sorts routes.  Throws config_error.
void validate(config& cfg);

/// Replaces all upstreams and routes with one upstream `default` served at `/`.
void set_single_upstream(config& cfg, const std::string& url_text);

/// The settings a running proxy keeps until it restarts (listeners, I/O threads, the admin token,
/// the metric layout, tenants, trace files) that differ between `running` and `next`, named as
/// in the file and comma-separated; empty when a reload may apply `next`.
std::string restart_only_changes(const config& running, const config& next);

/// Returns the route for `path` (longest prefix), or nullptr.
const route_config* match_route(const config& cfg, std::string_view path);

}  // namespace tokentap::config
