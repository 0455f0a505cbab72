#include "hooks/export/event_log.hpp"

#include <algorithm>
#include <bit>
#include <new>
#include <utility>

namespace tokentap::hooks {

namespace {

// How many bytes a and b share at their start / at their end (n: the shorter one's size), a word
// at a time.
std::size_t common_prefix(const char* a, const char* b, std::size_t n) noexcept {
  std::size_t i = 0;
  if constexpr (std::endian::native == std::endian::little) {
    for (; i + 8 <= n; i += 8) {
      std::uint64_t x, y;
      std::memcpy(&x, a + i, 8);
      std::memcpy(&y, b + i, 8);
      if (x != y) return i + static_cast<std::size_t>(std::countr_zero(x ^ y)) / 8;
    }
  }
  while (i < n && a[i] == b[i]) ++i;
  return i;
}

std::size_t common_suffix(const char* a_end, const char* b_end, std::size_t n) noexcept {
  std::size_t i = 0;
  if constexpr (std::endian::native == std::endian::little) {
    for (; i + 8 <= n; i += 8) {
      std::uint64_t x, y;
      std::memcpy(&x, a_end - i - 8, 8);
      std::memcpy(&y, b_end - i - 8, 8);
      if (x != y) return i + static_cast<std::size_t>(std::countl_zero(x ^ y)) / 8;
    }
  }
  while (i < n &&
         a_end[-1 - static_cast<std::ptrdiff_t>(i)] == b_end[-1 - static_cast<std::ptrdiff_t>(i)])
    ++i;
  return i;
}

}  // namespace

event_log::event_log(event_log&& o) noexcept {
  take(o);
}

event_log& event_log::operator=(event_log&& o) noexcept {
  if (this != &o) {
    release();
    take(o);
  }
  return *this;
}

// Every field of o, which is left empty (this one is: new, or released).
void event_log::take(event_log& o) noexcept {
  w_ = std::exchange(o.w_, nullptr);
  end_ = std::exchange(o.end_, nullptr);
  ref_ = std::exchange(o.ref_, nullptr);
  ref_n_ = std::exchange(o.ref_n_, 0);
  ref_cap_ = std::exchange(o.ref_cap_, 0);
  first_ = std::exchange(o.first_, nullptr);
  last_ = std::exchange(o.last_, nullptr);
  held_ = std::exchange(o.held_, 0);
  shape_version_ = std::exchange(o.shape_version_, 0);
  has_shape_ = std::exchange(o.has_shape_, false);
  last_shaped_ = std::exchange(o.last_shaped_, false);
}

event_log::~event_log() {
  release();
}

void event_log::release() noexcept {
  for (chunk* c = first_; c != nullptr;)
    ::operator delete (std::exchange(c, c->next), std::align_val_t{align});
  first_ = last_ = nullptr;
  held_ = 0;
  w_ = end_ = nullptr;
  has_shape_ = last_shaped_ = false;
  seal();
}

std::size_t event_log::stored_bytes() const noexcept {
  return last_ == nullptr ? 0 : held_ + static_cast<std::size_t>(w_ - last_->entries());
}

void event_log::seal() noexcept {
  delete[] std::exchange(ref_, nullptr);  // freed by the thread that allocated it
  ref_n_ = ref_cap_ = 0;
}

void event_log::append(std::int64_t t_us, std::string_view bytes) {
  last_shaped_ = false;
  const std::size_t n = bytes.size();
  if (n > delta_max) {  // whole; the kept read stays what the next one is compared with
    put(t_us, 0, bytes);
    return;
  }
  std::size_t pre = 0, suf = 0;
  if (const std::size_t shared = std::min<std::size_t>(ref_n_, n); shared > 0) {
    pre = common_prefix(ref_, bytes.data(), shared);
    suf = common_suffix(ref_ + ref_n_, bytes.data() + n, shared - pre);
  }
  // The stream's first read (the log is empty) is not kept: a stream that stays idle after its
  // first event holds no copy, and its second read is logged whole.
  const bool first = w_ == nullptr;
  if (pre + suf == 0) {
    put(t_us, 0, bytes);
  } else {
    put(t_us, delta_bit | std::uint64_t{suf} << suf_shift | std::uint64_t{pre} << pre_shift,
        bytes.substr(pre, n - pre - suf));
  }
  if (!first) keep(bytes, pre, suf);
}

void event_log::append_shaped(std::int64_t t_us, std::string_view bytes,
                              const parsers::read_shape& s) {
  const std::size_t n = bytes.size();
  if (n > delta_max || s.shape.size() > delta_max || s.prefix > s.shape.size() || s.doc_at > n ||
      s.doc_size > n - s.doc_at || s.doc_size < s.shape.size()) {
    append(t_us, bytes);  // counts that do not fit an entry's header (or not a shaped read)
    return;
  }
  if (!has_shape_ || s.version != shape_version_) {
    put(0, shape_bit | std::uint64_t{s.prefix} << pre_shift, s.shape);
    shape_version_ = s.version;
    has_shape_ = true;
  }
  const std::size_t after = n - s.doc_at - s.doc_size;
  put(t_us, shaped_bit | std::uint64_t{after} << suf_shift | std::uint64_t{s.doc_at} << pre_shift,
      bytes.substr(0, s.doc_at), bytes.substr(s.doc_at + s.prefix, s.doc_size - s.shape.size()),
      bytes.substr(n - after));
  last_shaped_ = true;
}

// The read becomes the kept one; the bytes it shares with it at the start (and, at the same
// size, at the end) are there already.
void event_log::keep(std::string_view bytes, std::size_t pre, std::size_t suf) {
  const std::size_t n = bytes.size();
  if (n > ref_cap_) {
    // Room for the read, at least a line more than the last room (capped at delta_max): a
    // stream's reads grow a few times at most.
    const std::size_t cap =
        std::min(delta_max, std::max<std::size_t>((n + 63) / 64 * 64, 2 * ref_cap_ + 64));
    char* fresh = new char[cap];
    delete[] std::exchange(ref_, fresh);
    ref_cap_ = static_cast<std::uint32_t>(cap);
    pre = suf = 0;
  }
  if (n != ref_n_) suf = 0;
  if (n > pre + suf) std::memcpy(ref_ + pre, bytes.data() + pre, n - pre - suf);
  ref_n_ = static_cast<std::uint32_t>(n);
}

void event_log::grow(std::size_t need) {
  if (last_ != nullptr) {
    last_->used = w_;
    held_ += static_cast<std::size_t>(w_ - last_->entries());
  }
  // The first chunk with room for a few texts after the first read (an idle stream's first
  // event and its token): a second chunk costs an idle stream more.
  const std::size_t first_slack = last_ == nullptr ? 4 * align : 0;
  const std::size_t room =
      std::max(std::min<std::size_t>(held_, 64 * 1024) / align * align, need + first_slack);
  auto* c = static_cast<chunk*>(::operator new (sizeof(chunk) + room, std::align_val_t{align}));
  c->next = nullptr;
  c->used = nullptr;
  (last_ != nullptr ? last_->next : first_) = c;
  last_ = c;
  w_ = c->entries();
  end_ = w_ + room;
}

}  // namespace tokentap::hooks
