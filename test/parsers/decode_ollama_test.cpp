// Ollama's NDJSON decoder, chat and generate (reference §3g), on verbatim streams from
// ../shared/reference/sse-formats.md, each fed every way decode_everywhere.hpp feeds a body.
#include "parsers/stream_decoder.hpp"

#include <gtest/gtest.h>

#include "test/parsers/decode_everywhere.hpp"

namespace tokentap::parsers {
namespace {

using namespace std::string_literals;

TEST(OllamaDecoder, NdjsonChatAndGenerate) {
  const std::string chat =
      "{\"model\":\"gemma2:2b\",\"message\":{\"role\":\"assistant\",\"content\":\"\",\"thinking\":"
      "\"hmm\"},\"done\":false}\n"
      "{\"model\":\"gemma2:2b\",\"message\":{\"role\":\"assistant\",\"content\":\"Hi\"},\"done\":"
      "false}\n"
      "{\"model\":\"gemma2:2b\",\"message\":{\"role\":\"assistant\",\"content\":\"\"},\"done_"
      "reason\":\"stop\",\"done\":true,\"total_duration\":4353619900,\"prompt_eval_count\":10,"
      "\"prompt_eval_duration\":246847000,\"eval_count\":17,\"eval_duration\":4032296000}\n";
  EXPECT_EQ(decode(chat, provider::ollama, "application/x-ndjson"),
            "content=Hi|reasoning=hmm|tool=|finish(stop)|in=10 out=17 reasoning=1 cached=-1 "
            "write=-1 cache_fields=0"
            "|provider=ollama|id= model=gemma2:2b"
            "|engine=ollama queue=-1 load=-1 prefill=246.847 decode=4032.3 inference=-1 invalid=0");
  const std::string generate =
      "{\"model\": \"llama3.2\", \"created_at\": \"2023-08-04T08:52:19.385406455-07:00\", "
      "\"response\": \"The\", \"done\": false}\n"
      "{\"model\": \"llama3.2\", \"created_at\": \"2023-08-04T19:22:45.499127Z\", \"response\": "
      "\"\", \"done\": true, \"context\": [1, 2, 3], \"total_duration\": 10706818083, "
      "\"load_duration\": 6338219291, \"prompt_eval_count\": 26, \"prompt_eval_duration\": "
      "130079000, \"eval_count\": 259, \"eval_duration\": 4232710000}\n"
      "{\"error\":\"model unloaded\"}\n";
  EXPECT_EQ(decode(generate, provider::ollama, "application/x-ndjson"),
            "content=The|reasoning=|tool=|error(,model unloaded)|in=26 out=259 reasoning=0 "
            "cached=-1 write=-1 "
            "cache_fields=0|provider=ollama|id= model=llama3.2"
            "|engine=ollama queue=-1 load=6338.22 prefill=130.079 decode=4232.71 inference=-1 "
            "invalid=0");
}

}  // namespace
}  // namespace tokentap::parsers
