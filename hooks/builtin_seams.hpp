#pragma once
// Where the built-in hooks meet the chain below the public hook interface: two performance
// seams (docs/perf-decisions.md), private to hooks/.  A hook written elsewhere implements
// neither and needs nothing of them; only the chain and the built-in hooks include this header
// (checked in test/layout/layering_test.cpp).
#include <string_view>

#include "hooks/tap.hpp"
#include "parsers/hot_lines.hpp"
#include "parsers/stream_decoder.hpp"

namespace tokentap::hooks {

/// Where a hook's next per-event call touches its state first, so that the relay can fetch it
/// while the next read's system calls run (stream_tap::add_hot_lines).  For a hook that does
/// not implement it the chain lists the hook object's first line.
class hot_state {
 public:
  virtual void add_hot_lines(parsers::hot_lines& l) const noexcept = 0;

 protected:
  ~hot_state() = default;
};

/// A hook that keeps reads (the trace hook's event log) and would compare each with the last
/// one: for a read the decoder found to be one chat chunk shaped like the last one
/// (parsers::read_shape), the chain calls on_shaped_body instead of on_body, and the read is
/// kept as its bytes outside the shape without comparing it.
class shaped_reads {
 public:
  virtual void on_shaped_body(std::string_view bytes, const body_times& t,
                              const parsers::read_shape& shape) = 0;

 protected:
  ~shaped_reads() = default;
};

}  // namespace tokentap::hooks
