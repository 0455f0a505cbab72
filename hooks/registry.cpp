#include "hooks/registry.hpp"

#include <algorithm>

#include "config/config.hpp"
#include "hooks/export/otel_hook.hpp"
#include "hooks/export/trace_hook.hpp"
#include "hooks/govern/admission.hpp"
#include "hooks/govern/cache_hints_hook.hpp"
#include "hooks/govern/canary.hpp"
#include "hooks/observe/cache_hook.hpp"
#include "hooks/observe/gen_ai_metrics.hpp"
#include "hooks/observe/metrics.hpp"
#include "hooks/observe/steps_hook.hpp"
#include "hooks/observe/timing_hook.hpp"

namespace tokentap::hooks {

void hook_registry::reads_sections(std::string name, std::vector<std::string> sections,
                                   std::function<void(const config::config&)> check, brings b) {
  auto& e = makers_.at(name);
  e.sections = std::move(sections);
  e.check_settings = std::move(check);
  e.brought = b;
}

bool hook_registry::entry::has_sections(const config::config& cfg) const {
  return std::any_of(sections.begin(), sections.end(),
                     [&](const std::string& s) { return bool(cfg.hook_section(s)); });
}

std::vector<std::string> hook_registry::configured(const config::config& cfg) const {
  std::vector<std::string> out;
  const auto brought = [&](brings where) {
    for (const auto& [name, e] : makers_)
      if (e.brought == where && e.has_sections(cfg) &&
          std::find(cfg.hooks.begin(), cfg.hooks.end(), name) == cfg.hooks.end())
        out.push_back(name);
  };
  brought(brings::first);
  out.insert(out.end(), cfg.hooks.begin(), cfg.hooks.end());
  brought(brings::last);
  return out;
}

std::vector<std::string> hook_registry::order(const config::config& cfg) const {
  const auto listed = configured(cfg);
  for (auto it = listed.begin(); it != listed.end(); ++it) {
    if (!makers_.contains(*it)) {
      std::string known;
      for (const auto& n : names()) known += (known.empty() ? "" : ", ") + n;
      throw config::config_error("unknown hook '" + *it + "' (available: " + known + ")");
    }
    if (std::find(listed.begin(), it, *it) != it)
      throw config::config_error("hook '" + *it + "' is listed twice");
  }
  const auto contract = [&](const std::string& name) -> const hook_contract& {
    return makers_.find(name)->second.contract;
  };
  const auto provider = [&](const std::string& piece) -> const std::string* {
    for (const auto& h : listed) {
      const auto& p = contract(h).provides;
      if (std::find(p.begin(), p.end(), piece) != p.end()) return &h;
    }
    return nullptr;
  };
  // What each hook must run after: the providers of what it needs (which must be there) and of
  // what it reads.
  std::map<std::string, std::vector<std::string>> after;
  for (const auto& h : listed) {
    auto& a = after[h];
    for (const auto& piece : contract(h).needs) {
      const auto* p = provider(piece);
      if (p == nullptr)
        throw config::config_error("hook '" + h + "' needs the " + piece +
                                   " that no configured hook provides (add the hook that does)");
      if (*p != h) a.push_back(*p);
    }
    for (const auto& piece : contract(h).reads)
      if (const auto* p = provider(piece); p != nullptr && *p != h) a.push_back(*p);
  }
  // Stable: each round takes the first listed hook whose predecessors all run before it.
  std::vector<std::string> out;
  std::vector<std::string> left(listed.begin(), listed.end());
  while (!left.empty()) {
    const auto ready = std::find_if(left.begin(), left.end(), [&](const std::string& h) {
      const auto& a = after[h];
      return std::all_of(a.begin(), a.end(), [&](const std::string& p) {
        return std::find(out.begin(), out.end(), p) != out.end();
      });
    });
    if (ready == left.end())
      throw config::config_error("hooks '" + left.front() + "' and '" +
                                 after[left.front()].front() + "' need each other");
    out.push_back(*ready);
    left.erase(ready);
  }
  return out;
}

void hook_registry::check(const config::config& cfg) const {
  // In file order: each section's hook reads all of its sections once, at the first of them.
  std::vector<const entry*> read;
  for (const auto& [key, key_line, value] : cfg.hook_settings) {
    const auto it = std::find_if(makers_.begin(), makers_.end(), [&](const auto& m) {
      const auto& s = m.second.sections;
      return std::find(s.begin(), s.end(), key) != s.end();
    });
    if (it == makers_.end())
      config::fail_at(key_line, "unknown key '" + key + "' in the top level");
    if (std::find(read.begin(), read.end(), &it->second) != read.end()) continue;
    read.push_back(&it->second);
    it->second.check_settings(cfg);
  }
  (void)order(cfg);
}

void hook_registry::complete(config::config& cfg) const {
  for (const auto& [name, e] : makers_)
    if (e.implied && e.has_sections(cfg)) e.implied(cfg);
}

std::vector<std::shared_ptr<hook_factory>> hook_registry::build(const config::config& cfg) const {
  check(cfg);
  std::vector<std::shared_ptr<hook_factory>> out;
  for (const auto& name : order(cfg))
    if (auto f = makers_.find(name)->second.make(cfg)) out.push_back(std::move(f));
  return out;
}

std::vector<std::string> hook_registry::names() const {
  std::vector<std::string> out;
  for (const auto& [name, _] : makers_) out.push_back(name);
  return out;
}

hook_registry builtin_hooks(std::shared_ptr<metrics_registry> metrics, span_sink_maker span_sinks) {
  hook_registry r;
  register_metrics_hook(r, metrics);
  register_cache_hook(r);
  register_admission(r, metrics);
  register_canary(r, metrics);
  register_gen_ai_metrics(r, metrics);
  register_cache_hints(r);
  register_steps(r);
  register_timing(r);
  register_trace(r, metrics);
  register_otel(r, std::move(span_sinks));
  return r;
}

}  // namespace tokentap::hooks
