#pragma once
// Internal to parsers/: one simdjson parser and padding buffer per thread and per user (`Tag`),
// for code that parses a document and extracts what it needs within one call, keeping no view into
// the parser afterwards.  Per-object parsers cost ~20 KiB per open stream for no benefit.
#include <simdjson.h>

#include <string>
#include <string_view>

namespace tokentap::parsers::detail {

struct json_scratch {
  simdjson::ondemand::parser parser;
  std::string padded;

  /// `s` copied with SIMDJSON_PADDING bytes of slack (the buffer is reused: no allocation once
  /// warm), ready for parser.iterate().  The slack is initialized memory: readers may load
  /// words that cross the document's end.
  simdjson::padded_string_view pad(std::string_view s) {
    if (padded.capacity() < s.size() + simdjson::SIMDJSON_PADDING) {
      padded.reserve(s.size() + simdjson::SIMDJSON_PADDING);
      padded.resize(padded.capacity());
    }
    padded.assign(s);
    return simdjson::padded_string_view(padded.data(), padded.size(), padded.capacity());
  }

  /// Gives back what a large document made the buffers grow to.
  void release() {
    parser = simdjson::ondemand::parser();
    std::string().swap(padded);
  }
};

/// The calling thread's scratch for `Tag` (separate tags never share, so one user may call
/// another while its own document is live).
template <class Tag>
json_scratch& thread_json_scratch() {
  static thread_local json_scratch s;
  return s;
}

}  // namespace tokentap::parsers::detail
