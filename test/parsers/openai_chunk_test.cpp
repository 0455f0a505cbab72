// openai_chunk_reader, the chat-chunk decoder's reader: it reads every valid chunk exactly as the
// simdjson walk (the oracle, set_fast_paths(false)) does, and refuses invalid JSON.  The
// generated-chunk test makes chunks — valid, odd and broken — and holds the decoder with and
// without the reader to the same calls in the same order on every valid one.
#include "parsers/openai_chunk.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include <simdjson.h>

#include "parsers/stream_decoder.hpp"
#include "test/support/decoder_transcript.hpp"
#include "test/support/json_keys.hpp"

namespace tokentap::parsers {
namespace {

using namespace std::string_literals;

std::string parts_of(std::string_view doc) {
  openai_chunk_reader r;
  if (!r.read(doc)) return "invalid";
  static constexpr std::string_view names[] = {"content", "reasoning", "tool", "finish"};
  std::string out;
  for (const auto& p : r.parts()) {
    out += names[static_cast<int>(p.what)];
    out += '(';
    out += p.text;
    out += ')';
  }
  return out;
}

std::string choices_of(std::string_view doc) {
  openai_chunk_reader r;
  if (!r.read(doc)) return "invalid";
  std::string out;
  for (const auto& p : r.parts()) out += std::to_string(p.choice) + ":" + std::string(p.text) + " ";
  return out;
}

std::string with_content(std::string_view raw_json_string_body) {
  return R"({"choices":[{"delta":{"content":")" + std::string(raw_json_string_body) + R"("}}]})";
}

TEST(OpenAIChunkReader, ReadsTheTextsOfAChunkInTheDecodersOrder) {
  EXPECT_EQ(
      parts_of(
          R"({"id":"chatcmpl-CVFjOTBIgA3kuQLnIXXxtg7Ge7hbs","object":"chat.completion.chunk","created":1761564674,"model":"gpt-3.5-turbo-0125","service_tier":"default","system_fingerprint":null,"choices":[{"index":0,"delta":{"content":" there"},"logprobs":null,"finish_reason":null}],"usage":null,"obfuscation":"Gpkah"})"),
      "content( there)");
  EXPECT_EQ(
      parts_of(
          R"({"choices":[{"delta":{"reasoning_content":"think","content":"say"},"finish_reason":"stop"},{"message":{"reasoning":"r2","tool_calls":[{"index":0,"function":{"name":"f","arguments":"{\"a\":1}"}}]},"text":"legacy"}]})"),
      R"(reasoning(think)content(say)finish(stop)reasoning(r2)content(legacy)tool({"a":1}))");
  // The order is the decoder's whatever the keys' order: `index` after the delta, finish
  // reason before it.
  EXPECT_EQ(
      parts_of(
          R"({"choices":[{"finish_reason":"stop","delta":{"content":"say","reasoning_content":"think"},"index":1}]})"),
      "reasoning(think)content(say)finish(stop)");
  EXPECT_EQ(
      choices_of(
          R"({"choices":[{"delta":{"content":"a"},"index":1},{"index":0,"delta":{"content":"b"}}]})"),
      "1:a 0:b ");
  // A key met twice: the last one wins, as in the walk.
  EXPECT_EQ(parts_of(R"({"choices":[{"delta":{"content":"a","content":"b"}}]})"), "content(b)");
  EXPECT_EQ(parts_of(R"({"choices":[{"delta":{"content":"a"},"delta":{"content":"b"}}]})"),
            "content(b)");
  EXPECT_EQ(parts_of(R"({"choices":[{"delta":{"content":"a"}}],"choices":[]})"), "");
  EXPECT_EQ(parts_of(R"({"choices":[{"delta":{"content":"a","content":null}}]})"), "");
  EXPECT_EQ(
      parts_of(
          R"({"choices":[{"delta":{"tool_calls":[{"function":{"arguments":"x"}}],"tool_calls":null}}]})"),
      "");
  // Both reasoning names: reasoning_content unless it is empty.
  EXPECT_EQ(parts_of(R"({"choices":[{"delta":{"reasoning":"a","reasoning_content":"b"}}]})"),
            "reasoning(b)");
  EXPECT_EQ(parts_of(R"({"choices":[{"delta":{"reasoning":"a","reasoning_content":""}}]})"),
            "reasoning(a)");
  // Arguments met twice in one function are both read.
  EXPECT_EQ(
      parts_of(
          R"({"choices":[{"delta":{"tool_calls":[{"function":{"arguments":"x","arguments":"y"}}]}}]})"),
      "tool(x)tool(y)");
  // Any index but an integer 0 .. 2^31-1 written as one is the decoder's choice 0.
  EXPECT_EQ(
      choices_of(
          R"({"choices":[{"index":-3,"delta":{"content":"a"}},{"index":"2","delta":{"content":"b"}},{"index":3000000000,"delta":{"content":"c"}},{"index":1.0,"delta":{"content":"d"}},{"index":1e0,"delta":{"content":"e"}},{"index":2147483647,"delta":{"content":"f"}}]})"),
      "0:a 0:b 0:c 0:d 0:e 2147483647:f ");
  // Empty and non-string texts are read as nothing, as the decoder reads them.
  EXPECT_EQ(
      parts_of(
          R"({"choices":[{"delta":{"content":"","reasoning":null,"tool_calls":[{"function":{"arguments":7}}]},"finish_reason":false}],"usage":null})"),
      "");
  // Other shapes where the decoder expects containers are skipped like any value.
  EXPECT_EQ(parts_of(R"({"choices":{"delta":{"content":"x"}},"x":[{"delta":{"content":"y"}}]})"),
            "");
  EXPECT_EQ(parts_of(R"({"choices":[1,"a",{"delta":"x"},{"delta":{"tool_calls":{"a":1}}}]})"), "");
  // JSON whitespace anywhere.
  EXPECT_EQ(parts_of(" \r\n\t{ \"choices\" :\n[ { \"delta\" : { \"content\" : \"x\" } } ] }\n "),
            "content(x)");
}

