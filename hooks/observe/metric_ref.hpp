#pragma once
// Handles on series of the metrics registry (metrics.hpp) for a component that counts into them
// directly; light enough for any header to hold one.
#include <cstdint>

namespace prometheus {
class Counter;
class Gauge;
}  // namespace prometheus

namespace tokentap::hooks {

class metrics_registry;

/// A counter the registry keeps for a component that counts as things happen (the proxy's
/// rejected requests, client disconnects, upstream connections): resolved once, so counting takes
/// no lock and no lookup.  Valid as long as its registry.
class counter_ref {
 public:
  void add(std::uint64_t n = 1) const noexcept;
  std::uint64_t value() const noexcept;

 private:
  friend class metrics_registry;
  explicit counter_ref(prometheus::Counter& c) noexcept : c_(&c) {}
  prometheus::Counter* c_;
};

/// A gauge the registry keeps, moved as things start and end (same rules).
class gauge_ref {
 public:
  void add(double n = 1) const noexcept;
  void sub(double n = 1) const noexcept;
  void set(double v) const noexcept;
  double value() const noexcept;

 private:
  friend class metrics_registry;
  explicit gauge_ref(prometheus::Gauge& g) noexcept : g_(&g) {}
  prometheus::Gauge* g_;
};

}  // namespace tokentap::hooks
