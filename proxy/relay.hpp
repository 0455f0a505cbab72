#pragma once
// The relay of one response body: read from the upstream, write to the client, tap, again —
// never reading ahead of the client (a slow client pauses the upstream: backpressure for free),
// and the tap sees bytes only after they were written.
//
// A template on both streams: the proxy runs it on a client socket and a plain socket or TLS
// stream upstream (proxy_session.cpp); its unit tests run it on Beast's test streams, whose
// read and write sizes and fail counts reach every partial-read, partial-write and failure path
// (test/proxy/relay_test.cpp).  Private to the proxy.
#include <sys/uio.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string_view>
#include <type_traits>
#include <utility>

#include <boost/asio/async_result.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/error.hpp>

#include "base/clock.hpp"
#include "base/log.hpp"
#include "config/config.hpp"
#include "net/net.hpp"
#include "net/rx_stamp.hpp"
#include "parsers/hot_lines.hpp"
#include "parsers/http_body.hpp"
#include "proxy/deferred_taps.hpp"
#include "proxy/exchange.hpp"

namespace tokentap::proxy {

/// A session's relay buffer starts small (an SSE event is a few hundred bytes) and doubles when a
/// read fills it (bulk bodies), up to the maximum.  It exists only while it holds bytes or a read
/// waits to fill it: a stamped read waits for the socket to be readable without one, so an
/// open stream between its events holds no buffer (relay_host::relay_buffer).
inline constexpr std::size_t relay_buffer_min = 512;
inline constexpr std::size_t relay_buffer_max = 64 * 1024;

inline constexpr clock::time_point no_deadline = clock::time_point::max();

template <class Client, class Upstream, class Handler>
class relay_op;

/// `<size in hex>\r\n`, the start of one chunk of a chunked body.
class chunk_header {
 public:
  void set(std::size_t n) noexcept {
    std::size_t i = sizeof buf_;
    buf_[--i] = '\n';
    buf_[--i] = '\r';
    do {
      buf_[--i] = "0123456789abcdef"[n & 0xf];
      n >>= 4;
    } while (n != 0);
    begin_ = i;
  }
  asio::const_buffer buffer() const noexcept {
    return asio::buffer(buf_ + begin_, sizeof buf_ - begin_);
  }

 private:
  char buf_[2 * sizeof(std::size_t) + 2];
  std::size_t begin_ = sizeof buf_;  // an offset, not a pointer: copies stay valid
};

/// Whether the client's `write_some` returns at once with what the kernel took: a socket put in
/// non-blocking mode here (once per connection), a stream that never blocks (Beast's test
/// stream).  The relay then tries each write at once and waits only for what is left.
inline bool writes_never_block(tcp_socket& s) noexcept {
  error_code ec;
  s.non_blocking(true, ec);
  return !ec;
}
template <class Stream>
bool writes_never_block(Stream&) noexcept {
  return true;
}

/// Where a body's first bytes may already be: read with the response head (`early`), and whether
/// the upstream socket stamps what it receives (plain TCP with SO_TIMESTAMPNS).
struct relay_source {
  beast::flat_buffer& early;
  bool stamped = false;
};

/// What a relay needs of the connection it runs in (the proxy's session, or a test's): the relay
/// buffer, the relay's deadlines and their one timer, and what to do when a side is lost.
///
/// Deadlines only move later from one event to the next, so the timer is re-armed only when a
/// deadline is earlier than what it waits for (no_deadline when it waits for nothing); when it
/// fires it checks the deadlines as they are now and waits again for the earliest.  A stream that
/// keeps its deadlines costs one timer wake-up per timeout period, not two timer operations per
/// event.  Owned by a shared_ptr (the timer's handler keeps the host alive).
class relay_host : public std::enable_shared_from_this<relay_host> {
 public:
  /// `t` must outlive the host, or the next set_timeouts().
  relay_host(io_executor ex, const config::timeouts_config& t) : timeouts_(&t), relay_timer_(ex) {}
  relay_host(const relay_host&) = delete;
  relay_host& operator=(const relay_host&) = delete;
  virtual ~relay_host() = default;