TEST(OpenAIChunkReader, UnescapesTextsAndKeepsEveryViewValid) {
  EXPECT_EQ(parts_of(with_content(R"(a\nb\"c\\d\/e\tf\b\f\r)")), "content(a\nb\"c\\d/e\tf\b\f\r)");
  EXPECT_EQ(parts_of(with_content(R"(\u00e9\u4e2d\ud83d\ude00\u0000!)")),
            "content(\xC3\xA9\xE4\xB8\xAD\xF0\x9F\x98\x80\0!)"s);
  EXPECT_EQ(
      parts_of(
          R"({"choices":[{"delta":{"content":"a\nb"}},{"delta":{"content":"plain"}},{"delta":{"content":"\u4e2d\"","reasoning":"\\"}}]})"),
      "content(a\nb)content(plain)reasoning(\\)content(\xE4\xB8\xAD\")");
}

TEST(OpenAIChunkReader, AcceptsWellFormedUtf8AndDeclinesTheRest) {
  EXPECT_EQ(parts_of(with_content("首先，Wait")), "content(首先，Wait)");
  EXPECT_EQ(parts_of(with_content("\xF0\x9F\x98\x80 \xF4\x8F\xBF\xBF \xEE\x80\x80 \xC2\x80")),
            "content(\xF0\x9F\x98\x80 \xF4\x8F\xBF\xBF \xEE\x80\x80 \xC2\x80)");
  for (const char* bad : {"\xC0\x80", "\xC1\xBF", "\xE0\x80\x80", "\xED\xA0\x80",
                          "\xF0\x80\x80\x80", "\xF4\x90\x80\x80", "\xF5\x80\x80\x80", "\x80",
                          "\xBF", "\xE4\xB8", "\xFF", "\xFE", "\xE4\xB8x"}) {
    EXPECT_EQ(parts_of(with_content(bad)), "invalid") << testing::PrintToString(bad);
    EXPECT_EQ(parts_of(R"({"id":")" + std::string(bad) + R"(","choices":[]})"), "invalid");
  }
  EXPECT_EQ(parts_of("{\"k\xFF\":1}"), "invalid");
}

