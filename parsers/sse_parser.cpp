#include "parsers/sse_parser.hpp"

#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace tokentap::parsers {

namespace {

constexpr unsigned char utf8_bom[3] = {0xEF, 0xBB, 0xBF};

const char* find_byte(const char* p, const char* end, char c) {
  const void* r = std::memchr(p, c, static_cast<std::size_t>(end - p));
  return r ? static_cast<const char*>(r) : end;
}

// The first CR or LF in [p, end) (end: none) — every line end starts with one.  One pass for
// both, 32 bytes at a time, instead of a memchr for each (six library calls for an event's three
// lines).  A scan stops at the line's end, so CR-only streams stay linear.  Reads
// stay within [p, end): the last block of a range is loaded overlapping the one before.
const char* find_line_end(const char* p, const char* const end) noexcept {
#if defined(__SSE2__)
  if (end - p >= 16) {
    const __m128i cr = _mm_set1_epi8('\r');
    const __m128i lf = _mm_set1_epi8('\n');
    const auto ends = [&](const char* at) {
      const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(at));
      return static_cast<unsigned>(
          _mm_movemask_epi8(_mm_or_si128(_mm_cmpeq_epi8(v, cr), _mm_cmpeq_epi8(v, lf))));
    };
    for (; end - p > 32; p += 32) {
      const unsigned m = ends(p) | ends(p + 16) << 16;
      if (m != 0) return p + __builtin_ctz(m);
    }
    if (end - p > 16) {
      if (const unsigned m = ends(p); m != 0) return p + __builtin_ctz(m);
      p += 16;
    }
    // The last 1–16 bytes, as the 16 ending at `end` (those before p were searched already).
    const char* const last = end - 16;
    const unsigned m = ends(last) >> (p - last);
    return m != 0 ? p + __builtin_ctz(m) : end;
  }
#endif
  for (; p < end; ++p)
    if (*p == '\r' || *p == '\n') return p;
  return end;
}

// For buffers used only by the exceptional path (a line or event split across reads): empty it,
// and give a large one's memory back rather than hold it for the life of an idle stream.
void clear_or_release(std::string& s) {
  if (s.capacity() > 256)
    std::string().swap(s);
  else
    s.clear();
}

bool parse_retry(std::string_view v, std::int64_t& out) {
  if (v.empty()) return false;
  std::int64_t n = 0;
  for (char c : v) {
    if (c < '0' || c > '9') return false;
    if (n < (std::int64_t{1} << 52)) n = n * 10 + (c - '0');  // saturate absurd values
  }
  out = n;
  return true;
}

}  // namespace

// ------------------------------------------------------------------ sse_parser

void sse_parser::feed(std::string_view bytes, std::int64_t t_ns, sse_handler& h) {
  const char* p = bytes.data();
  const char* const end = p + bytes.size();
  if (!bom_done_) {
    // Strip one BOM at stream start, even when its three bytes arrive in separate reads.
    while (p < end && bom_matched_ < 3 &&
           static_cast<unsigned char>(*p) == utf8_bom[bom_matched_]) {
      ++bom_matched_;
      ++p;
    }
    if (bom_matched_ == 3) {
      bom_done_ = true;
    } else if (p < end) {
      // Not a BOM after all: the bytes held so far are ordinary input.
      bom_done_ = true;
      const char held[3] = {'\xEF', '\xBB', '\xBF'};
      feed_lines(held, held + bom_matched_, t_ns, h);
      keep_pending_data();
    } else {
      return;  // still a BOM prefix; wait for more bytes
    }
  }
  feed_lines(p, end, t_ns, h);
  keep_pending_data();  // views into `bytes` end with this call
}

void sse_parser::keep_pending_data() {
  if (!data_pending_) return;
  data_pending_ = false;
  spilled_ = true;
  data_.append(pending_);
  data_.push_back('\n');
}

void sse_parser::feed_lines(const char* p, const char* const end, std::int64_t t_ns,
                            sse_handler& h) {
  while (p < end) {
    if (after_cr_) {
      after_cr_ = false;
      if (*p == '\n') {  // the LF of a CRLF split across reads
        ++p;
        continue;
      }
    }
    const char* eol = find_line_end(p, end);  // CR, LF or CRLF
    const std::size_t seg = static_cast<std::size_t>(eol - p);

    if (skipping_) {
      // Inside an oversized event: only a blank line (which ends it) matters.
      if (seg > 0) skip_line_has_bytes_ = true;
      if (eol == end) return;
      if (!skip_line_has_bytes_) {
        skipping_ = false;
        in_event_ = false;
      }
      skip_line_has_bytes_ = false;
    } else if (line_size() + seg + data_size() > max_event_bytes_) {
      // The one size cap, applied to the line however it arrived (in one read or several), so
      // the outcome never depends on the split (fuzz_sse found a long line skipped only when it
      // came in pieces).  It also bounds `data` lines: the value is shorter than the line.
      start_skip(t_ns, h);
      if (eol == end) {
        skip_line_has_bytes_ = true;
        return;
      }
    } else if (eol == end) {
      spilled_ = true;
      line_.append(p, seg);  // an unfinished line: keep it until its end arrives
      return;
    } else if (line_size() == 0) {
      process_line(std::string_view(p, seg), t_ns, h);  // the common case: no copy
    } else {
      line_.append(p, seg);
      process_line(line_, t_ns, h);
      keep_pending_data();      // a view of line_, which is about to be reused
      clear_or_release(line_);  // lines split across reads are the exception
      spilled_ = !data_.empty();
    }
    if (*eol == '\r') {
      if (eol + 1 == end) {
        after_cr_ = true;  // a CR ends the line; an LF at the start of the next read belongs to it
        return;
      }
      p = eol[1] == '\n' ? eol + 2 : eol + 1;
    } else {
      p = eol + 1;
    }
  }
}