  const config::timeouts_config& timeouts() const noexcept { return *timeouts_; }
  /// The timeouts of the configuration the next exchange runs on (a reload); not while a
  /// relay runs.  Same lifetime rule.
  void set_timeouts(const config::timeouts_config& t) noexcept { timeouts_ = &t; }

  /// Expiry for the next upstream operation: `t` from now, but never past the total deadline.
  static clock::time_point bounded(const exchange& ex, config::ms t,
                                   clock::time_point now = clock::now()) noexcept {
    const auto at = now + t;
    return ex.deadline ? std::min(at, *ex.deadline) : at;
  }

  /// The client is gone (a write failed or timed out): the exchange ends, both sides close.
  virtual void client_lost(exchange& ex) = 0;
  /// Closes the client's connection: a response cut short must not look complete.
  virtual void close_client() noexcept = 0;
  /// The client's address, for the log.
  virtual std::string_view peer() const noexcept = 0;

 protected:
  /// A relay deadline passed: end the client write (`client_timed_out_` is set) or the upstream
  /// read (`upstream_timed_out_`) that waits.
  virtual void cancel_client_io() noexcept = 0;
  virtual void cancel_upstream_io() noexcept = 0;

  // What every relayed read touches, together: with hundreds of open streams each further line
  // of a connection's state is a cache miss per event.
  std::unique_ptr<char[]> relay_buf_;               // relay_buffer(); none while nothing is in it
  std::size_t relay_size_ = relay_buffer_min;       // its size, kept from one exchange to the next
  clock::time_point relay_timer_at_ = no_deadline;  // what the timer waits for
  clock::time_point upstream_deadline_ = no_deadline, write_deadline_ = no_deadline;
  std::uint64_t relay_gen_ = 0;
  bool upstream_timed_out_ = false, client_timed_out_ = false;
  bool client_gone_ = false;
  bool forced_ = false;              // the shutdown grace period is over
  bool client_nonblocking_ = false;  // the client's writes never block (writes_never_block)

  /// The relay buffer, made when a read is about to fill it.  Given back whenever it holds
  /// nothing the relay still needs (release_relay_buffer): before a stamped read waits, and at
  /// the body's end.  The allocator's per-thread cache hands the block just given back by one
  /// stream to the next stream's read, so the streams of a thread share a few hot blocks
  /// instead of each pinning its own.
  char* relay_buffer() {
    if (!relay_buf_) relay_buf_ = std::make_unique_for_overwrite<char[]>(relay_size_);
    return relay_buf_.get();
  }
  void release_relay_buffer() noexcept { relay_buf_.reset(); }

 private:
  template <class, class, class>
  friend class relay_op;

  void add_relay_hot_lines(parsers::hot_lines& l) const noexcept {
    l.add_range(&relay_buf_, &client_nonblocking_ + 1);
  }

  void set_relay_deadline(clock::time_point& slot, clock::time_point at) {
    slot = at;
    if (at < relay_timer_at_) arm_relay_timer(at);
  }

  void arm_relay_timer(clock::time_point at) {
    relay_timer_at_ = at;
    relay_timer_.expires_at(at);  // a wait in progress ends with operation_aborted
    relay_timer_.async_wait([self = shared_from_this(), gen = ++relay_gen_](error_code ec) {
      if (ec != asio::error::operation_aborted && gen == self->relay_gen_) self->on_relay_timer();
    });
  }

  void on_relay_timer() {
    relay_timer_at_ = no_deadline;
    const auto now = clock::now();
    if (write_deadline_ <= now) {
      // The client stopped reading: end its write (and the exchange).
      client_timed_out_ = true;
      write_deadline_ = no_deadline;
      cancel_client_io();
    }
    if (upstream_deadline_ <= now) {
      upstream_timed_out_ = true;
      upstream_deadline_ = no_deadline;
      cancel_upstream_io();
    }
    const auto next = std::min(write_deadline_, upstream_deadline_);
    if (next != no_deadline) arm_relay_timer(next);
  }