// What the reader says besides texts, as one line.
std::string facts_of(std::string_view doc) {
  openai_chunk_reader r;
  if (!r.read(doc)) return "invalid";
  const auto& f = r.chunk_facts();
  std::string out;
  const auto count = [&](const char* name, const std::optional<std::int64_t>& v) {
    if (v) out += std::string(name) + "=" + std::to_string(*v) + " ";
  };
  count("prompt", f.usage.prompt);
  count("completion", f.usage.completion);
  count("reasoning", f.usage.reasoning);
  count("cached", f.usage.cached);
  if (f.timings) out += "timings ";
  count("prompt_n", f.prompt_n);
  count("cache_n", f.cache_n);
  count("predicted_n", f.predicted_n);
  count("tokens_cached", f.tokens_cached);
  if (f.error)
    out += "error(" + std::string(f.error_type) + "," + std::string(f.error_message) + ") ";
  if (!f.top_content.empty()) out += "content(" + std::string(f.top_content) + ") ";
  if (!f.stop_type.empty()) out += "stop_type(" + std::string(f.stop_type) + ") ";
  EXPECT_TRUE(r.has_facts() || out.empty());
  return out;
}

TEST(OpenAIChunkReader, ReadsWhatTheDecoderReadsBesidesTexts) {
  EXPECT_EQ(
      facts_of(
          R"({"choices":[],"usage":{"prompt_tokens":12,"completion_tokens":3,"total_tokens":15,"prompt_tokens_details":{"cached_tokens":8,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":2}}})"),
      "prompt=12 completion=3 reasoning=2 cached=8 ");
  // DeepSeek sends both; OpenAI's field wins when it is a count.
  EXPECT_EQ(facts_of(R"({"usage":{"prompt_cache_hit_tokens":5}})"), "cached=5 ");
  EXPECT_EQ(
      facts_of(
          R"({"usage":{"prompt_cache_hit_tokens":5,"prompt_tokens_details":{"cached_tokens":4}}})"),
      "cached=4 ");
  EXPECT_EQ(
      facts_of(
          R"({"usage":{"prompt_cache_hit_tokens":5,"prompt_tokens_details":{"cached_tokens":null}}})"),
      "cached=5 ");
  // Counts as the decoder takes them: a float truncated, anything else -1.
  EXPECT_EQ(facts_of(R"({"usage":{"prompt_tokens":12.9,"completion_tokens":"3"}})"),
            "prompt=12 completion=-1 ");
  EXPECT_EQ(facts_of(R"({"usage":{"prompt_tokens":-4,"completion_tokens":1e3}})"),
            "prompt=-4 completion=1000 ");
  EXPECT_EQ(facts_of(R"({"usage":{"prompt_tokens":4.2e24,"completion_tokens":-0.5}})"),
            "prompt=-1 completion=-1 ");
  EXPECT_EQ(
      facts_of(R"({"usage":{"prompt_tokens":99999999999999999999,"completion_tokens":1e-400}})"),
      "prompt=-1 completion=0 ");
  EXPECT_EQ(facts_of(R"({"usage":{"prompt_tokens":9223372036854775807}})"),
            "prompt=9223372036854775807 ");
  // usage met twice: each key's last value.
  EXPECT_EQ(
      facts_of(
          R"({"usage":{"prompt_tokens":1,"completion_tokens":2},"usage":{"prompt_tokens":3}})"),
      "prompt=3 completion=2 ");
  EXPECT_EQ(facts_of(R"({"choices":[],"usage":null})"), "");
  EXPECT_EQ(facts_of(R"({"choices":[],"usage":0})"), "");
  EXPECT_EQ(facts_of(R"({"error":{"message":"x","type":"overloaded_error","code":503}})"),
            "error(overloaded_error,x) ");
  EXPECT_EQ(facts_of(R"({"error":{"message":"x","code":"rate_limit"}})"), "error(rate_limit,x) ");
  EXPECT_EQ(facts_of(R"({"error":"boom"})"), "error(,boom) ");
  EXPECT_EQ(facts_of(R"({"error":null})"), "");
  EXPECT_EQ(facts_of(R"({"error":"boom","error":null})"), "");
  EXPECT_EQ(facts_of(R"({"timings":{}})"), "timings ");
  EXPECT_EQ(facts_of(R"({"timings":null})"), "timings ");
  EXPECT_EQ(facts_of(R"({"timings":{"prompt_n":10,"cache_n":7,"predicted_n":3,"x":1}})"),
            "timings prompt_n=10 cache_n=7 predicted_n=3 ");
  EXPECT_EQ(facts_of(R"({"tokens_cached":3})"), "tokens_cached=3 ");
  EXPECT_EQ(facts_of(R"({"content":"tok","stop_type":"none","stop":false})"),
            "content(tok) stop_type(none) ");
  // Keys are unescaped.
  EXPECT_EQ(parts_of(R"({"ch\u006fices":[{"delta":{"c\u006fntent":"x"}}]})"), "content(x)");
  EXPECT_EQ(parts_of(R"({"a\"b":1})"), "");
  // Surrogate escapes in a text only as a proper pair; a skipped string is only validated.
  for (const char* bad : {R"(\ud800)", R"(\udc00)", R"(\ud800\u0041)", R"(\ud800x)",
                          R"(\ud800\ud800)", R"(\udbff\ue000)"})
    EXPECT_EQ(parts_of(with_content(bad)), "invalid") << bad;
  EXPECT_EQ(parts_of(R"({"id":"\ud800","choices":[]})"), "");
  // Any number of texts.
  std::string doc = R"({"choices":[)";
  std::string twenty;
  for (std::size_t i = 0; i < 20; ++i) {
    doc += (i ? "," : "") + std::string(R"({"delta":{"content":"x"}})");
    twenty += "content(x)";
  }
  EXPECT_EQ(parts_of(doc + "]}"), twenty);
  // Nesting: the root is depth 1, a container in it depth 2, ... up to max_depth.
  const auto nested = [](int depth) {
    return R"({"x":)" + std::string(static_cast<std::size_t>(depth - 1), '[') +
           std::string(static_cast<std::size_t>(depth - 1), ']') + "}";
  };
  EXPECT_EQ(parts_of(nested(openai_chunk_reader::max_depth)), "");
  EXPECT_EQ(parts_of(nested(openai_chunk_reader::max_depth + 1)), "invalid");
}

