// TGI's decoder (reference §3e), on verbatim streams from ../shared/reference/sse-formats.md, each
// fed every way decode_everywhere.hpp feeds a body.
#include "parsers/stream_decoder.hpp"

#include <gtest/gtest.h>

#include "test/parsers/decode_everywhere.hpp"

namespace tokentap::parsers {
namespace {

using namespace std::string_literals;

TEST(TgiDecoder, DataWithoutSpaceDetailsAndErrors) {
  const std::string s =
      "data:{\"index\":1,\"token\":{\"id\":13,\"text\":\"\\n\",\"logprob\":-0.5283203,\"special\":"
      "false},\"generated_text\":null,\"details\":null}\n\n"
      "data:{\"index\":2,\"token\":{\"id\":32072,\"text\":\"日本\",\"logprob\":-2.4394531,"
      "\"special\":false},\"generated_text\":null,\"details\":null}\n\n"
      "data:{\"index\":3,\"token\":{\"id\":2,\"text\":\"</"
      "s>\",\"logprob\":0,\"special\":true},\"generated_text\":\"\\n日本\",\"details\":{\"finish_"
      "reason\":\"eos_token\",\"generated_tokens\":3,\"input_length\":7,\"seed\":null}}\n\n"
      "data:{\"error\":\"Request failed during generation\",\"error_type\":\"generation\"}\n\n";
  EXPECT_EQ(decode(s, provider::tgi),
            "content=\n日本|reasoning=|tool=|finish(eos_token)error(generation,Request failed "
            "during generation)"
            "|in=7 out=3 reasoning=0 cached=-1 write=-1 cache_fields=0|provider=tgi");
}

}  // namespace
}  // namespace tokentap::parsers