  // On every way out of a relay: no deadline left, the timer stopped.
  void stop_relay_timer() {
    upstream_deadline_ = write_deadline_ = no_deadline;
    if (relay_timer_at_ != no_deadline) {
      relay_timer_at_ = no_deadline;
      ++relay_gen_;
      relay_timer_.cancel();
    }
  }

  const config::timeouts_config* timeouts_;
  steady_timer relay_timer_;
};

inline constexpr char crlf[] = "\r\n";

// The response body as one asynchronous operation driven by plain completion handlers: read
// from the upstream, write to the client, tap, again.  As coroutine steps, every read and write
// cost an awaitable frame, executor copies and a pump of the awaitable thread (~1 k
// instructions per event in the profile, a sixth of the proxy's own work with the tap off).
// Beast reads the head; the body is read straight from the socket into the relay buffer and
// its framing (chunked, Content-Length, until close) is decoded there in place
// (parsers::http_body_decoder) — Beast's body parser read into the connection's buffer and
// copied every read into ours, and its composed read cost ~1.5 k instructions per event.
// The body is written straight to the socket, with our own chunk framing when chunked
// (`size CRLF data CRLF`, the bytes Beast's serializer would produce: its buffers_cat
// iterators cost ~6 % per event).  Completes with true when the body ended, false when the
// exchange ended here: client lost, upstream broke or timed out, forced close — the outcome
// is in `ex` and the sockets are closed as needed.
template <class Client, class Upstream, class Handler>
class relay_op final : deferred_step {
 public:
  relay_op(relay_host& s, Client& client, Upstream& up, relay_source src, exchange& ex,
           parsers::http_body_decoder& body, bool chunked, Handler&& h)
      : s_(s),
        client_(client),
        up_(up),
        early_buf_(src.early),
        stamped_(src.stamped),
        ex_(ex),
        body_(body),
        chunked_(chunked),
        handler_(std::move(h)) {}

  void start(clock::time_point now) {
    s_.upstream_timed_out_ = s_.client_timed_out_ = false;
    // Once per session: writes below try at once, never wait.
    if (!s_.client_nonblocking_) s_.client_nonblocking_ = writes_never_block(client_);
    early_ = early_buf_.size() > 0;
    release_head_buffer();
    if (body_.done()) {  // Content-Length: 0.  Completed through the executor, never inline.
      asio::post(up_.get_executor(), step<&relay_op::body_done>(this));
      return;
    }
    note_hot_lines();
    read(now);
  }

  // `now`: the time of the step before (read or sent), so that an event costs the clock reads
  // of its timestamps (read, sent; with a tap one more, for the backlog check), not one more
  // per deadline.
  void read(clock::time_point now) {
    if (early_) {
      // Body bytes that came with the head (in the buffer Beast read it into): relayed as
      // the first reads.  Completed through the executor, never inline.
      auto& early = early_buf_;
      const auto n =
          asio::buffer_copy(asio::buffer(s_.relay_buffer(), s_.relay_size_), early.data());
      early.consume(n);
      early_ = early.size() > 0;
      release_head_buffer();
      asio::post(up_.get_executor(), step<&relay_op::on_read>(this, n));
      return;
    }
    s_.set_relay_deadline(s_.upstream_deadline_, s_.bounded(ex_, s_.timeouts().idle, now));
    if constexpr (std::is_same_v<Upstream, tcp_socket>) {
      if (stamped_) return stamped_read();
    }
    up_.async_read_some(asio::buffer(s_.relay_buffer(), s_.relay_size_),
                        step<&relay_op::on_read>(this));
  }

 private:
  // Intermediate handler: calls back into the op, which has one operation (or posted call)
  // pending at a time and owns itself.  Move-only: the one copy that Asio holds releases the
  // op if it is destroyed without being called — an io_context going away with the op's read
  // or write pending (a hard stop) — instead of leaking it and the coroutine frames it resumes.
  template <void (relay_op::*F)(error_code, std::size_t)>
  class step {
   public:
    explicit step(relay_op* op, std::size_t n = 0) noexcept : op_(op), n_(n) {}
    step(step&& o) noexcept : op_(std::exchange(o.op_, nullptr)), n_(o.n_) {}
    step& operator=(step&&) = delete;
    ~step() {
      if (op_ != nullptr) op_->abandon();
    }
    void operator()(error_code ec, std::size_t n = 0) { (std::exchange(op_, nullptr)->*F)(ec, n); }
    void operator()() { (std::exchange(op_, nullptr)->*F)({}, n_); }  // posted