TEST(OpenAIChunkReader, AcceptsStrictJsonOnly) {
  EXPECT_EQ(parts_of(R"({"a":-0.5e+10,"b":0,"c":1E5,"d":-12.25E-3,"e":[true,false,null,{},[]]})"),
            "");
  for (const char* bad : {R"({"a":1,})",
                          R"({"a" 1})",
                          R"({a:1})",
                          R"({"a":01})",
                          R"({"a":1.})",
                          R"({"a":-})",
                          R"({"a":1e})",
                          R"({"a":+1})",
                          R"({"a":.5})",
                          R"({"a":tru})",
                          R"({"a":nul})",
                          R"({"a":truex})",
                          R"({"a":"x"} x)",
                          R"({"a":1}{"b":2})",
                          "{\"a\":\"tab\there\"}",
                          R"({'a':1})",
                          R"({"a":NaN})",
                          R"({"a":[1,]})",
                          R"({"a":[1 2]})",
                          R"([1])",
                          "",
                          "   ",
                          R"({"a":"x)",
                          R"({"a":"\x"})",
                          R"({"a":"\u12G4"})",
                          R"({"a":"\u12"})",
                          R"({"a":)",
                          R"({"a")",
                          R"({)",
                          R"({"a":[)",
                          R"({"a":{"b":1})",
                          "{\"a\":1}\x01",
                          R"({"a":1]})",
                          R"({"a":1 "b":2})",
                          R"({,"a":1})",
                          R"({"a"::1})"})
    EXPECT_EQ(parts_of(bad), "invalid") << bad;
}

