// The OTLP encodings written by hand: the protobuf body decoded by Google's protoc with the
// official .proto files, the JSON body read back with simdjson (ids as hex, enums as integers,
// 64-bit integers as strings), and the gzip member inflated by gzip(1).
#include "hooks/export/otlp.hpp"

#include <gtest/gtest.h>
#include <simdjson.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <unistd.h>

namespace tokentap::hooks {
namespace {

namespace fs = std::filesystem;

const std::string proto_dir =
    std::string(TOKENTAP_SOURCE_DIR) + "/test/node/node_modules/@elastic/mockotlpserver";

// Runs `command` with `input` on its stdin (through a file); returns {status, stdout+stderr}.
std::pair<int, std::string> run_with_input(const std::string& command, const std::string& input) {
  const auto in = fs::temp_directory_path() / ("otlp-test-" + std::to_string(::getpid()) + ".bin");
  std::ofstream(in, std::ios::binary) << input;
  FILE* f = popen((command + " < " + in.string() + " 2>&1").c_str(), "r");
  std::string out;
  char buf[4096];
  while (const auto n = fread(buf, 1, sizeof buf, f)) out.append(buf, n);
  const int status = pclose(f);
  fs::remove(in);
  return {status, out};
}

struct two_spans {
  two_spans() {
    resource.attributes = {{"service.name", std::string("tokentap")}};
    resource.scope_name = "tokentap";
    resource.scope_version = "1.2.3";
    spans.reserve(2);  // (the client span is copied from the server span's element)
    auto& server = spans.emplace_back();
    for (std::uint8_t i = 0; i < 16; ++i) server.trace_id[i] = static_cast<std::uint8_t>(i + 1);
    server.span_id = {0xa1, 0xa2, 0xa3, 0xa4, 0xa5, 0xa6, 0xa7, 0xa8};
    server.name = "POST /v1/chat/completions";
    server.kind = otel_kind::server;
    server.start_unix_nano = 1'700'000'000'000'000'000u;
    server.end_unix_nano = 1'700'000'000'250'000'000u;
    server.attributes = {{"gen_ai.usage.input_tokens", std::int64_t{12}},
                         {"tokentap.ttft_ms", 41.5},
                         {"tokentap.cache_hit", true},
                         {"gen_ai.response.finish_reasons", std::vector<std::string>{"stop"}}};
    server.events = {
        {1'700'000'000'041'500'000u, "first_token", {{"channel", std::string("content")}}}};
    server.status = otel_status::error;
    server.status_message = "upstream_reset";
    auto& client = spans.emplace_back(server);
    client.span_id = {0xb1, 0xb2, 0xb3, 0xb4, 0xb5, 0xb6, 0xb7, 0xb8};
    client.parent_span_id = server.span_id;
    client.kind = otel_kind::client;
    client.flags = 0x01 | otel_has_is_remote;
    client.events.clear();
    client.status = otel_status::unset;
    client.status_message.clear();
  }
  otel_resource resource;
  std::vector<otel_span> spans;
};

TEST(Otlp, IdsAreLowercaseHex) {
  const std::uint8_t id[] = {0x00, 0x0f, 0xa0, 0xff};
  EXPECT_EQ(to_hex(id), "000fa0ff");
}

TEST(Otlp, TheProtobufBodyIsWhatProtocDecodesWithTheOfficialProtoFiles) {
  if (!fs::exists(proto_dir)) GTEST_SKIP() << "no .proto files: run npm ci in test/node";
  const two_spans t;
  const auto [status, decoded] = run_with_input(
      "protoc --decode=opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest -I " +
          proto_dir + " opentelemetry/proto/collector/trace/v1/trace_service.proto",
      otlp_protobuf(t.resource, t.spans));
  ASSERT_EQ(status, 0) << decoded;
  for (const char* expected :
       {"string_value: \"tokentap\"", "name: \"tokentap\"\n      version: \"1.2.3\"",
        "trace_id: \"\\001\\002\\003\\004\\005\\006\\007\\010\\t\\n\\013\\014\\r\\016\\017\\020\"",
        "name: \"POST /v1/chat/completions\"", "kind: SPAN_KIND_SERVER", "kind: SPAN_KIND_CLIENT",
        "start_time_unix_nano: 1700000000000000000", "end_time_unix_nano: 1700000000250000000",
        "key: \"gen_ai.usage.input_tokens\"\n        value {\n          int_value: 12",
        "double_value: 41.5", "bool_value: true",
        "array_value {\n            values {\n              string_value: \"stop\"",
        "time_unix_nano: 1700000000041500000\n        name: \"first_token\"",
        "message: \"upstream_reset\"\n        code: STATUS_CODE_ERROR", "flags: 257"})
    EXPECT_NE(decoded.find(expected), std::string::npos) << expected << "\n" << decoded;
  // The client span names its parent; the root has none.
  EXPECT_NE(decoded.find("parent_span_id: \"\\241\\242\\243\\244\\245\\246\\247\\250\""),
            std::string::npos)
      << decoded;
}

TEST(Otlp, TheJsonBodyWritesIdsAsHexEnumsAsIntegersAndLongIntegersAsStrings) {
  const two_spans t;
  const simdjson::padded_string json(otlp_json(t.resource, t.spans));
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  ASSERT_FALSE(parser.parse(json).get(doc)) << json;
  const auto scope = doc["resourceSpans"].at(0)["scopeSpans"].at(0);
  EXPECT_EQ(scope["scope"]["version"].get_string().value(), "1.2.3");
  const auto server = scope["spans"].at(0);
  EXPECT_EQ(server["traceId"].get_string().value(), "0102030405060708090a0b0c0d0e0f10");
  EXPECT_EQ(server["spanId"].get_string().value(), "a1a2a3a4a5a6a7a8");
  EXPECT_EQ(server["kind"].get_int64().value(), 2);
  EXPECT_EQ(server["startTimeUnixNano"].get_string().value(), "1700000000000000000");
  EXPECT_EQ(server["attributes"].at(0)["value"]["intValue"].get_string().value(), "12");
  EXPECT_EQ(server["status"]["code"].get_int64().value(), 2);
  const auto client = scope["spans"].at(1);
  EXPECT_EQ(client["parentSpanId"].get_string().value(), "a1a2a3a4a5a6a7a8");
  EXPECT_EQ(client["kind"].get_int64().value(), 3);
}

TEST(Otlp, TheGzipMemberInflatesToTheBody) {
  const two_spans t;
  const auto body = otlp_protobuf(t.resource, t.spans);
  const auto gz = otlp_gzip(body);
  ASSERT_TRUE(gz);
  ASSERT_GE(gz->size(), 18u);
  EXPECT_EQ(static_cast<unsigned char>((*gz)[0]), 0x1f);
  EXPECT_EQ(static_cast<unsigned char>((*gz)[1]), 0x8b);
  const auto [status, inflated] = run_with_input("gzip -dc", *gz);
  EXPECT_EQ(status, 0);
  EXPECT_EQ(inflated, body);
}

}  // namespace
}  // namespace tokentap::hooks