   private:
    relay_op* op_;
    std::size_t n_;  // a posted call's byte count
  };

  // Reads that carry the kernel's receive time of their bytes (a plain-TCP upstream whose
  // socket stamps them, SO_TIMESTAMPNS): Asio's reads call `recv`, which drops the stamp, so the
  // relay waits for the socket to be readable (`async_wait`) and reads with `recvmsg`, which
  // returns it with the bytes.  A wait re-arms the descriptor in the reactor, so data or a
  // hangup that arrived before it is reported at once.  After a read that filled the buffer
  // more is likely waiting, and the next read tries at once (through the executor: a fast
  // upstream must not grow the stack).  What this costs against a plain read:
  // docs/perf-decisions.md, "Kernel receive stamps".
  void stamped_read() {
    if (stamped_full_) {
      asio::post(up_.get_executor(), step<&relay_op::on_readable>(this));
      return;
    }
    wait_readable();
  }

  void wait_readable() {
    s_.release_relay_buffer();  // (nothing in it is needed again)
    up_.async_wait(tcp_socket::wait_read, step<&relay_op::on_readable>(this));
  }

  void on_readable(error_code ec, std::size_t) {
    if constexpr (std::is_same_v<Upstream, tcp_socket>) {
      std::size_t got = 0;
      if (!ec) {
        // What the handling of these bytes touches first, fetched while the kernel copies them.
        hot_.prefetch();
        iovec iov{s_.relay_buffer(), s_.relay_size_};
        if (!net::recv_stamped(up_.native_handle(), &iov, 1, 0, got, ec, rx_real_ns_)) {
          stamped_full_ = false;  // nothing there (yet): wait for it
          // Unless the deadline fired while this try was posted: its cancel found no wait to
          // end, and a wait now would have no deadline.
          if (!s_.upstream_timed_out_) return wait_readable();
          ec = asio::error::operation_aborted;  // (on_read reports it as the timeout)
        }
      }
      stamped_full_ = !ec && got == s_.relay_size_;
      on_read(ec, got);
    }
  }

  // The buffer Beast read the response head into is not read again while the body streams
  // (the relay reads into its own): once it holds no body bytes, its block (512 bytes or
  // more) goes back to the allocator instead of staying with every open stream — a kept-alive
  // connection's next head read allocates one again.
  void release_head_buffer() {
    if (!early_) early_buf_.shrink_to_fit();
  }

  void body_done(error_code, std::size_t) { finish(true); }
  void abandon() noexcept { delete this; }

  void on_read(error_code ec, std::size_t got) {
    // Reads that did not prefetch the next event's state themselves (stamped reads do): now,
    // so that it arrives during the write.
    if (!prefetching_reads()) hot_.prefetch();
    s_.upstream_deadline_ = no_deadline;  // idle counts only while a read waits
    if (ec && s_.upstream_timed_out_) ec = beast::error::timeout;
    read_ns_ = base::mono_now_ns();
    const auto now = from_mono(read_ns_);
    const auto previous = arrived_ns_;  // the read before's
    arrived_ns_ = read_ns_;
    if (rx_real_ns_ >= 0 && ex_.tap != nullptr) arrival(previous);
    got_ = got;
    const auto payload = body_.decode(s_.relay_buf_.get(), got);
    at_ = payload.offset;
    n_ = payload.size;
    using bad = parsers::http_body_decoder::error;
    if (body_.failed() != bad::none) {
      ec = body_.failed() == bad::trailers_too_long ? beast::http::error::header_limit
                                                    : beast::http::error::bad_chunk;
    } else if (ec == asio::error::eof) {
      ec = body_.close() ? error_code{} : error_code(beast::http::error::partial_message);
    }
    read_ec_ = ec;
    if (n_ == 0) return next(now);
    if (!ex_.first_byte) ex_.first_byte = now;
    if (ex_.pacer != nullptr) {
      pending_at_ = at_;
      pending_n_ = n_;
      return pace(now);
    }
    write_out(now);
  }