// ---- differential: the decoder with and without the fast path

// Chunk-shaped documents from random pieces: the fields the decoder reads, in random order and
// number, with values of every JSON type, escapes, multi-byte and broken UTF-8, whitespace, and
// now and then a byte inserted, dropped or replaced.
class chunk_maker {
 public:
  explicit chunk_maker(unsigned seed) : rng_(seed) {}

  // Texts as JSON strings: mostly well formed (escapes, think tags, multi-byte), now and then
  // with a piece the reader must decline.
  std::string text() {
    static constexpr const char* good[] = {"Hi",
                                           "",
                                           " there",
                                           "First,",
                                           "a\\nb",
                                           "q\\\"uote",
                                           "back\\\\slash",
                                           "\\/",
                                           "\\u00e9",
                                           "\\ud83d\\ude00",
                                           "首先",
                                           "tab\\t",
                                           "<think>",
                                           "</think>",
                                           "<thi",
                                           "\\u0000",
                                           "\xF0\x9F\x98\x80",
                                           "\\\\u0041",
                                           "\\u003cthink\\u003e"};
    static constexpr const char* bad[] = {"\\ud800", "\\udc00x", "\xE4\xB8", "\xC0\x80",
                                          "\\x",     "ctl\x01",  "\\u12"};
    std::string s = "\"";
    for (int n = 1 + pick(2); n > 0; --n)
      s += pick(12) ? good[pick(static_cast<int>(std::size(good)))]
                    : bad[pick(static_cast<int>(std::size(bad)))];
    return s + "\"";
  }

  std::string document() {
    std::vector<std::pair<std::string, std::string>> f;
    const int n = pick(6);
    for (int i = 0; i < n; ++i) {
      switch (pick(16)) {
        case 0:
          f.emplace_back("id", text());
          break;
        case 1:
          f.emplace_back("object", R"("chat.completion.chunk")");
          break;
        case 2:
          f.emplace_back("created", "1761564674");
          break;
        case 3:
          f.emplace_back("usage",
                         pick(6) ? "null" : R"({"prompt_tokens":3,"completion_tokens":4})");
          break;
        case 4:
          f.emplace_back(pick(2) ? "error" : pick(2) ? "timings" : "tokens_cached", scalar());
          break;
        case 5:
          f.emplace_back("x", scalar());
          break;
        default:
          f.emplace_back("choices", pick(8) ? choices() : scalar());
          break;
      }
    }
    std::string d = ws() + object(f) + ws();
    if (pick(6) == 0) mutate(d);
    return d;
  }

