#pragma once
// What the hook tests share: a chain fed like the proxy feeds it (request, response head,
// upstream reads with their monotonic times, end of stream) and hooks that record what they see.
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hooks/hook_chain.hpp"
#include "hooks/observe/timing_hook.hpp"

namespace tokentap::hooks::chain_test {

inline constexpr mono_ns ms = 1000000;

inline std::string chunk(std::string_view delta_field, std::string_view text) {
  return "data: {\"choices\":[{\"index\":0,\"delta\":{\"" + std::string(delta_field) + "\":\"" +
         std::string(text) + "\"}}]}\n\n";
}

// Captures the stream_info as a hook sees it at the stream's end.
struct capture_factory : hook_factory {
  struct capture : hook {
    explicit capture(capture_factory& f) : f_(f) {}
    void on_token(const token_event& e) override {
      f_.tokens.emplace_back(std::string(e.text), e.t_ns);
    }
    void on_stream_end(const stream_info& s) override { f_.summary = s; }
    capture_factory& f_;
  };
  std::unique_ptr<hook> create() override { return std::make_unique<capture>(*this); }
  stream_info summary;
  std::vector<std::pair<std::string, mono_ns>> tokens;
};

struct throwing_factory : hook_factory {
  struct thrower : hook {
    void on_token(const token_event&) override { throw std::runtime_error("boom"); }
  };
  std::unique_ptr<hook> create() override { return std::make_unique<thrower>(); }
};

// Makes hooks of type H (constructed from the per-event calls they declare) and keeps the last.
template <class H>
struct keeping_factory : hook_factory {
  explicit keeping_factory(unsigned calls) : calls(calls) {}
  std::unique_ptr<hook> create() override {
    auto h = std::make_unique<H>(calls);
    made = h.get();
    return h;
  }
  unsigned calls;
  H* made = nullptr;
};

// Makes default-constructed hooks of type H and keeps the last one made.
template <class H>
struct plain_factory : hook_factory {
  std::unique_ptr<hook> create() override {
    auto h = std::make_unique<H>();
    made = h.get();
    return h;
  }
  H* made = nullptr;
};

inline request_view request(mono_ns start) {
  request_view r;
  r.method = "POST";
  r.target = "/v1/chat/completions";
  r.start_ns = start;
  return r;
}

// One whole stream through a chain of `f`: request, head, one read holding two content tokens
// ("a", "b"), end.
inline void stream_two_tokens(hook_chain_factory& f) {
  auto tap = f.create();
  tap->on_request(request(0));
  tap->on_response_head({200, "text/event-stream", "", 1, {}});
  const std::string b = chunk("content", "a") + chunk("content", "b");
  tap->on_body({b.data(), b.size()}, {2, 2, 3});
  tap->on_stream_end(stream_outcome::ok, 4);
}

// A chain of the timing hook and a capture, its stream started at t0 (the head 5 ms later).
struct timed_stream {
  explicit timed_stream(const timing_settings& timing = {})
      : f(cfg, {std::make_shared<timing_hook_factory>(timing), cap}), tap(f.create()) {
    tap->on_request(request(t0));
    tap->on_response_head({200, "text/event-stream", "", t0 + 5 * ms, {}});
  }
  static constexpr mono_ns t0 = 1000 * ms;
  config::config cfg;
  std::shared_ptr<capture_factory> cap = std::make_shared<capture_factory>();
  hook_chain_factory f;
  std::unique_ptr<stream_tap> tap;
};

}  // namespace tokentap::hooks::chain_test
