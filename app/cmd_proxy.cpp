#include "app/commands.hpp"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <optional>
#include <string>

#include "base/log.hpp"
#include "hooks/registry.hpp"
#include "proxy/cluster.hpp"
#include "proxy/proxy_server.hpp"
#include "tokentap/version.hpp"

namespace tokentap::app {

namespace {

constexpr const char* proxy_help = R"(usage: tokentap proxy [flags]

  --config FILE            YAML config (upstreams, routes, timeouts, limits); flags override it
  --listen HOST:PORT       where clients connect (default 127.0.0.1:8080)
  --upstream URL           http:// or https:// inference API; replaces configured upstreams
  --admin HOST:PORT        /dashboard /api/stats /metrics /healthz /readyz (default 127.0.0.1:9464)
  --admin-token-file FILE  require this bearer token (or Basic auth password) on the admin
                           endpoints except /healthz and /readyz; TOKENTAP_ADMIN_TOKEN works too
  --threads N              I/O threads (default: one per core)
  --reuse-port             share --listen with other tokentap processes (SO_REUSEPORT): the
                           kernel spreads connections over them (each needs its own --admin)
  --ca-file FILE           extra CA bundle to trust for the --upstream
  --insecure-skip-verify   do not verify the --upstream's TLS certificate (testing only)
  --log-level LEVEL        debug | info | warn | error (default info)
  --no-access-log          do not log one line per request
  --trace-dir DIR          write one JSON line per exchange (DESIGN.md §5) into DIR

SIGINT/SIGTERM stop accepting, let in-flight streams finish (timeouts.shutdown_grace_ms), exit 0.
SIGHUP (or POST /admin/reload with the admin token) reads the config file again with the same
flags: new requests use it, in-flight streams finish on theirs; an invalid file, or one that
changes listen, admin, threads, reuse_port, limits.max_connections, metrics, tenants or trace,
is refused with the reason and the running config kept.
)";

// A secret given by file or environment, never by argv (visible in ps): the first line of
// `file` when one is named, else the variable `env`, else none.  `what` names it in errors.
std::string read_secret(const std::string& file, const char* env, const std::string& what) {
  std::string secret;
  if (!file.empty()) {
    std::ifstream in(file);
    if (!in) throw config::config_error("cannot read " + what + " file '" + file + "'");
    std::getline(in, secret);
  } else if (const char* value = std::getenv(env)) {
    secret = value;
  } else {
    return {};
  }
  while (!secret.empty() &&
         (secret.back() == '\r' || secret.back() == ' ' || secret.back() == '\t'))
    secret.pop_back();
  if (secret.size() < 16 || secret.size() > 1024)
    throw config::config_error("the " + what + " must be 16 to 1024 characters on one line");
  for (const char c : secret)
    if (static_cast<unsigned char>(c) < 0x21 || c == 0x7f)
      throw config::config_error("the " + what + " must be printable, without spaces");
  return secret;
}

config::config proxy_config(const flags& f) {
  config::config cfg;
  if (auto path = f.get("config")) cfg = config::load_config_file(*path, /*check=*/false);
  if (auto up = f.get("upstream")) config::set_single_upstream(cfg, *up);
  cfg.listen = address_flag(f, "listen", cfg.listen);
  cfg.admin = address_flag(f, "admin", cfg.admin);
  if (f.has("threads")) cfg.threads = static_cast<unsigned>(f.number("threads", 0, 0, 1024));
  if (f.has("reuse-port")) cfg.reuse_port = true;
  if (f.has("insecure-skip-verify") || f.has("ca-file")) {
    if (!f.has("upstream"))
      throw usage_error{
          "--insecure-skip-verify and --ca-file apply to --upstream; set tls_verify/ca_file per "
          "upstream in the config"};
    cfg.upstreams[0].tls_verify = !f.has("insecure-skip-verify");
    cfg.upstreams[0].ca_file = f.get("ca-file").value_or("");
  }
  if (auto l = f.get("log-level")) cfg.log_level = *l;
  if (f.has("no-access-log")) cfg.access_log = false;
  if (auto d = f.get("trace-dir")) cfg.trace.dir = *d;
  if (auto t = f.get("admin-token-file")) cfg.admin_token_file = *t;
  // The admin bearer token (--admin-token-file / admin_token_file, TOKENTAP_ADMIN_TOKEN) and the
  // salt of the credential hash that names tenants (tenants.salt_file, TOKENTAP_TENANT_SALT;
  // without one each process draws its own).
  cfg.admin_token = read_secret(cfg.admin_token_file, "TOKENTAP_ADMIN_TOKEN", "admin token");
  cfg.tenants.salt = read_secret(cfg.tenants.salt_file, "TOKENTAP_TENANT_SALT", "tenant salt");
  // OpenTelemetry export: what the file leaves unset comes from the standard OTEL_* variables.
  config::apply_otel_environment(cfg.otel, [](const char* name) { return std::getenv(name); });
  config::validate(cfg);
  // The hooks read their own sections (a top-level key no hook reads is refused) and the proxy
  // knows its balancing policies: their errors name the file, as config/'s own do.
  if (auto path = f.get("config")) {
    try {
      hooks::builtin_hooks().check(cfg);
      proxy::check_balancing(cfg);
    } catch (const config::config_error& e) {
      throw config::config_error(*path + ": " + e.what());
    }
  }
  return cfg;
}

}  // namespace

