// The layers the layout promises (DESIGN.md §2), checked on the sources: base and the parsers
// are pure — no I/O, no Boost — and include nothing of a layer above them; each folder's code
// lives in the namespace named after it.  The build enforces the includes too (each library's
// include root holds only its own folder); these tests state the rules where a reader looks.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

namespace tokentap::test {
namespace {

namespace fs = std::filesystem;

// Every `#include` of the files under `dir` (relative to the source root), as "file: include".
std::vector<std::string> includes_under(const std::string& dir) {
  std::vector<std::string> out;
  const std::regex include(R"(^\s*#\s*include\s*([<"][^>"]+[>"]))");
  for (const auto& e : fs::recursive_directory_iterator(fs::path(TOKENTAP_SOURCE_DIR) / dir)) {
    const auto ext = e.path().extension();
    if (ext != ".cpp" && ext != ".hpp" && ext != ".h") continue;
    std::ifstream in(e.path());
    std::smatch m;
    for (std::string line; std::getline(in, line);)
      if (std::regex_search(line, m, include))
        out.push_back(fs::relative(e.path(), TOKENTAP_SOURCE_DIR).string() + ": " + m[1].str());
  }
  return out;
}

TEST(Layering, ParsersIncludeNoBoostNoIoAndNoHigherLayer) {
  const auto found = includes_under("parsers");
  ASSERT_GT(found.size(), 20u);  // the walk saw the parsers
  // The standard library, simdjson, x86 intrinsics, base, and the parsers themselves (their
  // headers and providers.def).
  const std::regex allowed(
      R"re(: (<[a-z_]+>|<simdjson\.h>|<[a-z]mmintrin\.h>|"(base|parsers)/[a-z_]+\.(hpp|def)"))re");
  const std::regex io(R"(<(fstream|iostream|thread|mutex|sys/.*|unistd\.h|fcntl\.h)>)");
  for (const auto& f : found) {
    EXPECT_TRUE(std::regex_search(f, allowed)) << f;
    EXPECT_FALSE(std::regex_search(f, io)) << f;
  }
}

// base (the JSON writer, the log, the clocks) is what every layer uses: it uses no other layer
// and no Boost; its one I/O is the log's write to stderr (<unistd.h>).
TEST(Layering, BaseIsTheBottom) {
  const auto found = includes_under("base");
  ASSERT_GT(found.size(), 5u);
  const std::regex allowed(R"(: (<[a-z_]+>|<[a-z]mmintrin\.h>|<unistd\.h>|"base/[a-z_]+\.hpp"))");
  for (const auto& f : found) EXPECT_TRUE(std::regex_search(f, allowed)) << f;
}

// A folder's code lives in the namespace named after it (tokentap::hooks in hooks/, rooms
// included), or in one inside it (tokentap::base::json); another layer's namespace appears only
// to declare a name ahead (`namespace tokentap::hooks { class metrics_registry; }`).  net/net.hpp
// alone opens `tokentap` itself: the aliases every networking file names (asio, beast, tcp,
// error_code, awaitable).
TEST(Layering, NamespacesMatchFolders) {
  const fs::path root(TOKENTAP_SOURCE_DIR);
  const std::regex opens(R"(^namespace (tokentap(::[a-z_]+)*) \{)");
  const std::regex declares_ahead(R"(^(class|struct) [a-z_]+;$|^template <.*>$)");
  std::size_t seen = 0;
  for (const char* folder : {"base", "parsers", "config", "store", "hooks", "net", "proxy", "sim",
                             "replay", "bench", "app"}) {
    const std::string own = std::string("tokentap::") + folder;
    for (const auto& e : fs::recursive_directory_iterator(root / folder)) {
      const auto ext = e.path().extension();
      if (ext != ".cpp" && ext != ".hpp") continue;
      const auto file = fs::relative(e.path(), root).string();
      std::ifstream in(e.path());
      std::vector<std::string> lines;
      for (std::string l; std::getline(in, l);) lines.push_back(l);
      for (std::size_t i = 0; i < lines.size(); ++i) {
        std::smatch m;
        if (!std::regex_search(lines[i], m, opens)) continue;
        ++seen;
        const auto ns = m[1].str();
        if (ns == own || ns.starts_with(own + "::")) continue;
        if (file == "net/net.hpp" && ns == "tokentap") continue;
        // Another layer's namespace: only names declared ahead, up to its closing brace.
        for (std::size_t j = i + 1; j < lines.size() && !lines[j].starts_with("}"); ++j)
          EXPECT_TRUE(std::regex_search(lines[j], declares_ahead))
              << file << ":" << j + 1 << " defines in " << ns << ": " << lines[j];
      }
    }
  }
  EXPECT_GT(seen, 100u);
}

