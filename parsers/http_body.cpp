#include "parsers/http_body.hpp"

#include <algorithm>
#include <cstring>

#include "base/text_bytes.hpp"

namespace tokentap::parsers {

http_body_decoder::payload http_body_decoder::decode(char* data, std::size_t n) noexcept {
  // The payload collects at data[begin, out): from the first data byte on, later data moves
  // down to follow it (only when the read holds framing between two pieces of data).
  std::size_t in = 0, begin = 0, out = 0;
  bool any = false;
  const auto decoded = [&] { return payload{begin, out - begin}; };
  // The states that accept exactly one byte (the CRs and LFs of the framing).
  const auto expect = [&](char want, state next) {
    if (data[in++] != want) return false;
    state_ = next;
    return true;
  };
  while (in < n) {
    switch (state_) {
      case state::data: {
        const auto take = static_cast<std::size_t>(std::min<std::uint64_t>(left_, n - in));
        if (!any) {
          any = true;
          begin = out = in;
        } else if (out != in) {
          std::memmove(data + out, data + in, take);
        }
        out += take;
        in += take;
        left_ -= take;  // until close: 2^64 - 1 bytes, never reached
        if (left_ == 0) state_ = kind_ == framing::chunked ? state::data_cr : state::done;
        break;
      }
      case state::size: {
        // The digits, as many as this read has, without a trip round the state loop per byte.
        for (int v; in < n && (v = base::hex_value(data[in])) >= 0; ++in, ++line_) {
          if (++digits_ > 16) return stop(error::bad_chunk, decoded());
          left_ = left_ << 4 | static_cast<unsigned>(v);
        }
        if (in == n) break;
        const char c = data[in++];
        ++line_;
        if (digits_ == 0) return stop(error::bad_chunk, decoded());
        if (c != '\r') {
          if (c == ';')
            state_ = state::ext;
          else if (c == ' ' || c == '\t')
            state_ = state::size_ws;
          else
            return stop(error::bad_chunk, decoded());
          break;
        }
        state_ = state::size_lf;
        if (in == n) break;
        [[fallthrough]];  // the LF, when it came with the CR
      }
      case state::size_lf:
        if (!expect('\n', left_ == 0 ? state::trailer : state::data))
          return stop(error::bad_chunk, decoded());
        line_ = 0;
        digits_ = 0;
        break;
      case state::size_ws: {  // BWS after the size: only before an extension
        const char c = data[in++];
        if (++line_ > max_line) return stop(error::line_too_long, decoded());
        if (c == ';')
          state_ = state::ext;
        else if (c != ' ' && c != '\t')
          return stop(error::bad_chunk, decoded());
        break;
      }
      case state::ext: {
        const auto c = static_cast<unsigned char>(data[in++]);
        if (++line_ > max_line) return stop(error::line_too_long, decoded());
        if (c == '\r')
          state_ = state::size_lf;
        else if ((c < 0x20 && c != '\t') || c == 0x7f)
          return stop(error::bad_chunk, decoded());
        break;
      }
      case state::data_cr:
        if (!expect('\r', state::data_lf)) return stop(error::bad_chunk, decoded());
        if (in == n) break;
        [[fallthrough]];  // the LF, when it came with the CR
      case state::data_lf:
        if (!expect('\n', state::size)) return stop(error::bad_chunk, decoded());
        break;
      case state::trailer:  // a trailer line, or the CR of the final CRLF
        if (data[in] == '\r') {
          ++in;
          state_ = state::end_lf;
        } else {
          state_ = state::trailer_line;  // its first byte is read there
        }
        break;
      case state::trailer_line: {
        const char c = data[in++];
        if (++line_ > max_trailers) return stop(error::trailers_too_long, decoded());
        if (c == '\r') state_ = state::trailer_lf;
        if (c == '\n') return stop(error::bad_chunk, decoded());  // bare LF
        break;
      }
      case state::trailer_lf:
        if (!expect('\n', state::trailer)) return stop(error::bad_chunk, decoded());
        break;
      case state::end_lf:
        if (!expect('\n', state::done)) return stop(error::bad_chunk, decoded());
        break;
      case state::done:
        extra_ = true;
        return decoded();
      case state::failed:
        return decoded();
    }
  }
  return decoded();
}

bool http_body_decoder::close() noexcept {
  if (state_ == state::done) return true;
  if (state_ == state::failed) return false;
  if (kind_ == framing::until_close) {
    state_ = state::done;
    return true;
  }
  fail(error::bad_chunk);  // cut short (for Content-Length as much as for chunked)
  return false;
}

}  // namespace tokentap::parsers