  // Writes the payload bytes at at_ (n_ of them) to the client, framed as a chunk when chunked.
  void write_out(clock::time_point now) {
    const char* data = s_.relay_buf_.get() + at_;
    if (chunked_) {
      hdr_.set(n_);
      bufs_ = {hdr_.buffer(), asio::buffer(data, n_), asio::buffer(crlf, 2)};
    } else {
      bufs_ = {asio::buffer(data, n_), asio::const_buffer(), asio::const_buffer()};
    }
    // The write is tried here, on the non-blocking socket (what Asio's write would do first
    // too), so that `sent_ns_` is when the kernel took the bytes: the tap's `written` time and
    // the proxy-overhead histogram then measure the proxy's own work, not also the wait of the
    // write's completion behind other ready handlers (2.5–5 ms at the P99 with 1,000 streams).
    // What the kernel does not take now (a slow client) is written asynchronously, under the
    // client-write deadline, and stamped when done.
    sent_ns_ = 0;
    if (s_.client_nonblocking_) {
      error_code ec;
      const auto total = asio::buffer_size(bufs_);
      const auto sent = client_.write_some(bufs_, ec);
      if (!ec && sent == total) {
        sent_ns_ = base::mono_now_ns();
        // Written.  Without a tap the next read starts now.  With one, the completion goes
        // through the executor, behind what is queued, where on_write sees from its lateness
        // whether the thread is behind and then defers the tap work.
        if (ex_.tap == nullptr) {
          ex_.body_bytes += n_;
          return tap_then_next();
        }
        taps_service().count_behind();
        asio::post(up_.get_executor(), step<&relay_op::on_write>(this, sent));
        return;
      }
      if (!ec) consume(sent);  // (an error is reported again by the write below)
    }
    s_.set_relay_deadline(s_.write_deadline_, now + s_.timeouts().client_write);
    asio::async_write(client_, bufs_, step<&relay_op::on_write>(this));
  }

  // A fault per event (faults.hpp): what was read is written an event at a time, each held
  // back by the delay first, or the stream is cut once N events went out.  The fault acts as if
  // it sat between the upstream and the proxy: a held event is timed when it is let go, so the
  // tap's token times include the delay, as they would a slow network's.
  void pace(clock::time_point now) {
    auto& p = *ex_.pacer;
    const bool cut = p.fault.kind == fault_kind::cut;
    if (cut && p.bounds.events() >= p.fault.value) return cut_stream();
    const std::string_view pending(s_.relay_buf_.get() + pending_at_, pending_n_);
    if (!cut && !held_ && p.bounds.starts_event(pending.front())) {
      held_ = true;
      p.timer.expires_after(config::ms(p.fault.value));
      p.timer.async_wait(step<&relay_op::on_held>(this));
      return;
    }
    held_ = false;
    const auto end = p.bounds.next_end(pending);
    const auto take = end == parsers::event_bounds::npos ? pending_n_ : end;
    at_ = pending_at_;
    n_ = take;
    pending_at_ += take;
    pending_n_ -= take;
    write_out(now);
  }

  void on_held(error_code, std::size_t) {
    ex_.pacer->applied = true;
    read_ns_ = arrived_ns_ = base::mono_now_ns();
    pace(from_mono(read_ns_));
  }

  // The cut: the client sees the response end without its proper end (no terminating chunk,
  // or fewer bytes than its length), as when an upstream breaks mid-stream.
  void cut_stream() {
    ex_.pacer->applied = true;
    ex_.outcome = hooks::stream_outcome::upstream_reset;
    TT_LOG(info) << "fault '" << ex_.pacer->fault.rule->name << "': cut a response after "
                 << ex_.pacer->bounds.events() << " events (" << ex_.body_bytes << " bytes)";
    s_.close_client();
    finish(false);
  }

  // Whether a paced relay still has bytes of its last read to write, or its cut is due before
  // the next read.
  bool pacing_due() const noexcept {
    if (pending_n_ != 0) return true;
    const auto& p = *ex_.pacer;
    return p.fault.kind == fault_kind::cut && p.bounds.events() >= p.fault.value &&
           !(body_.done() && !read_ec_);
  }

