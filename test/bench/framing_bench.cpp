// Framing throughput (target: >= 1 GB/s on one core).  A realistic OpenAI chat stream is
// fed in upstream-read-sized pieces; the handler touches each event so nothing is optimized away.
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include <simdjson.h>

#include "base/json.hpp"
#include "hooks/export/event_log.hpp"
#include "hooks/export/trace_writer.hpp"
#include "parsers/sse_parser.hpp"
#include "parsers/step_tagger.hpp"
#include "parsers/stream_decoder.hpp"
#include "sim/generator.hpp"

namespace {

using namespace tokentap;

std::string openai_stream(int tokens) {
  sim::params p;
  p.output_tokens = tokens;
  p.reasoning_tokens = tokens / 4;
  sim::request_shape s;
  s.stream = true;
  s.include_usage = true;
  s.model = "gpt-4o-mini";
  std::string out;
  for (const auto& e : sim::make_plan(p, s).events) out += e.bytes;
  return out;
}

struct counter : parsers::sse_handler {
  std::size_t events = 0, bytes = 0;
  void on_event(const parsers::sse_event& e) noexcept override {
    ++events;
    bytes += e.data.size();
  }
};

// range(0): bytes per read; range(1) (optional): line ends 0 LF, 1 CR, 2 CRLF (all legal SSE).
void BM_SseFraming(benchmark::State& state) {
  std::string stream;
  for (const char c : openai_stream(4000)) {  // the JSON itself has no raw line breaks
    if (c != '\n' || state.range(1) == 0)
      stream.push_back(c);
    else if (state.range(1) == 1)
      stream.push_back('\r');
    else
      stream += "\r\n";
  }
  const std::size_t read_size = static_cast<std::size_t>(state.range(0));
  counter c;
  for (auto _ : state) {
    parsers::sse_parser p;
    for (std::size_t i = 0; i < stream.size(); i += read_size)
      p.feed(std::string_view(stream).substr(i, read_size), 0, c);
    p.finish();
    benchmark::DoNotOptimize(c.bytes);
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * stream.size()));
  state.counters["events/s"] =
      benchmark::Counter(static_cast<double>(c.events), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_SseFraming)
    ->Args({200, 0})
    ->Args({4096, 0})
    ->Args({16384, 0})
    ->Args({16384, 1})
    ->Args({16384, 2});

struct line_counter : parsers::ndjson_handler {
  std::size_t lines = 0;
  void on_line(std::string_view, std::int64_t) noexcept override { ++lines; }
};

void BM_NdjsonFraming(benchmark::State& state) {
  std::string stream;
  for (int i = 0; i < 4000; ++i)
    stream +=
        R"({"model":"llama3","created_at":"2026-11-29T16:00:00Z","message":{"role":"assistant","content":" word"},"done":false})"
        "\n";
  line_counter c;
  for (auto _ : state) {
    parsers::ndjson_framer f;
    for (std::size_t i = 0; i < stream.size(); i += 4096)
      f.feed(std::string_view(stream).substr(i, 4096), 0, c);
    f.finish(0, c);
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * stream.size()));
}
BENCHMARK(BM_NdjsonFraming);

// Decoding (framing + JSON + channel routing), in chunk decodes per second (target: >= 3 M/s).
struct token_counter : parsers::decoder_handler {
  std::size_t tokens = 0, bytes = 0;
  void on_token(parsers::channel, std::string_view t, std::int64_t,
                std::uint32_t) noexcept override {
    ++tokens;
    bytes += t.size();
  }
};

std::string anthropic_stream(int tokens) {
  sim::params p;
  p.output_tokens = tokens;
  p.reasoning_tokens = tokens / 4;
  sim::request_shape s;
  s.kind = sim::api::anthropic_messages;
  s.stream = true;
  s.model = "claude-sonnet-4-5";
  std::string out;
  for (const auto& e : sim::make_plan(p, s).events) out += e.bytes;
  return out;
}

void decode_bench(benchmark::State& state, const std::string& stream, parsers::provider prov,
                  bool fast_paths = true) {
  token_counter c;
  std::size_t events = 0;
  for (auto _ : state) {
    parsers::stream_decoder d(prov, "text/event-stream");
    d.set_fast_paths(fast_paths);
    for (std::size_t i = 0; i < stream.size(); i += 4096)
      d.feed(std::string_view(stream).substr(i, 4096), 0, c);
    d.finish(0, c);
    events +=
        d.token_events(parsers::channel::content) + d.token_events(parsers::channel::reasoning);
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * stream.size()));
  state.counters["chunks/s"] =
      benchmark::Counter(static_cast<double>(events), benchmark::Counter::kIsRate);
}

// Arg 1: chat chunks read by openai_chunk_reader (the product); 0: the oracle — the reader's
// validity check, then simdjson's walk.
void BM_DecodeOpenAI(benchmark::State& state) {
  static const std::string s = openai_stream(4000);
  decode_bench(state, s, parsers::provider::openai_chat, state.range(0) != 0);
}
BENCHMARK(BM_DecodeOpenAI)->Arg(0)->Arg(1);

