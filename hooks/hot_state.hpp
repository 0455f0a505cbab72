#pragma once
// The built-in hooks' part in the hot-line prefetch (docs/perf-decisions.md): where the state
// lies that a hook's next per-event call touches first, so that the relay can fetch it while the
// next read's system calls run (stream_tap::add_hot_lines).  Private to hooks/: the public hook
// interface does not know it, and for a hook that does not implement it the chain lists the hook
// object's first line.  Only the chain and the built-in hooks include this header (checked in
// test/layout/layering_test.cpp).
#include "parsers/hot_lines.hpp"

namespace tokentap::hooks {

class hot_state {
 public:
  virtual void add_hot_lines(parsers::hot_lines& l) const noexcept = 0;

 protected:
  ~hot_state() = default;
};

}  // namespace tokentap::hooks
