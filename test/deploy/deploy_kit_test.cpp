// The deploy kit against the real binary (no Docker daemon or cluster here): the runtime stage of
// deploy/Dockerfile installs exactly the packages that provide the shared libraries the built
// binary links (dpkg knows which); its command names real flags and the ports it exposes; the
// Kubernetes manifests parse, their configs pass check-config, their containers' flags, ports and
// probe paths are the binary's own (the probes answered by the binary run with that config), the
// grace period covers the drain, and Services, the PDB and ServiceMonitors select what exists.
#include <gtest/gtest.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "test/support/http_client.hpp"
#include "test/support/ports.hpp"
#include "test/support/process.hpp"

namespace tokentap::test {
namespace {

namespace fs = std::filesystem;

std::string source(const std::string& path) {
  std::ifstream in(std::string(TOKENTAP_SOURCE_DIR) + "/" + path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string shell(const std::string& cmd) {
  std::string out;
  if (FILE* p = ::popen(cmd.c_str(), "r")) {
    char buf[4096];
    for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
    ::pclose(p);
  }
  return out;
}

std::vector<std::string> words(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

// The Dockerfile's instructions of its last stage, continuation lines joined.
std::vector<std::string> runtime_stage() {
  std::istringstream in(source("deploy/Dockerfile"));
  std::vector<std::string> stage;
  std::string line, pending;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    if (!line.empty() && line.back() == '\\') {
      pending += line.substr(0, line.size() - 1) + ' ';
      continue;
    }
    pending += line;
    if (pending.starts_with("FROM ")) stage.clear();
    stage.push_back(pending);
    pending.clear();
  }
  return stage;
}

// The flags `tokentap proxy --help` documents.
std::set<std::string> proxy_flags() {
  const auto r = run({"proxy", "--help"});
  std::set<std::string> flags;
  for (const auto& w : words(r.out + r.err))
    if (w.starts_with("--")) flags.insert(w);
  return flags;
}

// The Debian package of each shared library the binary links (libc6 aside: it is in every image).
std::set<std::string> linked_packages() {
  std::set<std::string> packages;
  std::istringstream ldd(shell("ldd " + tokentap_binary()));
  for (std::string line; std::getline(ldd, line);) {
    const auto arrow = line.find("=> /");
    if (arrow == std::string::npos) continue;
    const auto path = words(line.substr(arrow + 3)).at(0);
    std::string owner = shell("dpkg -S " + path + " 2>/dev/null");
    if (owner.empty()) owner = shell("dpkg -S " + fs::canonical(path).string() + " 2>/dev/null");
    EXPECT_FALSE(owner.empty()) << "no Debian package owns " << path;
    const auto name = owner.substr(0, owner.find_first_of(":,"));
    if (!name.empty() && name != "libc6") packages.insert(name);
  }
  return packages;
}

TEST(DeployKit, TheRuntimeImageInstallsExactlyThePackagesOfTheLibrariesTheBinaryLinks) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "a sanitizer build links its runtime libraries, which the image never has";
#endif
  const auto stage = runtime_stage();
  ASSERT_FALSE(stage.empty());
  EXPECT_EQ(stage.front(), "FROM debian:bookworm-slim AS runtime");
  std::set<std::string> installed;
  std::string user, entrypoint, cmd, copied_to;
  std::set<std::string> exposed;
  for (const auto& ins : stage) {
    const auto w = words(ins);
    if (w[0] == "RUN") {
      const auto at = std::find(w.begin(), w.end(), "install");
      for (auto it = at == w.end() ? at : at + 1; it != w.end() && *it != "&&"; ++it)
        if (!it->starts_with("-")) installed.insert(*it);
    } else if (w[0] == "USER") {
      user = w.at(1);
    } else if (w[0] == "EXPOSE") {
      exposed.insert(w.begin() + 1, w.end());
    } else if (w[0] == "ENTRYPOINT") {
      entrypoint = ins;
    } else if (w[0] == "CMD") {
      cmd = ins;
    } else if (w[0] == "COPY" && ins.find("--from=build") != std::string::npos) {
      copied_to = w.back();
    }
  }
  const auto linked = linked_packages();
  ASSERT_GE(linked.size(), 5u) << "ldd found too little in " << tokentap_binary();
  for (const auto& p : linked)
    EXPECT_TRUE(installed.contains(p)) << p << " is linked, not installed";
  for (const auto& p : installed) {
    if (p != "ca-certificates") {  // (not a library: the trust store for https:// upstreams)
      EXPECT_TRUE(linked.contains(p)) << p << " is installed, the binary does not link it";
    }
  }
  EXPECT_TRUE(installed.contains("ca-certificates"));
  // Not root, the binary where the entry point says, its command's flags real, its ports exposed.
  EXPECT_EQ(user, "65532:65532");
  EXPECT_EQ(entrypoint, R"(ENTRYPOINT [")" + copied_to + R"("])");
  const auto flags = proxy_flags();
  std::vector<std::string> args;
  for (auto w : words(cmd.substr(cmd.find('[')))) {
    w.erase(std::remove_if(w.begin(), w.end(),
                           [](char c) { return c == '[' || c == ']' || c == '"' || c == ','; }),
            w.end());
    if (!w.empty()) args.push_back(w);
  }
  ASSERT_GE(args.size(), 2u) << cmd;
  EXPECT_EQ(args[0], "proxy");
  for (std::size_t i = 1; i < args.size(); ++i) {
    if (!args[i].starts_with("--")) continue;
    EXPECT_TRUE(flags.contains(args[i])) << args[i] << " is not a flag of tokentap proxy";
    if (args[i] == "--listen" || args[i] == "--admin") {
      EXPECT_TRUE(exposed.contains(args.at(i + 1).substr(args.at(i + 1).rfind(':') + 1)))
          << args[i] << " " << args.at(i + 1) << " is not exposed";
    }
  }
  EXPECT_NE(std::find(stage.begin(), stage.end(), "STOPSIGNAL SIGTERM"), stage.end());
}

// ---- Kubernetes manifests

struct manifest {
  std::vector<YAML::Node> docs;
  std::vector<YAML::Node> of(const std::string& kind) const {
    std::vector<YAML::Node> out;
    for (const auto& d : docs)
      if (d["kind"].as<std::string>() == kind) out.push_back(d);
    return out;
  }
};

bool selects(const YAML::Node& selector, const YAML::Node& labels) {
  if (!selector || !selector.IsMap() || selector.size() == 0) return false;
  for (const auto& kv : selector) {
    const auto& v = labels[kv.first.as<std::string>()];
    if (!v || v.as<std::string>() != kv.second.as<std::string>()) return false;
  }
  return true;
}

std::uint16_t port_of(const std::string& host_port) {
  return static_cast<std::uint16_t>(std::stoi(host_port.substr(host_port.rfind(':') + 1)));
}

void check_manifest(const std::string& file, bool sidecar) {
  SCOPED_TRACE(file);
  manifest m;
  for (const auto& d : YAML::LoadAll(source(file))) {
    ASSERT_TRUE(d["apiVersion"] && d["kind"] && d["metadata"]["name"]) << file;
    m.docs.push_back(d);
  }
  const auto deployments = m.of("Deployment");
  ASSERT_EQ(deployments.size(), 1u);
  const auto& tpl = deployments[0]["spec"]["template"];
  const auto pod_labels = tpl["metadata"]["labels"];
  EXPECT_TRUE(selects(deployments[0]["spec"]["selector"]["matchLabels"], pod_labels));
  const auto& pod = tpl["spec"];
  // tokentap's container: an ordinary one (gateway) or a native sidecar.
  YAML::Node tt;
  std::map<std::string, int> port_names;  // every container's named ports
  for (const char* list : {"initContainers", "containers"})
    for (const auto& c : pod[list]) {
      for (const auto& p : c["ports"])
        port_names[p["name"].as<std::string>()] = p["containerPort"].as<int>();
      if (c["name"].as<std::string>() == "tokentap") {
        tt.reset(c);
        EXPECT_EQ(std::string(list), sidecar ? "initContainers" : "containers");
        if (sidecar) {
          EXPECT_EQ(c["restartPolicy"].as<std::string>(), "Always");
        }
      }
    }
  ASSERT_TRUE(tt) << "no container named tokentap";
  // Its arguments: real flags, a --config in the mounted ConfigMap.
  const auto flags = proxy_flags();
  const auto args = tt["args"].as<std::vector<std::string>>();
  ASSERT_FALSE(args.empty());
  EXPECT_EQ(args[0], "proxy");
  std::string config_path;
  for (std::size_t i = 1; i < args.size(); ++i)
    if (args[i].starts_with("--")) {
      EXPECT_TRUE(flags.contains(args[i])) << args[i];
      if (args[i] == "--config") config_path = args.at(i + 1);
    }
  ASSERT_FALSE(config_path.empty());
  std::map<std::string, std::string> mounts;  // mount path -> volume
  for (const auto& v : tt["volumeMounts"])
    mounts[v["mountPath"].as<std::string>()] = v["name"].as<std::string>();
  const auto dir = config_path.substr(0, config_path.rfind('/'));
  ASSERT_TRUE(mounts.contains(dir)) << config_path << " is not on a volume";
  std::string configmap;
  for (const auto& v : pod["volumes"])
    if (v["name"].as<std::string>() == mounts[dir])
      configmap = v["configMap"]["name"].as<std::string>();
  YAML::Node data;
  for (const auto& cm : m.of("ConfigMap"))
    if (cm["metadata"]["name"].as<std::string>() == configmap) data = cm["data"];
  ASSERT_TRUE(data) << "ConfigMap " << configmap << " is not in " << file;
  const auto text = data[config_path.substr(config_path.rfind('/') + 1)].as<std::string>();
  // The config itself: valid for the binary; its ports the container's; its trace directory on
  // a writable volume; the grace period longer than preStop + drain.
  const auto tmp = fs::temp_directory_path() / ("tokentap-kit-" + std::to_string(::getpid()));
  fs::create_directories(tmp);
  { std::ofstream(tmp / "config.yaml") << text; }
  const auto check = run({"check-config", (tmp / "config.yaml").string()});
  EXPECT_EQ(check.status, 0) << check.out << check.err;
  const auto cfg = YAML::Load(text);
  EXPECT_EQ(port_of(cfg["listen"].as<std::string>()), port_names.at("http"));
  EXPECT_EQ(port_of(cfg["admin"].as<std::string>()), port_names.at("admin"));
  EXPECT_TRUE(mounts.contains(cfg["trace"]["dir"].as<std::string>()));
  const auto grace_s = cfg["timeouts"]["shutdown_grace_ms"].as<int>() / 1000;
  int pre_stop_s = 0;
  if (const auto& ps = tt["lifecycle"]["preStop"]["exec"]["command"])
    if (ps[0].as<std::string>() == "sleep") pre_stop_s = ps[1].as<int>();
  EXPECT_GE(pod["terminationGracePeriodSeconds"].as<int>(), pre_stop_s + grace_s + 5);
  if (sidecar) {
    // Its upstream is the engine's port on loopback.
    const auto url = cfg["upstreams"].begin()->second["url"].as<std::string>();
    EXPECT_EQ(url, "http://127.0.0.1:" + std::to_string(port_names.at("engine")));
  }
  // Not root, read-only root filesystem, no privilege escalation (pod or container level).
  const auto sec = [&](const char* key) {
    return tt["securityContext"][key] ? tt["securityContext"][key] : pod["securityContext"][key];
  };
  EXPECT_TRUE(sec("runAsNonRoot").as<bool>());
  EXPECT_EQ(sec("runAsUser").as<int>(), 65532);
  EXPECT_TRUE(tt["securityContext"]["readOnlyRootFilesystem"].as<bool>());
  EXPECT_FALSE(tt["securityContext"]["allowPrivilegeEscalation"].as<bool>());
  // Probes: liveness and startup on /healthz, readiness on /readyz, on the admin port — and the
  // binary, run with this config, answers them.
  EXPECT_EQ(tt["livenessProbe"]["httpGet"]["path"].as<std::string>(), "/healthz");
  EXPECT_EQ(tt["startupProbe"]["httpGet"]["path"].as<std::string>(), "/healthz");
  EXPECT_EQ(tt["readinessProbe"]["httpGet"]["path"].as<std::string>(), "/readyz");
  for (const char* probe : {"livenessProbe", "readinessProbe", "startupProbe"})
    EXPECT_EQ(tt[probe]["httpGet"]["port"].as<std::string>(), "admin") << probe;
  {
    process p({"proxy", "--config", (tmp / "config.yaml").string(), "--listen", "127.0.0.1:0",
               "--admin", "127.0.0.1:0", "--trace-dir", (tmp / "traces").string()});
    const auto line = p.wait_for_line("ready ", std::chrono::seconds(10));
    ASSERT_FALSE(line.empty()) << p.err();
    const auto admin = ready_address(line, "admin");
    for (const char* probe : {"livenessProbe", "readinessProbe", "startupProbe"}) {
      request_options o;
      o.method = "GET";
      o.target = tt[probe]["httpGet"]["path"].as<std::string>();
      EXPECT_EQ(fetch(admin, o).status, 200) << o.target;
    }
    p.signal(SIGTERM);
    EXPECT_EQ(p.wait(std::chrono::seconds(10)), 0);
  }
  fs::remove_all(tmp);
  // Services select the pods and name ports they have; a PDB selects the pods; a ServiceMonitor
  // selects a Service and names its port.
  const auto services = m.of("Service");
  ASSERT_FALSE(services.empty());
  for (const auto& s : services) {
    EXPECT_TRUE(selects(s["spec"]["selector"], pod_labels)) << s["metadata"]["name"];
    for (const auto& p : s["spec"]["ports"])
      EXPECT_TRUE(port_names.contains(p["targetPort"].as<std::string>())) << p["targetPort"];
  }
  for (const auto& pdb : m.of("PodDisruptionBudget"))
    EXPECT_TRUE(selects(pdb["spec"]["selector"]["matchLabels"], pod_labels));
  for (const auto& sm : m.of("ServiceMonitor")) {
    bool found = false;
    for (const auto& s : services)
      if (selects(sm["spec"]["selector"]["matchLabels"], s["metadata"]["labels"])) {
        found = true;
        for (const auto& e : sm["spec"]["endpoints"]) {
          bool named = false;
          for (const auto& p : s["spec"]["ports"])
            named = named || p["name"].as<std::string>() == e["port"].as<std::string>();
          EXPECT_TRUE(named) << e["port"];
          EXPECT_EQ(e["path"].as<std::string>(), "/metrics");
          // (the Service's port leads to tokentap's admin port)
        }
      }
    EXPECT_TRUE(found) << "ServiceMonitor " << sm["metadata"]["name"] << " selects no Service";
  }
}

TEST(DeployKit, TheGatewayManifestsNameTheBinarysFlagsPortsAndProbes) {
  check_manifest("deploy/k8s/gateway.yaml", false);
  manifest m;
  for (const auto& d : YAML::LoadAll(source("deploy/k8s/gateway.yaml"))) m.docs.push_back(d);
  EXPECT_EQ(m.of("PodDisruptionBudget").size(), 1u);
  EXPECT_EQ(m.of("ServiceMonitor").size(), 1u);
  EXPECT_GE(m.of("Deployment")[0]["spec"]["replicas"].as<int>(), 2);
}

TEST(DeployKit, TheSidecarManifestsPutTokentapInFrontOfTheEngineOnLoopback) {
  check_manifest("deploy/k8s/sidecar.yaml", true);
}

}  // namespace
}  // namespace tokentap::test
