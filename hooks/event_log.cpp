#include "hooks/event_log.hpp"

#include <algorithm>
#include <new>
#include <utility>

namespace tokentap::hooks {

event_log::event_log(event_log&& o) noexcept
    : w_(std::exchange(o.w_, nullptr)),
      end_(std::exchange(o.end_, nullptr)),
      chunks_(std::move(o.chunks_)) {}

event_log& event_log::operator=(event_log&& o) noexcept {
  if (this != &o) {
    release();
    chunks_ = std::move(o.chunks_);
    o.chunks_.clear();
    w_ = std::exchange(o.w_, nullptr);
    end_ = std::exchange(o.end_, nullptr);
  }
  return *this;
}

event_log::~event_log() {
  release();
}

void event_log::release() noexcept {
  for (auto& c : chunks_) ::operator delete (c.data, std::align_val_t{align});
  chunks_.clear();
  w_ = end_ = nullptr;
}

void event_log::grow(std::size_t need) {
  std::size_t held = 0;
  if (!chunks_.empty()) {
    chunks_.back().used = w_;
    for (const auto& c : chunks_) held += static_cast<std::size_t>(c.used - c.data);
  }
  // The first chunk with room for a few texts after the first read (an idle stream's first
  // event and its token): a second chunk and the chunk list's growth cost an idle stream more.
  const std::size_t first_slack = chunks_.empty() ? 4 * align : 0;
  const std::size_t cap =
      std::max(std::min<std::size_t>(held, 64 * 1024) / align * align, need + first_slack);
  auto* data = static_cast<char*>(::operator new (cap, std::align_val_t{align}));
  chunks_.push_back({data, data, cap});
  w_ = data;
  end_ = data + cap;
}

}  // namespace tokentap::hooks