int cmd_proxy(const std::vector<std::string>& args) {
  if (want_help(args)) return std::cout << proxy_help, 0;
  auto f = flags::parse("proxy", args,
                        {"config", "listen", "upstream", "admin", "admin-token-file", "threads",
                         "ca-file", "log-level", "trace-dir"},
                        {"insecure-skip-verify", "no-access-log", "reuse-port"});
  if (!f.positional().empty()) throw usage_error{"unexpected argument '" + f.positional()[0] + "'"};
  auto cfg = proxy_config(f);
  base::log::level l;
  base::log::parse_level(cfg.log_level, l);
  base::log::set_level(l);
  proxy::proxy_server server(cfg);
  server.start();
  TT_LOG(info) << "tokentap " << version_string << " proxy listening on "
               << server.endpoint().address().to_string() << ":" << server.endpoint().port()
               << ", admin on " << server.admin_endpoint().address().to_string() << ":"
               << server.admin_endpoint().port() << " (" << allocator_name() << ")";
  for (const auto& r : server.cfg().routes) {
    const auto& up = server.cfg().upstreams[r.upstream_index];
    // (An unverified TLS upstream gets its own warning from the server.)
    std::string endpoints;
    for (const auto& e : up.endpoints) endpoints += (endpoints.empty() ? "" : ", ") + e.to_string();
    TT_LOG(info) << "route " << r.name << ": " << r.prefix << " -> " << up.name << " (" << endpoints
                 << ")";
  }
  server.set_config_source([&f] {
    try {
      return proxy_config(f);
    } catch (const usage_error& e) {
      throw config::config_error(e.message);
    }
  });
  run_until_stopped(
      [&] { server.shutdown(); }, [&] { server.shutdown(std::chrono::milliseconds(0)); },
      [&] { server.join(); }, std::nullopt, [&] { server.reload_from_source(); },
      [&] {
        // Machine-readable readiness line for scripts and tests (ports may be ephemeral).
        std::printf("ready proxy=%s:%u admin=%s:%u\n",
                    server.endpoint().address().to_string().c_str(), server.endpoint().port(),
                    server.admin_endpoint().address().to_string().c_str(),
                    server.admin_endpoint().port());
        std::fflush(stdout);
      });
  TT_LOG(info) << "proxy stopped";
  return 0;
}

}  // namespace tokentap::app