// What the trace writer does with a read it cannot escape in pieces (one not shaped like the
// last chat chunk): JSON-escape it whole (one pass that also validates UTF-8), as the `raw`
// field of the trace record.
void BM_TraceEscapeRead(benchmark::State& state) {
  static const std::string s = openai_stream(64);
  const std::string_view read = std::string_view(s).substr(0, s.find("\n\n") + 2);
  std::string out;
  for (auto _ : state) {
    out.clear();
    benchmark::DoNotOptimize(base::json::append_string_if_utf8(out, read));
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * read.size()));
  state.counters["read_bytes"] = static_cast<double>(read.size());
}
BENCHMARK(BM_TraceEscapeRead);

// What the trace writer does with a finished stream's reads (trace_writer::render_events): a
// 100-token chat stream, one event per read, logged as the trace hook logs it — arg 1: the
// reads shaped like the last chunk by event_log::append_shaped (the framing and the text, the
// shape once), escaped in pieces; arg 0: every read by event_log::append (its difference from
// the last one), rebuilt and escaped whole.  The same JSON either way.
void BM_TraceRenderEvents(benchmark::State& state) {
  static const std::string s = openai_stream(100);
  std::vector<std::string_view> reads;
  for (std::size_t at = 0; at < s.size();) {
    const auto end = s.find("\n\n", at);
    const std::size_t n = (end == std::string::npos ? s.size() : end + 2) - at;
    reads.push_back(std::string_view(s).substr(at, n));
    at += n;
  }
  hooks::event_log log;
  parsers::stream_decoder d(parsers::provider::openai_chat, "text/event-stream");
  token_counter c;
  std::size_t shaped = 0;
  for (std::size_t i = 0; i < reads.size(); ++i) {
    d.feed(reads[i], 0, c);
    parsers::read_shape shape;
    if (state.range(0) != 0 && d.last_read_shape(reads[i], shape)) {
      log.append_shaped(static_cast<std::int64_t>(i), reads[i], shape);
      ++shaped;
    } else {
      log.append(static_cast<std::int64_t>(i), reads[i]);
    }
  }
  log.seal();
  std::string out;
  for (auto _ : state) {
    out.clear();
    hooks::trace_writer::render_events(out, log);
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["reads/s"] = benchmark::Counter(
      static_cast<double>(state.iterations() * reads.size()), benchmark::Counter::kIsRate);
  state.counters["shaped"] = static_cast<double>(shaped) / static_cast<double>(reads.size());
}
BENCHMARK(BM_TraceRenderEvents)->Arg(0)->Arg(1);

void BM_DecodeAnthropic(benchmark::State& state) {
  static const std::string s = anthropic_stream(4000);
  decode_bench(state, s, parsers::provider::anthropic);
}
BENCHMARK(BM_DecodeAnthropic);

// Step tagging throughput in tokens per second (target: >= 10 M/s on one core).
// Arg 0: the simulator's reasoning text (56-word vocabulary: pathological for the redundancy
// index, every trigram recurs); arg 1: the same sentence structure over a 5,000-word vocabulary.
std::vector<std::string> reasoning_tokens(bool wide_vocabulary) {
  sim::params p;
  p.output_tokens = 0;
  p.reasoning_tokens = 20000;
  sim::request_shape s;
  s.stream = true;
  const auto text = sim::make_plan(p, s).reasoning_text;
  std::vector<std::string> tokens;
  std::uint64_t r = 88172645463325252ull;
  for (std::size_t i = 0; i < text.size();) {
    auto j = text.find(' ', i + 1);
    if (j == std::string::npos) j = text.size();
    std::string tok = text.substr(i, j - i);
    const bool plain_word = tok.size() > 2 && tok[0] == ' ' &&
                            std::islower(static_cast<unsigned char>(tok[1])) &&
                            tok.find('.') == std::string::npos;
    if (wide_vocabulary && plain_word) {
      r ^= r << 13, r ^= r >> 7, r ^= r << 17;
      tok = " w" + std::to_string(r % 5000);
    }
    tokens.push_back(std::move(tok));
    i = j;
  }
  return tokens;
}

void BM_StepTagger(benchmark::State& state) {
  const auto tokens = reasoning_tokens(state.range(0) == 1);
  std::size_t steps = 0;
  for (auto _ : state) {
    parsers::step_tagger t;
    std::int64_t ts = 0;
    for (const auto& tok : tokens) t.feed(tok, ++ts);
    t.finish();
    steps += t.steps().size();
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * tokens.size()));
  state.counters["steps"] = static_cast<double>(steps) / static_cast<double>(state.iterations());
}
BENCHMARK(BM_StepTagger)->Arg(0)->Arg(1);

void BM_SimdjsonKernel(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(simdjson::builtin_implementation());
  state.SetLabel(std::string(simdjson::builtin_implementation()->name()) +
                 " (On-Demand, compile-time)");
}
BENCHMARK(BM_SimdjsonKernel)->Iterations(1);

}  // namespace

BENCHMARK_MAIN();