// Dependencies point one way: config and hooks know nothing of sockets (no Boost, no proxy/),
// net knows nothing above it, and nothing but the binary includes app/ (main and the
// subcommands sit on top).
TEST(Layering, DependenciesPointDownAndTheAppIsOnTop) {
  const std::regex boost_or_proxy(R"(: (<boost/|"net/|"proxy/|"sim/|"replay/|"bench/|"app/))");
  for (const char* lower : {"config", "hooks"}) {
    const auto found = includes_under(lower);
    ASSERT_GT(found.size(), 5u) << lower;
    for (const auto& f : found) EXPECT_FALSE(std::regex_search(f, boost_or_proxy)) << f;
  }
  // store (the clients of stores outside the process: Redis) sits below the hooks, beside config.
  const auto in_store = includes_under("store");
  ASSERT_GT(in_store.size(), 3u);
  const std::regex above_store(R"(: (<boost/|"(net|hooks|proxy|sim|replay|bench|app)/))");
  for (const auto& f : in_store) EXPECT_FALSE(std::regex_search(f, above_store)) << f;
  // net (runtime, TLS, the shared HTTP server connection) knows nothing of what runs on it; the
  // simulator and replay run on net, not on the proxy.
  const auto in_net = includes_under("net");
  ASSERT_GT(in_net.size(), 5u);
  const std::regex above_net(R"(: "(proxy|hooks|sim|replay|bench|app)/)");
  for (const auto& f : in_net) EXPECT_FALSE(std::regex_search(f, above_net)) << f;
  const std::regex proxy(R"(: "proxy/)");
  for (const char* beside : {"sim", "replay"})
    for (const auto& f : includes_under(beside)) EXPECT_FALSE(std::regex_search(f, proxy)) << f;
  const std::regex app(R"(: "app/)");
  for (const char* below :
       {"base", "parsers", "config", "store", "hooks", "net", "proxy", "sim", "replay", "bench"})
    for (const auto& f : includes_under(below)) EXPECT_FALSE(std::regex_search(f, app)) << f;
}

// test/ mirrors the sources: a unit test under test/<folder>/ (or a room of it) is named after
// the source file it tests in the same place (test/hooks/export/trace_hook_test.cpp tests
// hooks/export/trace_hook.*), or after a test tool beside it (test/bench/transit_test.cpp tests
// the load scripts' test/bench/transit.*).  Tests of several layers together live in
// test/integration/.
TEST(Layering, UnitTestsMirrorTheSources) {
  const fs::path root(TOKENTAP_SOURCE_DIR);
  std::size_t seen = 0;
  for (const char* folder : {"base", "parsers", "config", "store", "hooks", "net", "proxy", "sim",
                             "replay", "bench", "app"}) {
    if (!fs::exists(root / "test" / folder)) continue;
    for (const auto& e : fs::recursive_directory_iterator(root / "test" / folder)) {
      const auto name = e.path().filename().string();
      if (!name.ends_with("_test.cpp")) continue;
      ++seen;
      const auto stem = name.substr(0, name.size() - std::string("_test.cpp").size());
      const auto dir = fs::relative(e.path().parent_path(), root / "test");
      EXPECT_TRUE(fs::exists(root / dir / (stem + ".cpp")) ||
                  fs::exists(root / dir / (stem + ".hpp")) ||
                  fs::exists(e.path().parent_path() / (stem + ".cpp")))
          << "test/" << (dir / name).string() << " names no source " << (dir / stem).string();
    }
  }
  EXPECT_GT(seen, 20u);
}

// The hooks live in rooms by what they do: the chain and the hook interface in hooks/ itself,
// what watches the stream in hooks/observe, what decides before forwarding in hooks/govern,
// what leaves the process in hooks/export.  No other folder and no loose hook file.
TEST(Layering, HooksLiveInRoomsByKind) {
  const fs::path hooks = fs::path(TOKENTAP_SOURCE_DIR) / "hooks";
  std::size_t in_rooms = 0;
  for (const auto& e : fs::directory_iterator(hooks)) {
    const auto name = e.path().filename().string();
    if (e.is_directory()) {
      EXPECT_TRUE(name == "observe" || name == "govern" || name == "export") << name;
      for (const auto& f : fs::directory_iterator(e.path())) in_rooms += f.is_regular_file();
      continue;
    }
    EXPECT_TRUE(name.starts_with("hook") || name.starts_with("tap.") ||
                name.starts_with("builtin_") || name.starts_with("registry.") ||
                name.starts_with("sliding_window.") || name == "CMakeLists.txt")
        << "hooks/" << name << " belongs in a room";
  }
  EXPECT_GT(in_rooms, 20u);
}

// The performance seams between the chain and the built-in hooks (the hot-line prefetch, shaped
// reads) are private: the public hook interface does not know them, and no layer outside hooks/
// includes them.
TEST(Layering, ThePerformanceSeamsStayInsideTheHooks) {
  const std::regex seams(R"(: "hooks/builtin_seams\.hpp")");
  for (const char* outside : {"base", "parsers", "config", "net", "proxy", "sim", "replay", "app"})
    for (const auto& f : includes_under(outside)) EXPECT_FALSE(std::regex_search(f, seams)) << f;
  for (const auto& f : includes_under("hooks")) {
    if (f.starts_with("hooks/hook.hpp:") || f.starts_with("hooks/tap.hpp:")) {
      EXPECT_FALSE(std::regex_search(f, seams)) << f;
    }
  }
}

}  // namespace
}  // namespace tokentap::test
