#pragma once
// How the decoder tests feed a body: whole, at every split, byte by byte and in random chunks,
// with the fast paths on and off, and with every JSON object's keys sorted, reversed and
// shuffled — each way must give the same transcript.  And a verbatim OpenAI stream several
// suites use (../shared/reference/sse-formats.md §3a).
#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "parsers/stream_decoder.hpp"
#include "test/support/chunking.hpp"
#include "test/support/decoder_transcript.hpp"
#include "test/support/json_keys.hpp"

namespace tokentap::parsers {

inline std::string run(const std::vector<std::string_view>& chunks, provider p,
                       std::string_view content_type, std::size_t max, bool fast_paths,
                       std::string* sequence = nullptr) {
  stream_decoder d(p, content_type, max);
  d.set_fast_paths(fast_paths);
  test::decoder_transcript t;
  for (auto c : chunks) d.feed(c, 0, t);
  d.finish(0, t);
  EXPECT_FALSE(t.empty_token);
  if (sequence != nullptr) *sequence = t.sequence;
  return t.describe(d);
}

// Every way of splitting the body gives the same result, and the simdjson-only decoder (fast
// paths off) reports exactly the same calls in the same order.  The same holds for the body with
// the keys of every JSON object sorted, reversed and shuffled (three seeds): key order carries
// no meaning (RFC 8259 §4), and real senders differ in it.
inline std::string decode(std::string_view body, provider p,
                          std::string_view content_type = "text/event-stream",
                          std::size_t max = 1 << 20) {
  const auto whole = test::grind(body, [&](const std::vector<std::string_view>& chunks) {
    return run(chunks, p, content_type, max, true);
  });
  std::string fast_sequence, reference_sequence;
  EXPECT_EQ(run({body}, p, content_type, max, true, &fast_sequence),
            run({body}, p, content_type, max, false, &reference_sequence));
  EXPECT_EQ(fast_sequence, reference_sequence);
  const std::pair<test::key_order, std::uint64_t> orders[] = {{test::key_order::sorted, 0},
                                                              {test::key_order::reversed, 0},
                                                              {test::key_order::shuffled, 1},
                                                              {test::key_order::shuffled, 2},
                                                              {test::key_order::shuffled, 3}};
  for (const auto& [order, seed] : orders) {
    const auto reordered = test::reorder_stream_keys(body, order, seed);
    SCOPED_TRACE("keys " +
                 std::string(order == test::key_order::sorted     ? "sorted"
                             : order == test::key_order::reversed ? "reversed"
                                                                  : "shuffled") +
                 ", seed " + std::to_string(seed) + ":\n" + reordered);
    EXPECT_EQ(reordered.size(), body.size());
    EXPECT_EQ(test::grind(reordered,
                          [&](const std::vector<std::string_view>& chunks) {
                            return run(chunks, p, content_type, max, true);
                          }),
              whole);
    for (const bool fast : {true, false}) {
      std::string sequence;
      run({reordered}, p, content_type, max, fast, &sequence);
      EXPECT_EQ(sequence, fast_sequence) << (fast ? "fast paths" : "simdjson only");
    }
  }
  return whole;
}

inline const std::string openai_text_stream =
    R"(data: {"id":"chatcmpl-CVFjOTBIgA3kuQLnIXXxtg7Ge7hbs","object":"chat.completion.chunk","created":1761564674,"model":"gpt-3.5-turbo-0125","service_tier":"default","system_fingerprint":null,"choices":[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}],"usage":null,"obfuscation":"kSx18"})"
    "\n\n"
    R"(data: {"id":"chatcmpl-CVFjOTBIgA3kuQLnIXXxtg7Ge7hbs","object":"chat.completion.chunk","created":1761564674,"model":"gpt-3.5-turbo-0125","service_tier":"default","system_fingerprint":null,"choices":[{"index":0,"delta":{"content":"Hi"},"logprobs":null,"finish_reason":null}],"usage":null,"obfuscation":"Gpkah"})"
    "\n\n"
    R"(data: {"id":"chatcmpl-CVFjOTBIgA3kuQLnIXXxtg7Ge7hbs","object":"chat.completion.chunk","created":1761564674,"model":"gpt-3.5-turbo-0125","service_tier":"default","system_fingerprint":null,"choices":[{"index":0,"delta":{"content":" there"},"logprobs":null,"finish_reason":null}],"usage":null,"obfuscation":"Gpkah"})"
    "\n\n"
    R"(data: {"id":"chatcmpl-CVFjOTBIgA3kuQLnIXXxtg7Ge7hbs","object":"chat.completion.chunk","created":1761564674,"model":"gpt-3.5-turbo-0125","service_tier":"default","system_fingerprint":null,"choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}],"usage":null,"obfuscation":"a"})"
    "\n\n"
    R"(data: {"id":"chatcmpl-CVFjOTBIgA3kuQLnIXXxtg7Ge7hbs","object":"chat.completion.chunk","created":1761564674,"model":"gpt-3.5-turbo-0125","service_tier":"default","system_fingerprint":null,"choices":[],"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}},"obfuscation":"8618FsxJD2gV"})"
    "\n\n"
    "data: [DONE]\n\n";

}  // namespace tokentap::parsers