 private:
  int pick(int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng_); }

  std::string ws() {
    static constexpr const char* w[] = {"", "", "", "", " ", "\n", " \t\r\n "};
    return w[pick(7)];
  }

  std::string field(std::string_view key, const std::string& value) {
    return ws() + "\"" + std::string(key) + "\"" + ws() + ":" + ws() + value + ws();
  }

  std::string scalar() {
    static constexpr const char* good[] = {
        "null",  "true", "false", "0",     "-1.5e3",         "12",
        "\"s\"", "{}",   "[]",    "[1,2]", "{\"a\":[null]}", "{\"content\":\"z\"}"};
    static constexpr const char* bad[] = {"01", "nul", "1.", "[1,]"};
    return pick(10) ? good[pick(static_cast<int>(std::size(good)))]
                    : bad[pick(static_cast<int>(std::size(bad)))];
  }

  std::string textish() { return pick(5) ? text() : scalar(); }

  std::string choices() {
    std::string c = "[" + ws();
    for (int n = pick(4), i = 0; i < n; ++i) c += (i ? "," : "") + (pick(8) ? choice() : scalar());
    return c + ws() + "]";
  }

  // Joins an object's fields; a key met again is dropped 7 times in 8 (repeated keys are the
  // slow path's: both paths must still agree on them, but mostly the fast path is exercised).
  std::string object(const std::vector<std::pair<std::string, std::string>>& fields) {
    std::string o = "{";
    std::vector<std::string> seen;
    for (const auto& [key, value] : fields) {
      const bool again = std::find(seen.begin(), seen.end(), key) != seen.end();
      if (again && pick(8)) continue;
      seen.push_back(key);
      o += (o.size() > 1 ? "," : "") + field(key, value);
    }
    return o + "}";
  }

  std::string index() {
    static constexpr const char* odd[] = {"7",     "-1",   "1.5",        "1e1",
                                          "\"1\"", "null", "3000000000", "99999999999999999999"};
    return pick(8) ? std::to_string(pick(3)) : odd[pick(static_cast<int>(std::size(odd)))];
  }

  std::string choice() {
    std::vector<std::pair<std::string, std::string>> f;
    for (int n = pick(5), i = 0; i < n; ++i) {
      switch (pick(7)) {
        case 0:
          f.emplace_back("index", index());
          break;
        case 1:
          f.emplace_back("text", textish());
          break;
        case 2:
          f.emplace_back("finish_reason", pick(2) ? "null" : textish());
          break;
        case 3:
          f.emplace_back("logprobs", scalar());
          break;
        default:
          f.emplace_back(pick(4) ? "delta" : "message", pick(8) ? delta() : scalar());
          break;
      }
    }
    return object(f);
  }

  std::string delta() {
    std::vector<std::pair<std::string, std::string>> f;
    // One of the two reasoning names per delta, mostly (both: the slow path's).
    const bool vllm = pick(2) != 0;
    for (int n = pick(4), i = 0; i < n; ++i) {
      switch (pick(6)) {
        case 0:
          f.emplace_back("role", "\"assistant\"");
          break;
        case 1:
          f.emplace_back((pick(8) ? vllm : pick(2) != 0) ? "reasoning" : "reasoning_content",
                         textish());
          break;
        case 2:
          f.emplace_back("tool_calls", pick(6) ? tool_calls() : scalar());
          break;
        default:
          f.emplace_back("content", textish());
          break;
      }
    }
    return object(f);
  }

  std::string tool_calls() {
    std::string t = "[";
    for (int n = pick(3), i = 0; i < n; ++i) {
      if (i) t += ",";
      t += "{" + field("index", "0") + "," +
           field("function",
                 pick(6) ? "{" + field("name", "\"f\"") + "," + field("arguments", textish()) + "}"
                         : scalar()) +
           "}";
    }
    return t + "]";
  }

  void mutate(std::string& d) {
    static constexpr char bytes[] = {'{',  '}', '[', ']', '"',    ',',   ':',
                                     '\\', ' ', 'x', '0', '\x80', '\xE4'};
    const auto at = static_cast<std::size_t>(pick(static_cast<int>(d.size()) + 1));
    const char b = bytes[pick(static_cast<int>(std::size(bytes)))];
    switch (pick(3)) {
      case 0:
        d.insert(d.begin() + static_cast<std::ptrdiff_t>(at), b);
        break;
      case 1:
        if (at < d.size()) d.erase(at, 1);
        break;
      default:
        if (at < d.size()) d[at] = b;
        break;
    }
  }

  std::mt19937 rng_;
};

// simdjson's full validation (its DOM parser: every value, not only those a walk visits).
bool valid_json(std::string_view doc) {
  static simdjson::dom::parser parser;
  simdjson::dom::element root;
  return !parser.parse(simdjson::padded_string(doc)).get(root);
}

std::string decode_once(std::string_view doc, bool fast_paths) {
  stream_decoder d(provider::openai_chat, "application/json");
  d.set_fast_paths(fast_paths);
  test::decoder_transcript t;
  d.feed(doc, 0, t);
  d.finish(0, t);
  EXPECT_FALSE(t.empty_token);
  return t.describe(d) + "\n" + t.sequence;
}

