#include "proxy/attempts.hpp"

#include "base/log.hpp"
#include "hooks/observe/metrics.hpp"
#include "proxy/exchange.hpp"

namespace tokentap::proxy {

void attempts::begin(exchange& ex, cluster& primary, http::request_header<> fields,
                     std::optional<std::size_t> body_length, std::string_view peer,
                     bool identity_encoding, hooks::metrics_registry* metrics) {
  end();
  primary_ = &primary;
  metrics_ = metrics;
  fields_ = std::move(fields);
  body_length_ = body_length;
  peer_ = peer;
  identity_encoding_ = identity_encoding;
  tried_count_ = 1;
  write_head(ex);
}

void attempts::end() noexcept {
  for (std::size_t i = 0; i + 1 < tried_count_; ++i) held_[i]->end_retry();
  tried_count_ = 0;
  fields_ = {};
}

void attempts::write_head(exchange& ex) const {
  const auto& e = *ex.upstream_endpoint;
  const forwarded_request f{e.target.base_path, e.host_header, peer_, identity_encoding_,
                            body_length_};
  ex.request_head.clear();
  append_upstream_request_head(ex.request_head, fields_, f);
}

void attempts::outcome(exchange& ex, cluster& c, endpoint& e, bool failed, std::string_view error,
                       unsigned code) {
  if (ex.tap)
    ex.tap->on_upstream_attempt({c.cfg().name, e.label, error, to_string(ex.decision.reason),
                                 ex.decision.matched_messages});
  if (code != 0 && metrics_ != nullptr)
    metrics_->count_endpoint_response(c.cfg().name, e.label, code);
  if (!failed) {
    c.record_success(e);
    // It now holds the conversation's prefix in its cache.
    if (code >= 200 && code < 300) c.served(e, ex.conversation);
  } else if (c.record_failure(e)) {
    TT_LOG(warn) << "upstream " << c.cfg().name << ": endpoint " << e.label << " ejected after "
                 << c.cfg().outlier.consecutive_failures << " failures in a row (ejection "
                 << c.ejections(e) << ")";
  }
}

bool attempts::fail_over(exchange& ex, retry_reason why, bool client_there) {
  if (!client_there || ex.response_started || tried_count_ == 0 ||
      tried_count_ > primary_->cfg().retries || tried_count_ >= tried_.size())
    return false;
  auto& failed = *ex.upstream_cluster;
  tried_[tried_count_ - 1] = ex.upstream_endpoint;
  const pick_context ctx{.route_key = ex.route_key,
                         .conversation = ex.conversation,
                         .tried = {tried_.data(), tried_count_}};
  cluster* c = &failed;
  auto choice = c->choose(ctx);
  if (choice.chosen == nullptr && c == primary_ && c->fallback() != nullptr) {
    c = c->fallback();
    choice = c->choose(ctx);
    choice.reason = routing_reason::fallback;
    if (choice.chosen != nullptr) failed.count_decision(routing_reason::fallback);
  }
  endpoint* next = choice.chosen;
  if (next == nullptr || !c->begin_retry()) return false;
  held_[tried_count_ - 1] = c;
  failed.count_retry(why);
  TT_LOG(info) << "upstream " << failed.cfg().name << ": " << ex.upstream_endpoint->label << " "
               << to_string(why) << "; trying " << c->cfg().name << " " << next->label;
  ++tried_count_;
  ex.upstream_cluster = c;
  ex.upstream_endpoint = next;
  ex.decision = choice;
  ex.in_flight.reset(next);
  write_head(ex);
  return true;
}

}  // namespace tokentap::proxy
