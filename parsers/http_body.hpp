#pragma once
// Incremental decoder of an HTTP/1.1 message body's framing (RFC 9112 §6.3, §7.1): chunked,
// Content-Length, or until the connection closes.  The proxy reads the upstream's body straight
// into its relay buffer and this decoder turns the bytes into payload in place — no second
// buffer, no copy per read.  Pure: no I/O; fed any split of the input, it gives the same payload.
//
// Chunked framing is parsed strictly (as Beast's parser, which reads the head, does): hex size
// (at most 16 digits), optional extensions (BWS ';' …) up to CRLF, CRLF after the data, trailer
// lines after the last chunk; bare LF or any other byte where CRLF belongs is an error.  The
// contents of extensions and trailers are skipped, not judged (RFC 9112 §7.1.1: unrecognised
// extensions are ignored); a unit test checks agreement with Beast everywhere else.  The size line
// and the trailer section are bounded (max_line, max_trailers).
#include <cstddef>
#include <cstdint>

namespace tokentap::parsers {

class http_body_decoder {
 public:
  enum class framing : std::uint8_t { chunked, length, until_close };
  enum class error : std::uint8_t { none, bad_chunk, line_too_long, trailers_too_long };

  static constexpr std::size_t max_line = 4096;  ///< a chunk-size line with its extensions
  static constexpr std::size_t max_trailers = 16 * 1024;

  static http_body_decoder chunked() noexcept { return http_body_decoder(framing::chunked, 0); }
  static http_body_decoder length(std::uint64_t n) noexcept {
    return http_body_decoder(framing::length, n);
  }
  static http_body_decoder until_close() noexcept {
    return http_body_decoder(framing::until_close, 0);
  }

  /// Where a read's payload is after decode(): data[offset, offset + size).
  struct payload {
    std::size_t offset = 0, size = 0;
  };
  /// Decodes data[0, n): the payload bytes among them are made contiguous, starting where the
  /// first of them is (a read that holds one chunk's data, as a streamed event's read does,
  /// moves nothing), and returned.  Bytes after the end of the body are not payload (extra()
  /// tells).  After an error the payload decoded before it is still returned; the rest is
  /// ignored.
  payload decode(char* data, std::size_t n) noexcept;

  /// The connection closed.  Returns false when that cuts the body short (chunked or
  /// Content-Length not complete), true when the body is complete or ends at the close.
  bool close() noexcept;

  bool done() const noexcept { return state_ == state::done; }
  error failed() const noexcept { return error_; }
  /// Bytes arrived after the end of the body: the connection cannot carry another message.
  bool extra() const noexcept { return extra_; }
  framing kind() const noexcept { return kind_; }

 private:
  enum class state : std::uint8_t {
    size,     // chunk-size hex digits
    size_ws,  // whitespace after the size, before ';'
    ext,      // extensions, up to CR
    size_lf,  // LF after the size line's CR
    data,     // chunk data (or the whole Content-Length body)
    data_cr,  // CR after chunk data
    data_lf,  // LF after chunk data
    trailer,  // start of a trailer line (or of the final CRLF)
    trailer_line,
    trailer_lf,  // LF ending a trailer line
    end_lf,      // LF of the final CRLF
    done,
    failed,
  };

  http_body_decoder(framing k, std::uint64_t n) noexcept
      : kind_(k),
        state_(k == framing::chunked  ? state::size
               : k == framing::length ? (n == 0 ? state::done : state::data)
                                      : state::data),
        left_(k == framing::until_close ? UINT64_MAX : n) {}

  void fail(error e) noexcept {
    error_ = e;
    state_ = state::failed;
  }
  payload stop(error e, payload decoded) noexcept {
    fail(e);
    return decoded;
  }

  framing kind_;
  state state_;
  error error_ = error::none;
  bool extra_ = false;
  std::uint8_t digits_ = 0;
  std::uint64_t left_;    // data bytes left in this chunk / the body (until close: 2^64 - 1)
  std::size_t line_ = 0;  // bytes of the current size line or of the trailer section
};

}  // namespace tokentap::parsers