TEST(OpenAIChunkReader, DecoderReadsGeneratedChunksTheSameWithAndWithoutIt) {
  chunk_maker make(20261130);
  openai_chunk_reader reader;
  int accepted = 0, declined = 0, with_text = 0, valid = 0;
  constexpr int documents = 30000;
  for (int i = 0; i < documents; ++i) {
    const auto doc = make.document();
    if (reader.read(doc)) {
      ++accepted;
      with_text += reader.parts().empty() ? 0 : 1;
    } else {
      ++declined;
    }
    // Every document simdjson's full validation takes for valid JSON is valid to the reader.
    if (valid_json(doc)) {
      ++valid;
      ASSERT_TRUE(reader.read(doc)) << "document #" << i << ": " << doc;
    }
    const auto fast = decode_once(doc, true);
    const auto reference = decode_once(doc, false);
    ASSERT_EQ(fast, reference) << "document #" << i << ": " << doc;
    // The same document with its keys in another order reads the same, on both paths.
    const auto reordered = test::reorder_keys(doc, test::key_order::shuffled, i);
    ASSERT_EQ(decode_once(reordered, true), fast) << "document #" << i << ": " << reordered;
    ASSERT_EQ(decode_once(reordered, false), fast) << "document #" << i << ": " << reordered;
  }
  // The generator exercises both sides of the fast path.
  std::printf("generated chunks: %d read (%d with texts), %d invalid (%d valid to simdjson)\n",
              accepted, with_text, declined, valid);
  EXPECT_GT(accepted, documents * 3 / 10);
  EXPECT_GT(with_text, documents / 10);
  EXPECT_GT(declined, documents * 15 / 100);
}

// ---- a stream's chunks read by their shape

std::string parts_of(const openai_chunk_reader& r) {
  std::string out;
  for (const auto& p : r.parts()) out += std::to_string(static_cast<int>(p.what)) + ":" += p.text;
  return out;
}

TEST(OpenAIChunkReader, AChunkShapedLikeTheLastIsReadByItsText) {
  const auto chunk = [](std::string_view body) {
    return R"({"id":"c1","model":"m","choices":[{"index":0,"delta":{"content":")" +
           std::string(body) + R"("},"logprobs":null,"finish_reason":null}]})";
  };
  openai_chunk_reader r, alone;
  openai_chunk_reader::shape shape;
  EXPECT_TRUE(shape.empty());
  ASSERT_TRUE(r.read(chunk("Hello"), &shape));
  EXPECT_FALSE(shape.empty());
  EXPECT_EQ(r.shaped_reads(), 0u);
  // Texts may point into the document: each one outlives the parts read from it.
  for (const std::string_view body : {" world", "", "q\\\"uote \\u00e9", "首先"}) {
    const std::string doc = chunk(body);
    ASSERT_TRUE(r.read(doc, &shape)) << body;
    ASSERT_TRUE(alone.read(doc));
    EXPECT_EQ(parts_of(r), parts_of(alone)) << body;
  }
  EXPECT_EQ(r.shaped_reads(), 4u);
  EXPECT_EQ(alone.shaped_reads(), 0u);
  const std::string escaped = chunk("a\\nb");
  ASSERT_TRUE(r.read(escaped, &shape));
  EXPECT_EQ(parts_of(r), "0:a\nb");
  // A string that closes before the last one did, or not at all, or breaks the rules: the
  // document is read in full (two texts; invalid: declined).
  const std::string two = chunk(R"(a","reasoning_content":"b)");
  ASSERT_TRUE(r.read(two, &shape));
  EXPECT_EQ(parts_of(r), "1:b0:a");
  EXPECT_FALSE(r.read(chunk(R"(a"}]})"), &shape));
  EXPECT_FALSE(r.read(chunk("\\ud800"), &shape));
  EXPECT_FALSE(r.read(chunk("ctl\x01"), &shape));
  EXPECT_FALSE(r.read(chunk("\xE4\xB8"), &shape));
  EXPECT_EQ(r.shaped_reads(), 5u);
  // Other bytes around the text: read in full, and the new shape is that chunk's.
  const std::string other = R"({"choices":[{"delta":{"reasoning_content":"x"}}]})";
  ASSERT_TRUE(r.read(other, &shape));
  EXPECT_EQ(parts_of(r), "1:x");
  ASSERT_TRUE(r.read(R"({"choices":[{"delta":{"reasoning_content":"yz"}}]})", &shape));
  EXPECT_EQ(parts_of(r), "1:yz");
  EXPECT_EQ(r.shaped_reads(), 6u);
  // A chunk with two string texts leaves no shape of its own (the last one stays).
  ASSERT_TRUE(r.read(R"({"choices":[{"delta":{"content":"a"},"finish_reason":"stop"}]})", &shape));
  ASSERT_TRUE(r.read(R"({"choices":[{"delta":{"reasoning_content":""}}]})", &shape));
  EXPECT_EQ(parts_of(r), "");
  EXPECT_EQ(r.shaped_reads(), 7u);
}