  // When the bytes just read reached the socket, from the kernel's receive stamp (wall
  // clock): how long they waited there before the read completed, taken off the read's
  // monotonic time.  Within the stream arrivals never go back (an earlier read without a
  // stamp — body bytes that came with the head — is timed by its read; the two clocks are
  // read a few ns apart); a wait the wall clock cannot vouch for — it stepped between the
  // stamp and now — leaves the read time.
  void arrival(std::int64_t previous) {
    const auto waited = net::realtime_ns() - rx_real_ns_;
    if (waited < 0 || waited > max_rx_wait_ns) return;
    arrived_ns_ = std::max(read_ns_ - waited, previous);
  }

  void consume(std::size_t n) noexcept {
    for (auto& b : bufs_) {
      const auto k = std::min(n, b.size());
      b += k;
      n -= k;
    }
  }

  void on_write(error_code ec, std::size_t) {
    s_.write_deadline_ = no_deadline;
    if (ec) {
      if (s_.client_timed_out_)
        TT_LOG(info) << "client " << s_.peer() << " read nothing for "
                     << s_.timeouts().client_write.count() << " ms; closed it";
      s_.client_lost(ex_);
      return finish(false);
    }
    ex_.body_bytes += n_;
    const bool stamped = sent_ns_ != 0;  // the kernel took it all when it was tried
    if (!stamped) sent_ns_ = base::mono_now_ns();
    // The completion ran late, other handlers ran since the read: a backlog.  The tap's work
    // waits for the reads already queued (deferred_taps); with none, it runs at once.
    if (ex_.tap && (stamped ? base::mono_now_ns() : sent_ns_) - read_ns_ > backlog_ns) {
      taps_service().push(this, up_.get_executor());
      return;
    }
    tap_then_next();
  }

  static constexpr std::int64_t backlog_ns = 50'000;              // read → write completion
  static constexpr std::int64_t max_rx_wait_ns = 60'000'000'000;  // beyond: a clock step

  deferred_taps& taps_service() {
    if (deferred_ == nullptr)
      deferred_ = &asio::use_service<deferred_taps>(up_.get_executor().context());
    return *deferred_;
  }

  void run_deferred() override { tap_then_next(); }
  void discard() noexcept override { abandon(); }

  void tap_then_next() {
    if (ex_.tap) {
      ex_.tap->on_body({s_.relay_buf_.get() + at_, n_}, {arrived_ns_, read_ns_, sent_ns_});
      note_hot_lines();
    }
    if (got_ == s_.relay_size_ && s_.relay_size_ < relay_buffer_max && pending_n_ == 0) {
      s_.relay_size_ *= 2;        // the upstream outpaces us: read more per syscall
      s_.release_relay_buffer();  // (the next read makes one of the new size)
    }
    next(from_mono(sent_ns_));
  }

  // Whether reads are stamped reads, which prefetch hot_ when the socket is ready.
  bool prefetching_reads() const noexcept {
    if constexpr (std::is_same_v<Upstream, tcp_socket>) return stamped_;
    return false;
  }

  // What the next read's handling touches first, listed while it is in the cache: this op,
  // the exchange, the body decoder, the host's relay fields, the client, then the tap's state
  // (stream_tap::add_hot_lines).  Prefetched when the next read is ready (stamped reads; for
  // other reads at the start of on_read).
  void note_hot_lines() noexcept {
    hot_.clear();
    hot_.add_range(this, &hot_);
    hot_.add_range(&ex_, &ex_.request_head);
    hot_.add(&body_, sizeof body_);
    s_.add_relay_hot_lines(hot_);
    hot_.add(&client_, sizeof client_);
    if (ex_.tap) ex_.tap->add_hot_lines(hot_);
  }

  static clock::time_point from_mono(std::int64_t ns) noexcept {
    return clock::time_point(
        std::chrono::duration_cast<clock::duration>(std::chrono::nanoseconds(ns)));
  }