void sse_parser::start_skip(std::int64_t t_ns, sse_handler& h) {
  ++oversized_;
  h.on_oversize(max_event_bytes_, t_ns);
  skipping_ = true;
  skip_line_has_bytes_ = false;
  line_.clear();
  data_.clear();
  spilled_ = false;
  data_pending_ = false;
  clear_type();
}

void sse_parser::process_line(std::string_view line, std::int64_t t_ns, sse_handler& h) {
  if (line.empty()) {
    dispatch(t_ns, h);
    return;
  }
  in_event_ = true;
  if (line.front() == ':') return;  // comment (keep-alive)
  std::string_view field = line, value;
  if (const auto colon = line.find(':'); colon != std::string_view::npos) {
    field = line.substr(0, colon);
    value = line.substr(colon + 1);
    if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  }
  if (field == "data") {
    // Within the cap: feed_lines checked the whole line.
    if (data_size() == 0) {
      pending_ = value;
      data_pending_ = true;
    } else {
      keep_pending_data();
      spilled_ = true;
      data_.append(value);
      data_.push_back('\n');
    }
  } else if (field == "event") {
    type_.assign(value);
    typed_ = true;
  } else if (field == "id") {
    if (value.find('\0') == std::string_view::npos) {
      id_.assign(value);
      has_id_ = true;
    }
  } else if (field == "retry") {
    std::int64_t ms;
    if (parse_retry(value, ms)) retry_ms_ = ms;
  } else {
    h.on_unknown_field(field, value, t_ns);  // ignored by the spec; observers may care
  }
}

void sse_parser::dispatch(std::int64_t t_ns, sse_handler& h) {
  in_event_ = false;
  const std::string_view type = typed_ ? std::string_view(type_) : std::string_view();
  const std::string_view id = has_id_ ? std::string_view(id_) : std::string_view();
  if (data_pending_) {
    data_pending_ = false;
    ++events_;
    h.on_event(sse_event{type, pending_, id, t_ns});
    clear_type();
    return;
  }
  if (data_size() == 0) {
    clear_type();
    return;
  }
  data_.pop_back();  // the LF after the last data line
  ++events_;
  h.on_event(sse_event{type, data_, id, t_ns});
  clear_or_release(data_);  // events that needed a copy are the exception (see pending_)
  spilled_ = !line_.empty();
  clear_type();
}

void sse_parser::clear_type() {
  if (!typed_) return;
  typed_ = false;
  type_.clear();
}

bool sse_parser::finish() {
  const bool unfinished = in_event_ || skipping_ || line_size() != 0 || data_size() != 0;
  line_.clear();
  data_.clear();
  spilled_ = false;
  data_pending_ = false;
  clear_type();
  id_.clear();
  has_id_ = false;
  retry_ms_ = -1;
  bom_matched_ = 0;
  bom_done_ = false;
  after_cr_ = false;
  skipping_ = false;
  skip_line_has_bytes_ = false;
  in_event_ = false;
  return unfinished;
}

// ------------------------------------------------------------------ ndjson_framer

void ndjson_framer::emit(std::string_view line, std::int64_t t_ns, ndjson_handler& h) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  if (line.find_first_not_of(" \t") == std::string_view::npos) return;  // blank line
  h.on_line(line, t_ns);
}

void ndjson_framer::feed(std::string_view bytes, std::int64_t t_ns, ndjson_handler& h) {
  const char* p = bytes.data();
  const char* const end = p + bytes.size();
  while (p < end) {
    const char* nl = find_byte(p, end, '\n');
    const std::size_t seg = static_cast<std::size_t>(nl - p);
    if (skipping_) {
      if (nl == end) return;
      skipping_ = false;  // the oversized line ended here
    } else if (line_.size() + seg > max_line_bytes_) {
      ++oversized_;
      h.on_oversize(max_line_bytes_, t_ns);
      line_.clear();
      if (nl == end) {
        skipping_ = true;
        return;
      }
    } else if (nl == end) {
      line_.append(p, seg);
      return;
    } else if (line_.empty()) {
      emit(std::string_view(p, seg), t_ns, h);
    } else {
      line_.append(p, seg);
      emit(line_, t_ns, h);
      line_.clear();
    }
    p = nl + 1;
  }
}

void ndjson_framer::finish(std::int64_t t_ns, ndjson_handler& h) {
  if (!skipping_ && !line_.empty()) emit(line_, t_ns, h);
  line_.clear();
  skipping_ = false;
}

}  // namespace tokentap::parsers
