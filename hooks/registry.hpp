#pragma once
// The hooks a configuration can name.  Each is registered under its name with its contract (the
// pieces of the stream_info it provides, needs and reads) and a maker that builds its factory
// from a configuration.  builtin_hooks() is one registration per built-in hook; each hook's
// registration — its maker, its contract and what a reload keeps of its state — lives beside the
// hook, so adding a hook touches its own room and one line in registry.cpp.
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "config/config.hpp"
#include "hooks/hook.hpp"

namespace tokentap::hooks {

/// Hook factories by name, with their contracts.  A configuration lists hooks in any order: they
/// run after the hooks whose pieces they need or read, otherwise as listed.
class hook_registry {
 public:
  using maker = std::function<std::shared_ptr<hook_factory>(const config::config&)>;
  void add(std::string name, maker m, hook_contract c = {}) {
    makers_[std::move(name)] = {std::move(m), std::move(c), {}, {}, {}, {}};
  }
  /// Whether a hook's section, present, brings the hook into a configuration that does not
  /// list it: first (before every listed hook) or last.
  enum class brings : std::uint8_t { nothing, first, last };

  /// A hook with settings of its own: the configuration's top-level section of its name
  /// (config::config::hook_section), read by `parse` — `Settings(const config::section&)`, or
  /// `Settings(const config::section&, const config::config&)` for settings that name routes
  /// or upstreams; the defaults for an absent section, config::config_error naming the line for
  /// a bad one — and handed to `make`: `std::shared_ptr<hook_factory>(const config::config&,
  /// const Settings&)`.  check() and build() read every section a configuration has, listed hook
  /// or not, so a typo fails at start-up.
  template <class Settings, class Parse, class Make>
  void add_with_settings(std::string name, Parse parse, Make make, hook_contract c = {},
                         brings b = brings::nothing) {
    auto maker_of = [name, parse, make](const config::config& cfg) {
      return make(cfg, read_settings<Settings>(parse, cfg.hook_section(name), cfg));
    };
    add(name, std::move(maker_of), std::move(c));
    reads_section<Settings>(std::move(name), parse, b);
  }
  /// Gives a registered hook its section: `parse` as for add_with_settings (for a hook whose
  /// maker reads the section itself, e.g. add_with_carried_state's state).
  template <class Settings, class Parse>
  void reads_section(std::string name, Parse parse, brings b = brings::nothing) {
    auto section = name;
    reads_sections(
        std::move(name), {std::move(section)},
        [parse, section](const config::config& cfg) {
          (void)read_settings<Settings>(parse, cfg.hook_section(section), cfg);
        },
        b);
  }
  /// Gives a registered hook several sections, read together by `check(cfg)` (which throws
  /// config::config_error naming a line, as a parse does): for settings written as sibling
  /// sections that refer to each other (`admission:`, `priority:`, `shed:`).  Any of them present
  /// brings the hook as `b` says.
  void reads_sections(std::string name, std::vector<std::string> sections,
                      std::function<void(const config::config&)> check, brings b = brings::nothing);
  /// What a hook's sections imply of the proxy's own settings, set by complete(): e.g. an
  /// admission rule per tenant tells tenants apart.  Called only when a section is present.
  void implies(const std::string& name, std::function<void(config::config&)> set) {
    makers_.at(name).implied = std::move(set);
  }
  /// The configured hooks in the order they run: those `hooks:` lists and those their sections
  /// bring.  Throws config::config_error, with a one-line reason, for an unknown name, a name
  /// listed twice (a hook runs once per stream), a piece needed that no configured hook
  /// provides, or hooks that need each other.
  std::vector<std::string> order(const config::config& cfg) const;
  /// order() and every hook section read, for their errors; a top-level section that no hook
  /// reads is an unknown key.
  void check(const config::config& cfg) const;
  /// Sets what the configured hooks' sections imply of the proxy's own settings (implies()); the
  /// proxy calls it before it reads them (start-up and reload).  Idempotent.
  void complete(config::config& cfg) const;
  /// Builds the factories in order() (start-up and reload), after check().
  std::vector<std::shared_ptr<hook_factory>> build(const config::config& cfg) const;
  std::vector<std::string> names() const;

 private:
  template <class Settings, class Parse>
  static Settings read_settings(const Parse& parse, const config::section& s,
                                const config::config& cfg) {
    if constexpr (std::is_invocable_v<const Parse&, const config::section&, const config::config&>)
      return parse(s, cfg);
    else
      return parse(s);
  }
  struct entry {
    maker make;
    hook_contract contract;
    std::vector<std::string> sections;  ///< top-level sections it reads (none: no settings)
    std::function<void(const config::config&)> check_settings;
    brings brought = brings::nothing;
    std::function<void(config::config&)> implied;
    /// Whether `cfg` has any of its sections.
    bool has_sections(const config::config& cfg) const;
  };
  // The hooks that run: those listed, and those their sections bring.
  std::vector<std::string> configured(const config::config& cfg) const;
  std::map<std::string, entry, std::less<>> makers_;
};

class metrics_registry;
class span_sink;

/// Where the `otel` hook's spans go for an `otel:` configuration (the proxy's OTLP exporter).
using span_sink_maker = std::function<std::shared_ptr<span_sink>(const config::otel_config&)>;

/// The registry with every built-in hook.  The "metrics" hook records into `metrics` (and is
/// skipped without one); "trace" is skipped while no trace directory is configured; "otel"
/// while no `span_sinks` are given.
hook_registry builtin_hooks(std::shared_ptr<metrics_registry> metrics = nullptr,
                            span_sink_maker span_sinks = {});

/// A hook's state with the configuration it was built from (it points into it).
template <class State>
struct kept {
  explicit kept(const config::config& c) : cfg(c), state(cfg) {}
  const config::config cfg;
  State state;
};

/// The state a registration built last, when it is still in use and `cfg` leaves what it reads
/// unchanged (`same(before, cfg)`: a reload carries budgets, concurrency in flight, shedding
/// windows and canary progress on); else a new one, published to `metrics` when there is one.
template <class State, class Same>
std::shared_ptr<State> carried_over(std::weak_ptr<kept<State>>& last, const config::config& cfg,
                                    Same same, const std::shared_ptr<metrics_registry>& metrics) {
  if (auto k = last.lock(); k != nullptr && same(k->cfg, cfg))
    return std::shared_ptr<State>(k, &k->state);
  auto k = std::make_shared<kept<State>>(cfg);
  std::shared_ptr<State> state(k, &k->state);
  if (metrics) state->publish(*metrics, state);
  last = k;
  return state;
}

/// Registers `name` as a hook whose `State` a reload keeps while `same(before, cfg)` holds (see
/// carried_over); each configuration's `Factory` is built on that state.
template <class Factory, class State, class Same>
void add_with_carried_state(hook_registry& r, std::string name, Same same,
                            std::shared_ptr<metrics_registry> metrics) {
  r.add(std::move(name),
        [metrics = std::move(metrics), same, last = std::make_shared<std::weak_ptr<kept<State>>>()](
            const config::config& cfg) -> std::shared_ptr<hook_factory> {
          return std::make_shared<Factory>(carried_over(*last, cfg, same, metrics));
        },
        {.provides = {}, .needs = {}, .reads = {}});
}

}  // namespace tokentap::hooks
