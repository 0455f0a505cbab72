// The body-framing decoder the relay loop uses (chunked, Content-Length, until close), each input
// fed whole, split at every byte offset, byte by byte and in random chunks.
#include "parsers/http_body.hpp"

#include <gtest/gtest.h>

#include <string>

#include "test/support/chunking.hpp"

namespace tokentap::parsers {
namespace {

using namespace std::string_literals;

const char* to_string(http_body_decoder::error e) {
  switch (e) {
    case http_body_decoder::error::none: return "none";
    case http_body_decoder::error::bad_chunk: return "bad_chunk";
    case http_body_decoder::error::line_too_long: return "line_too_long";
    case http_body_decoder::error::trailers_too_long: return "trailers_too_long";
  }
  return "?";
}

// Feeds the chunks (each copied into its own buffer, decoded in place), then closes if asked.
// Transcript: the payload, then done / error / extra / what closing said.
std::string run(http_body_decoder d, const std::vector<std::string_view>& chunks, bool close) {
  std::string payload;
  for (auto c : chunks) {
    std::string buf(c);
    payload.append(buf.data(), d.decode(buf.data(), buf.size()));
  }
  std::string out = "payload=" + payload + " done=" + std::to_string(d.done()) +
                    " error=" + to_string(d.failed()) + " extra=" + std::to_string(d.extra());
  if (close) {
    const bool ok = d.close();
    out += " close=" + std::to_string(ok) + " error=" + to_string(d.failed());
  }
  return out;
}

std::string grind(http_body_decoder d, std::string_view input, bool close = false) {
  return test::grind(input, [&](const auto& chunks) { return run(d, chunks, close); });
}

TEST(HttpBody, ChunkedBodyIsDecodedWhateverTheReads) {
  EXPECT_EQ(grind(http_body_decoder::chunked(),
                  "5\r\nhello\r\n19\r\n data: {\"a\":\"\\r\\n\"}\n\n0123\r\n0\r\n\r\n"),
            "payload=hello data: {\"a\":\"\\r\\n\"}\n\n0123 done=1 error=none extra=0");
  // Upper and lower case hex, leading zeros, extensions, trailer fields.
  EXPECT_EQ(grind(http_body_decoder::chunked(),
                  "00a;name=\"v;x\"\r\n0123456789\r\nD ; ext\r\n\r\n\r\nabcdefghi\r\n"
                  "0;last\r\nX-Trailer: 1\r\nY: two words\r\n\r\n"),
            "payload=0123456789\r\n\r\nabcdefghi done=1 error=none extra=0");
}

TEST(HttpBody, BytesAfterTheLastChunkAreNotPayload) {
  EXPECT_EQ(grind(http_body_decoder::chunked(), "3\r\nabc\r\n0\r\n\r\nHTTP/1.1 200 OK\r\n"),
            "payload=abc done=1 error=none extra=1");
}

TEST(HttpBody, InvalidChunkFramingStopsAfterTheValidPayload) {
  // Not a size; bare LF after the size; no CRLF after the data; a control byte in an extension;
  // 17 hex digits; LF without CR in a trailer.
  for (const auto* bad : {"3\r\nabc\r\nzz\r\nmore\r\n", "3\nabc\r\n0\r\n\r\n",
                          "3\r\nabc\r\n3\r\ndefX\r\n0\r\n\r\n", "3;a\x01\r\nabc\r\n",
                          "00000000000000003\r\nabc\r\n", "3\r\nabc\r\n0\r\nX: 1\n\r\n"}) {
    const auto got = grind(http_body_decoder::chunked(), bad);
    EXPECT_NE(got.find("error=bad_chunk"), std::string::npos) << bad << " -> " << got;
    EXPECT_TRUE(got.starts_with("payload=abc") || got.starts_with("payload= "))
        << bad << " -> " << got;
  }
  EXPECT_EQ(grind(http_body_decoder::chunked(), "3\r\nabc\r\n3\r\ndefX\r\n0\r\n\r\n"),
            "payload=abcdef done=0 error=bad_chunk extra=0");
}

TEST(HttpBody, SizeLinesAndTrailersAreBounded) {
  const std::string long_ext = "1;" + std::string(http_body_decoder::max_line, 'x') + "\r\na\r\n";
  EXPECT_EQ(run(http_body_decoder::chunked(), {long_ext}, false),
            "payload= done=0 error=line_too_long extra=0");
  const std::string long_trailers =
      "0\r\n" + std::string(http_body_decoder::max_trailers / 2, 'x') + "\r\n" +
      std::string(http_body_decoder::max_trailers / 2, 'y') + "\r\n\r\n";
  EXPECT_EQ(run(http_body_decoder::chunked(), {long_trailers}, false),
            "payload= done=0 error=trailers_too_long extra=0");
}

TEST(HttpBody, ContentLengthBody) {
  EXPECT_EQ(grind(http_body_decoder::length(11), "hello world"),
            "payload=hello world done=1 error=none extra=0");
  EXPECT_EQ(grind(http_body_decoder::length(5), "hello world"),
            "payload=hello done=1 error=none extra=1");
  EXPECT_EQ(run(http_body_decoder::length(0), {}, false), "payload= done=1 error=none extra=0");
}

TEST(HttpBody, ClosingCutsChunkedAndContentLengthBodiesShortButEndsAnUntilCloseBody) {
  EXPECT_EQ(grind(http_body_decoder::chunked(), "5\r\nhello\r\n", true),
            "payload=hello done=0 error=none extra=0 close=0 error=bad_chunk");
  EXPECT_EQ(grind(http_body_decoder::chunked(), "5\r\nhello\r\n0\r\n\r\n", true),
            "payload=hello done=1 error=none extra=0 close=1 error=none");
  EXPECT_EQ(grind(http_body_decoder::length(20), "hello world", true),
            "payload=hello world done=0 error=none extra=0 close=0 error=bad_chunk");
  EXPECT_EQ(grind(http_body_decoder::until_close(), "data: x\n\n0\r\n\r\nanything", true),
            "payload=data: x\n\n0\r\n\r\nanything done=0 error=none extra=0 close=1 error=none");
}

}  // namespace
}  // namespace tokentap::parsers