// Streams of chunks that share the bytes around one string, now and then with another string or
// a mutated byte anywhere: read with the stream's shape, each reads exactly as it does alone.
TEST(OpenAIChunkReader, ShapedReadsAreTheReadsOfTheChunkAlone) {
  chunk_maker make(20261201);
  std::mt19937 rng(7);
  const auto pick = [&](int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng); };
  // The bytes before and after the string: chunk shapes, and one pair that never fits.
  static constexpr std::pair<std::string_view, std::string_view> shapes[] = {
      {R"({"id":"c","choices":[{"index":0,"delta":{"content":)", R"(},"finish_reason":null}]})"},
      {R"( { "choices" : [ { "delta" : { "reasoning" :  )", R"( } } ] }  )"},
      {R"({"choices":[{"delta":{"tool_calls":[{"function":{"arguments":)", R"(}}]}}]})"},
      {R"({"choices":[{"text":)", R"(}],"usage":null})"},
      {R"({"choices":[{"delta":{},"finish_reason":)", R"(}]})"},
      {R"({"id":)", R"(,"choices":[{"delta":{"content":"z"}}]})"},
      {R"({"choices":[{"delta":{"content":"a","reasoning_content":)", R"(}}],"x":[1,{"y":"z"}]})"},
      {R"({"choices":[{"delta":{"content":)", R"(}]})"}};
  openai_chunk_reader shaped, alone;
  openai_chunk_reader::shape shape;
  std::size_t which = 0;
  int accepted = 0;
  constexpr int documents = 40000;
  for (int i = 0; i < documents; ++i) {
    if (pick(40) == 0) which = static_cast<std::size_t>(pick(static_cast<int>(std::size(shapes))));
    std::string doc =
        std::string(shapes[which].first) + make.text() + std::string(shapes[which].second);
    if (pick(30) == 0) doc = make.document();
    if (pick(30) == 0 && !doc.empty())
      doc[static_cast<std::size_t>(pick(static_cast<int>(doc.size())))] = "\"{}:,x\x80"[pick(7)];
    const bool ok = shaped.read(doc, &shape);
    ASSERT_EQ(ok, alone.read(doc)) << "document #" << i << ": " << doc;
    if (!ok) continue;
    ++accepted;
    ASSERT_EQ(parts_of(shaped), parts_of(alone)) << "document #" << i << ": " << doc;
  }
  std::printf("shaped chunks: %d of %d read, %llu by their shape\n", accepted, documents,
              static_cast<unsigned long long>(shaped.shaped_reads()));
  EXPECT_GT(shaped.shaped_reads(), static_cast<std::uint64_t>(documents / 2));
  EXPECT_LT(accepted, documents * 95 / 100);
  EXPECT_LT(static_cast<int>(shaped.shaped_reads()), accepted);
}

}  // namespace
}  // namespace tokentap::parsers
