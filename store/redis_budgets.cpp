#include "store/redis_budgets.hpp"

#include <hiredis/hiredis.h>

#include <cstdio>
#include <cstdlib>

namespace tokentap::store {

namespace {

// KEYS[1]: the budget; ARGV: capacity, refill per ms, used since the last exchange, TTL (ms).
// Refilled on Redis's clock, capped at capacity; what was used is taken (a budget may go into
// debt); a budget nobody touched for its TTL is forgotten (it would be full again by then).
constexpr const char* script = R"lua(
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local cap = tonumber(ARGV[1])
local v = redis.call('HMGET', KEYS[1], 'a', 't')
local a = tonumber(v[1])
local ts = tonumber(v[2])
if a == nil or ts == nil then a = cap; ts = now end
if now > ts then a = math.min(cap, a + (now - ts) * tonumber(ARGV[2])) end
a = math.min(cap, a - tonumber(ARGV[3]))
redis.call('HSET', KEYS[1], 'a', string.format('%.17g', a), 't', now)
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return string.format('%.17g', a)
)lua";

timeval timeval_of(config::ms d) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(d.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((d.count() % 1000) * 1000);
  return tv;
}

std::string number(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

}  // namespace

redis_budgets::redis_budgets(const config::shared_state_config& cfg) : cfg_(cfg) {}

redis_budgets::~redis_budgets() {
  disconnect();
}

void redis_budgets::disconnect() {
  if (ctx_ != nullptr) redisFree(ctx_);
  ctx_ = nullptr;
  sha_.clear();
}

bool redis_budgets::connect() {
  if (ctx_ != nullptr) return true;
  ctx_ =
      redisConnectWithTimeout(cfg_.redis_host.c_str(), cfg_.redis_port, timeval_of(cfg_.timeout));
  if (ctx_ == nullptr || ctx_->err != 0) {
    error_ = "connect to " + cfg_.redis_host + ":" + std::to_string(cfg_.redis_port) + ": " +
             (ctx_ != nullptr ? ctx_->errstr : "out of memory");
    disconnect();
    return false;
  }
  redisSetTimeout(ctx_, timeval_of(cfg_.timeout));
  auto* r = static_cast<redisReply*>(redisCommand(ctx_, "SCRIPT LOAD %s", script));
  const bool ok = r != nullptr && r->type == REDIS_REPLY_STRING;
  if (ok) sha_.assign(r->str, r->len);
  error_ = ok ? "" : r == nullptr ? std::string(ctx_->errstr) : "SCRIPT LOAD: unexpected reply";
  if (r != nullptr) freeReplyObject(r);
  if (!ok) disconnect();
  return ok;
}

std::optional<std::vector<double>> redis_budgets::exchange(const std::vector<budget>& budgets) {
  if (!connect()) return std::nullopt;
  if (budgets.empty()) {
    // Nothing to exchange: a PING still tells whether Redis is there.
    auto* r = static_cast<redisReply*>(redisCommand(ctx_, "PING"));
    const bool ok = r != nullptr && r->type == REDIS_REPLY_STATUS;
    if (!ok) error_ = r == nullptr ? std::string(ctx_->errstr) : "PING: unexpected reply";
    if (r != nullptr) freeReplyObject(r);
    if (!ok) {
      disconnect();
      return std::nullopt;
    }
    return std::vector<double>{};
  }
  // Every budget refills in a minute: one idle for two is full, and Redis may forget it.
  const std::string ttl = "120000";
  for (const auto& b : budgets) {
    const auto key = cfg_.key_prefix + b.key;
    const auto cap = number(b.capacity), rate = number(b.per_ms), used = number(b.used);
    const char* argv[] = {"EVALSHA",   sha_.c_str(), "1",          key.c_str(),
                          cap.c_str(), rate.c_str(), used.c_str(), ttl.c_str()};
    const std::size_t lens[] = {7,          sha_.size(), 1,           key.size(),
                                cap.size(), rate.size(), used.size(), ttl.size()};
    redisAppendCommandArgv(ctx_, 8, argv, lens);
  }
  std::vector<double> levels;
  levels.reserve(budgets.size());
  bool ok = true;
  for (std::size_t i = 0; i < budgets.size(); ++i) {
    void* reply = nullptr;
    if (redisGetReply(ctx_, &reply) != REDIS_OK || reply == nullptr) {
      error_ = ctx_->errstr[0] != '\0' ? ctx_->errstr : "no reply";
      disconnect();  // (the connection's position is unknown now)
      return std::nullopt;
    }
    auto* r = static_cast<redisReply*>(reply);
    if (r->type == REDIS_REPLY_STRING) {
      levels.push_back(std::strtod(r->str, nullptr));
    } else {
      // e.g. NOSCRIPT after a Redis restart: the next exchange reconnects and loads it again.
      error_ = r->type == REDIS_REPLY_ERROR ? std::string(r->str, r->len) : "unexpected reply";
      ok = false;
    }
    freeReplyObject(r);
  }
  if (!ok) {
    disconnect();
    return std::nullopt;
  }
  return levels;
}

}  // namespace tokentap::store
