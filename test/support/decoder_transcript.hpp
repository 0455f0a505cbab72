#pragma once
// What a stream decoder reported, as one comparable string (text per channel, errors, finish
// reasons, parse errors, usage, detected provider).  Shared by the decoder unit tests and the
// decoder fuzz targets; header-only and free of GoogleTest so the fuzzers can use it.
#include <cstdint>
#include <cstdio>
#include <map>
#include <string>

#include "parsers/stream_decoder.hpp"

namespace tokentap::test {

struct decoder_transcript : parsers::decoder_handler {
  std::string text[3];                             ///< every choice's, in the order reported
  std::map<std::uint32_t, std::string> by_choice;  ///< choices past the first: "channel:text|…"
  std::string log;
  std::string sequence;  ///< every call in order, token boundaries included (not in describe())
  std::uint64_t tokens[3] = {0, 0, 0};
  bool empty_token = false;  ///< a token event without text (never allowed)

  void on_token(parsers::channel ch, std::string_view t, std::int64_t,
                std::uint32_t choice) noexcept override {
    if (t.empty()) empty_token = true;
    text[static_cast<int>(ch)] += t;
    ++tokens[static_cast<int>(ch)];
    const std::string at = choice == 0 ? "" : "@" + std::to_string(choice);
    if (choice != 0) by_choice[choice] += std::string(to_string(ch)) + ":" + std::string(t) + "|";
    sequence += "token" + at + "(" + std::string(to_string(ch)) + "," + std::string(t) + ")";
  }
  void on_stream_error(std::string_view type, std::string_view msg,
                       std::int64_t) noexcept override {
    log += "error(" + std::string(type) + "," + std::string(msg) + ")";
    sequence += "error(" + std::string(type) + "," + std::string(msg) + ")";
  }
  void on_output_count(std::int64_t n, std::int64_t) noexcept override {
    sequence += "output(" + std::to_string(n) + ")";
  }
  void on_finish_reason(std::string_view r, std::uint32_t choice) noexcept override {
    const std::string at = choice == 0 ? "" : "@" + std::to_string(choice);
    log += "finish" + at + "(" + std::string(r) + ")";
    sequence += "finish" + at + "(" + std::string(r) + ")";
  }
  void on_parse_error(parsers::parse_stage s, std::int64_t) noexcept override {
    log += "parse_error(" + std::string(to_string(s)) + ")";
    sequence += "parse_error(" + std::string(to_string(s)) + ")";
  }

  std::string describe(const parsers::stream_decoder& d) const {
    const auto u = d.usage();
    return "content=" + text[0] + "|reasoning=" + text[1] + "|tool=" + text[2] + "|" + log +
           "|in=" + std::to_string(u.input_tokens) + " out=" + std::to_string(u.output_tokens) +
           " reasoning=" + std::to_string(u.reasoning_tokens) +
           " cached=" + std::to_string(u.cached_input_tokens) +
           " write=" + std::to_string(u.cache_write_tokens) +
           " cache_fields=" + (u.cache_fields ? "1" : "0") +
           "|provider=" + std::string(to_string(d.detected_provider())) + choices() + identity(d) +
           engine(d);
  }

  /// "" when the stream gave no engine account, else "|engine=SOURCE queue=… … invalid=N".
  static std::string engine(const parsers::stream_decoder& d) {
    const auto& e = d.engine();
    if (!e.reported() && e.invalid == 0) return "";
    const auto ms = [](double v) {
      char b[32];
      std::snprintf(b, sizeof b, "%g", v);
      return std::string(b);
    };
    return "|engine=" + std::string(to_string(e.source)) + " queue=" + ms(e.queue_ms) +
           " load=" + ms(e.load_ms) + " prefill=" + ms(e.prefill_ms) +
           " decode=" + ms(e.decode_ms) + " inference=" + ms(e.inference_ms) +
           " invalid=" + std::to_string(e.invalid);
  }

  /// "" when the stream named no response id or model, else "|id=… model=…".
  static std::string identity(const parsers::stream_decoder& d) {
    if (d.response_id().empty() && d.response_model().empty()) return "";
    return "|id=" + std::string(d.response_id()) + " model=" + std::string(d.response_model());
  }

  /// "" when every token was choice 0's, else each later choice's tokens.
  std::string choices() const {
    std::string out;
    for (const auto& [i, t] : by_choice) out += "|choice " + std::to_string(i) + "=" + t;
    return out;
  }
};

}  // namespace tokentap::test
