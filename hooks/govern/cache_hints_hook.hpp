#pragma once
// The cache hints hook ("cache_hints", opt-in): before a request is forwarded, it tells the
// provider what to cache (DESIGN.md §9, request phase).  OpenAI-compatible requests
// (`.../chat/completions`, `.../completions`, `.../responses`) without a `prompt_cache_key` get
// one: the conversation's root digest (tools, system prompt and first user message), so every
// turn of a conversation, and every conversation opening alike, share the provider's cache
// routing.  Anthropic Messages requests (`.../messages`) without any `cache_control` get a
// breakpoint on their last system block.  Everything else in the body stays byte for byte.
#include "hooks/hook.hpp"

namespace tokentap::hooks {

class cache_hints_hook_factory final : public hook_factory {
 public:
  std::unique_ptr<hook> create() override;
};

/// The `prompt_cache_key` of a conversation (`tokentap-` and its root digest in hex); empty when
/// the request has no conversation.
std::string prompt_cache_key_of(std::span<const parsers::message_digest> conversation);

class hook_registry;
/// Registers "cache_hints".
void register_cache_hints(hook_registry& r);

}  // namespace tokentap::hooks