  void next(clock::time_point now) {
    if (ex_.pacer != nullptr && pacing_due()) return pace(now);
    if (read_ec_) {
      if (s_.client_gone_) {
        s_.client_lost(ex_);
      } else if (s_.forced_) {
        // Our own shutdown grace period ended: not the upstream's fault.
        ex_.outcome = hooks::stream_outcome::timeout;
        TT_LOG(info) << "shutdown grace period ended " << ex_.body_bytes
                     << " bytes into a response; closed it";
      } else {
        // The upstream broke mid-response: the client must see a truncated response, never
        // a clean end, so the connection is closed without the terminating chunk.
        ex_.outcome = read_ec_ == beast::error::timeout ? hooks::stream_outcome::timeout
                                                        : hooks::stream_outcome::upstream_reset;
        TT_LOG(warn) << "upstream broke mid-response after " << ex_.body_bytes
                     << " bytes: " << read_ec_.message() << "; aborting the client response";
        s_.close_client();
      }
      return finish(false);
    }
    if (body_.done()) return finish(true);
    read(now);
  }

  // The op is gone before the handler runs (it resumes the coroutine that owns what the op
  // refers to).
  void finish(bool body_done) {
    s_.stop_relay_timer();
    s_.release_relay_buffer();
    auto h = std::move(handler_);
    delete this;
    std::move(h)(body_done);
  }

  relay_host& s_;
  Client& client_;
  Upstream& up_;
  beast::flat_buffer& early_buf_;
  const bool stamped_;
  exchange& ex_;
  parsers::http_body_decoder& body_;
  const bool chunked_;
  bool early_ = false;  // body bytes that came with the head are still in early_buf_
  Handler handler_;
  error_code read_ec_;
  std::int64_t read_ns_ = 0;
  std::int64_t sent_ns_ = 0;  // the kernel took the bytes (the tap's `written`)
  // The kernel received them (wall clock): written by every stamped read that returns bytes
  // (-1: no stamp); stays -1 for the others (TLS, early body bytes).
  std::int64_t rx_real_ns_ = -1;
  bool stamped_full_ = false;    // the last stamped read filled the buffer: try the next at once
  std::int64_t arrived_ns_ = 0;  // the tap's `arrived` (read_ns_ when unknown)
  deferred_taps* deferred_ = nullptr;  // looked up at first use (taps_service)
  std::size_t got_ = 0;                // bytes read (framing included)
  std::size_t n_ = 0;                  // payload bytes among them
  std::size_t at_ = 0;                 // where in the relay buffer they start
  // A paced relay (ex_.pacer): the bytes of the last read not written yet, and whether the
  // event they begin with has been held back already.
  std::size_t pending_at_ = 0, pending_n_ = 0;
  bool held_ = false;
  chunk_header hdr_;
  std::array<asio::const_buffer, 3> bufs_{};
  parsers::hot_lines hot_;  // for the next read (note_hot_lines)
};

/// The relay's I/O object for an upstream stream: the socket itself when plain (no Beast layer
/// between), the TLS stream when not.
inline tcp_socket& relay_io(tcp_stream& s) noexcept {
  return s.socket();
}
template <class Tls>
Tls& relay_io(Tls& s) noexcept {
  return s;
}

/// Relays the response body from `up` to `client` and completes with true when the body ended,
/// false when the exchange ended in the relay (the outcome is in `ex`, the streams are closed as
/// needed).  `body` decodes the upstream's framing; `chunked`: frame the client's body as chunks
/// (the terminating chunk is the caller's).  `up`, `client`, `src.early`, `ex` and `body` outlive
/// the operation.
template <class Client, class Upstream, class Token>
auto async_relay(relay_host& host, Client& client, Upstream& up, relay_source src, exchange& ex,
                 parsers::http_body_decoder& body, bool chunked, Token&& token) {
  return asio::async_initiate<Token, void(bool)>(
      [&host, &client, &up, src, &ex, &body, chunked](auto handler) {
        using op = relay_op<Client, Upstream, std::decay_t<decltype(handler)>>;
        (new op(host, client, up, src, ex, body, chunked, std::move(handler)))->start(clock::now());
      },
      token);
}

}  // namespace tokentap::proxy
