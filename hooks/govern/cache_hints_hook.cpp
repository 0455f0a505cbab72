#include "hooks/govern/cache_hints_hook.hpp"

#include <cstdio>

#include "hooks/registry.hpp"
#include "parsers/cache_hints.hpp"

namespace tokentap::hooks {

namespace {

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

class cache_hints_hook final : public hook {
 public:
  request_status on_request_phase(const request_view& r, request_callbacks& cb) override {
    const auto path = r.target.substr(0, r.target.find('?'));
    std::optional<std::string> body;
    if (ends_with(path, "/messages")) {
      body = parsers::with_system_cache_breakpoint(r.body);
    } else if (ends_with(path, "/chat/completions") || ends_with(path, "/completions") ||
               ends_with(path, "/responses")) {
      const auto key = prompt_cache_key_of(r.conversation);
      if (!key.empty()) body = parsers::with_prompt_cache_key(r.body, key);
    }
    if (body) cb.replace_body(std::move(*body));
    return request_status::proceed;
  }
  bool rewrites_body() const noexcept override { return true; }
  unsigned per_event() const noexcept override { return 0; }
};

}  // namespace

std::string prompt_cache_key_of(std::span<const parsers::message_digest> conversation) {
  if (conversation.empty()) return {};
  auto root = conversation.back().chain;
  for (const auto& m : conversation)
    if (m.role == "user") {
      root = m.chain;
      break;
    }
  char buf[32];
  std::snprintf(buf, sizeof buf, "tokentap-%016llx", static_cast<unsigned long long>(root));
  return buf;
}

std::unique_ptr<hook> cache_hints_hook_factory::create() {
  return std::make_unique<cache_hints_hook>();
}

void register_cache_hints(hook_registry& r) {
  r.add("cache_hints",
        [](const config::config&) -> std::shared_ptr<hook_factory> {
          return std::make_shared<cache_hints_hook_factory>();
        },
        {.provides = {}, .needs = {}, .reads = {}});
}

}  // namespace tokentap::hooks
