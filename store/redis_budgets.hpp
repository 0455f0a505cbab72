#pragma once
// Budgets several proxy instances share, kept in Redis (DESIGN.md §11, `shared_state`): the one
// client of a store outside the process.  The admission hook (hooks/govern/admission.*) uses it
// from its sync thread; no hook owns a socket.
//
// A budget is a token bucket (`capacity`, refilled at `per_ms`) stored as a Redis hash and
// updated by one Lua script on Redis's own clock, so the instances' clocks do not matter.  An
// instance never asks Redis on the request path: it admits on its local view of each budget and,
// every sync interval, sends what it used since (a delta, negative when a settlement gave
// tokens back) and receives the budget's new level — every budget in one pipelined round trip.
// Several instances together can overrun a budget by at most what they admit within one sync
// interval.  This client is blocking (with timeouts) and used from the sync thread only.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "config/config.hpp"

struct redisContext;

namespace tokentap::store {

class redis_budgets {
 public:
  explicit redis_budgets(const config::shared_state_config& cfg);
  ~redis_budgets();
  redis_budgets(const redis_budgets&) = delete;
  redis_budgets& operator=(const redis_budgets&) = delete;

  struct budget {
    std::string key;  ///< under the configured key prefix
    double capacity = 0;
    double per_ms = 0;  ///< refill
    double used = 0;    ///< since the last exchange (negative: given back)
  };
  /// Sends every budget's use and returns its level after it, in order; nullopt when Redis could
  /// not be reached or answered otherwise (why: last_error()).  Connects when not connected.
  std::optional<std::vector<double>> exchange(const std::vector<budget>& budgets);
  const std::string& last_error() const noexcept { return error_; }

 private:
  bool connect();
  void disconnect();
  config::shared_state_config cfg_;
  redisContext* ctx_ = nullptr;
  std::string sha_;  // the loaded script's
  std::string error_;
};

}  // namespace tokentap::store
