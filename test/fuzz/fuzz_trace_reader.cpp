// Trace-record reader (replay / analyze).  Invariants:
//  - any line: parsing is deterministic and a parsed record's start_us agrees with its `start`;
//  - round trip: reads written the way the trace writer writes them (JSON string when the read
//    is valid UTF-8, base64 otherwise) come back byte-exact, and so do method and path;
//  - base64 encoding then decoding is the identity;
//  - a line with its keys reordered reads as the same record (header lists compared as sets:
//    a JSON object's member order carries no meaning).
#include "base/json.hpp"
#include "replay/trace_reader.hpp"
#include "test/fuzz/fuzz_common.hpp"
#include "test/support/json_keys.hpp"
#include "test/support/trace_record_text.hpp"

using namespace tokentap;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string line(reinterpret_cast<const char*>(data), size);
  const auto a = replay::parse_record(line);
  const auto b = replay::parse_record(line);
  FUZZ_CHECK(a.has_value() == b.has_value());
  if (a) {
    FUZZ_CHECK(a->start_us == replay::parse_rfc3339_us(a->start));
    FUZZ_CHECK(a->events.size() == b->events.size());
    FUZZ_CHECK(a->method == b->method && !a->method.empty());
    const auto reordered = test::reorder_keys(line, static_cast<test::key_order>(size % 3), size);
    const auto c = replay::parse_record(reordered);
    FUZZ_CHECK(c.has_value());
    FUZZ_CHECK(test::describe(*c) == test::describe(*a));
  }

  // Round trip: the input, cut at NUL bytes, is a path and a list of reads.
  std::vector<std::string_view> parts;
  std::string_view rest(line);
  for (std::size_t at; (at = rest.find('\0')) != std::string_view::npos;) {
    parts.push_back(rest.substr(0, at));
    rest.remove_prefix(at + 1);
  }
  parts.push_back(rest);
  const std::string_view path = base::json::valid_utf8(parts[0]) ? parts[0] : "/p";
  std::string out =
      R"({"v":1,"id":"x","start":"2026-11-29T18:19:05.123456Z","request":{"method":"POST","path":)";
  base::json::append_string(out, path);
  out += R"(},"events":[)";
  for (std::size_t i = 1; i < parts.size(); ++i) {
    if (i > 1) out += ',';
    out += R"({"t_us":)" + std::to_string(i) +
           (base::json::valid_utf8(parts[i]) ? R"(,"raw":)" : R"(,"raw_b64":)");
    if (base::json::valid_utf8(parts[i]))
      base::json::append_string(out, parts[i]);
    else
      base::json::append_base64(out, parts[i]);
    out += '}';
  }
  out += "]}";
  const auto r = replay::parse_record(out);
  FUZZ_CHECK(r.has_value());
  FUZZ_CHECK(r->method == "POST" && r->path == path);
  FUZZ_CHECK(r->start_us == 1795976345123456);
  FUZZ_CHECK(r->events.size() == parts.size() - 1);
  for (std::size_t i = 1; i < parts.size(); ++i) {
    FUZZ_CHECK(r->events[i - 1].t_us == static_cast<std::int64_t>(i));
    FUZZ_CHECK(r->events[i - 1].bytes == parts[i]);
  }

  std::string b64;
  base::json::append_base64(b64, line);
  FUZZ_CHECK(base::json::base64_decode(b64) == line);
  return 0;
}
