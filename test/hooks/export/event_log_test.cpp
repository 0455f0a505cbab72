// event_log: what goes in comes out, in order, across chunks; a read that shares bytes with the
// last one is stored as its difference and comes back whole.
#include "hooks/export/event_log.hpp"

#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "hooks/export/trace_writer.hpp"
#include "parsers/stream_decoder.hpp"
#include "test/support/alloc_count.hpp"
#include "test/support/decoder_transcript.hpp"

namespace tokentap::hooks {
namespace {

std::string random_bytes(std::mt19937& rng, std::size_t n) {
  std::string bytes(n, '\0');
  for (auto& c : bytes) c = static_cast<char>(rng());
  return bytes;
}

TEST(EventLog, EntriesComeBackInOrder) {
  std::mt19937 rng(8);
  std::vector<std::pair<std::int64_t, std::string>> in;
  event_log log;
  for (int i = 0; i < 600; ++i) {
    // Every length around the line and piece boundaries, then random ones up to 5 KiB.
    const auto n = i < 200 ? static_cast<std::size_t>(i)
                           : std::uniform_int_distribution<std::size_t>(0, 5000)(rng);
    const auto bytes = random_bytes(rng, n);
    in.emplace_back(i * 1000 + 7, bytes);
    log.append(in.back().first, bytes);
  }
  log.seal();
  std::size_t k = 0;
  log.for_each([&](std::int64_t t_us, std::string_view bytes) {
    ASSERT_LT(k, in.size());
    EXPECT_EQ(t_us, in[k].first) << k;
    EXPECT_EQ(bytes, in[k].second) << k;
    ++k;
  });
  EXPECT_EQ(k, in.size());
  EXPECT_EQ(event_log::entry_bytes(0), 16u);
  EXPECT_EQ(event_log::entry_bytes(1), 32u);
  EXPECT_EQ(event_log::entry_bytes(16), 32u);
  EXPECT_EQ(event_log::entry_bytes(17), 48u);

  event_log moved(std::move(log));
  std::size_t again = 0;
  moved.for_each(
      [&](std::int64_t, std::string_view bytes) { EXPECT_EQ(bytes, in[again++].second); });
  EXPECT_EQ(again, in.size());
}

// Texts logged between the reads (the trace's response text): for_each sees only the reads,
// for_each_text only the texts, with their tags, each in order, across chunks.
TEST(EventLog, TaggedTextsStayOutOfTheReads) {
  std::mt19937 rng(9);
  std::vector<std::pair<std::int64_t, std::string>> reads;
  std::vector<std::string> texts[3];
  event_log log;
  for (int i = 0; i < 3000; ++i) {
    const auto n = std::uniform_int_distribution<std::size_t>(0, i % 7 == 0 ? 300 : 40)(rng);
    const auto bytes = random_bytes(rng, n);
    const auto what = std::uniform_int_distribution<unsigned>(0, 2)(rng);
    if (what == 0) {
      reads.emplace_back(-i, bytes);  // times are any int64 (a negative one too)
      log.append(-i, bytes);
    } else {
      texts[what].push_back(bytes);
      log.append_text(what, bytes);
    }
  }
  log.seal();
  std::size_t k = 0;
  log.for_each([&](std::int64_t t_us, std::string_view bytes) {
    ASSERT_LT(k, reads.size());
    EXPECT_EQ(t_us, reads[k].first) << k;
    EXPECT_EQ(bytes, reads[k].second) << k;
    ++k;
  });
  EXPECT_EQ(k, reads.size());
  std::size_t seen[3] = {};
  log.for_each_text([&](unsigned tag, std::string_view t) {
    ASSERT_TRUE(tag == 1 || tag == 2) << tag;
    ASSERT_LT(seen[tag], texts[tag].size()) << tag;
    EXPECT_EQ(t, texts[tag][seen[tag]]) << tag << " " << seen[tag];
    ++seen[tag];
  });
  EXPECT_EQ(seen[1], texts[1].size());
  EXPECT_EQ(seen[2], texts[2].size());
}

// What a log gives back, read by read.
std::vector<std::pair<std::int64_t, std::string>> reads_of(const event_log& log) {
  std::vector<std::pair<std::int64_t, std::string>> out;
  log.for_each([&](std::int64_t t_us, std::string_view bytes) { out.emplace_back(t_us, bytes); });
  return out;
}

// A streamed response's reads: the same chunk around a different token each time.
std::string sse_chunk(std::string_view token) {
  return R"(data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1764400000,)"
         R"("model":"m","choices":[{"index":0,"delta":{"content":")" +
         std::string(token) + R"("},"logprobs":null,"finish_reason":null}]})" + "\n\n";
}

// The point of the difference: a stream of chunks that differ in their token takes about a
// header and the token per read, not the read, and still comes back byte for byte.
TEST(EventLog, ReadsLikeTheLastOneTakeOnlyTheirDifference) {
  const std::vector<std::string> tokens = {"Hello", ",", " world", "", " and", " everyone", "!"};
  std::vector<std::pair<std::int64_t, std::string>> in;
  event_log log;
  for (int i = 0; i < 700; ++i) {
    in.emplace_back(i * 20'000, sse_chunk(tokens[static_cast<std::size_t>(i) % tokens.size()]));
    log.append(in.back().first, in.back().second);
    if (i == 0) {
      EXPECT_TRUE(log.last_read().empty());  // an idle stream keeps no copy
    }
  }
  const std::size_t whole = in.size() * event_log::entry_bytes(in[0].second.size());
  EXPECT_LT(log.stored_bytes(), whole / 6) << "whole: " << whole;
  EXPECT_GE(log.stored_bytes(), in.size() * event_log::align);  // at least a header each
  EXPECT_EQ(log.last_read(), in.back().second);
  log.seal();
  EXPECT_TRUE(log.last_read().empty());
  EXPECT_EQ(reads_of(log), in);
}

// What a stream's log allocates on the I/O thread: its chunks — each as large as those before
// it together, so their number grows with the log's logarithm — and the kept read (a few times as
// it grows), nothing per read.  The chunks are linked through their own first bytes: a list of
// them kept beside (a vector) would take 3–4 allocations more per stream, growing.
TEST(EventLogPerf, AllocatesItsChunksAndTheKeptReadOnly) {
  if (!test::allocations_counted()) GTEST_SKIP() << "the sanitizer's runtime owns operator new";
  std::vector<std::pair<std::int64_t, std::string>> in;
  for (int i = 0; i < 400; ++i) in.emplace_back(i * 20'000, sse_chunk(i % 3 == 0 ? " token" : "s"));
  event_log log;
  const auto before = test::thread_allocations();
  log.append(in[0].first, in[0].second);
  const std::size_t first = log.stored_bytes();
  EXPECT_EQ(test::thread_allocations() - before, 1u);  // the first chunk, nothing kept
  for (std::size_t i = 1; i < in.size(); ++i) log.append(in[i].first, in[i].second);
  const auto made = test::thread_allocations() - before;
  // The chunks: the first, then one per doubling of what is stored; the kept read: ≤ 2.
  const std::size_t chunks =
      1 + static_cast<std::size_t>(std::bit_width(log.stored_bytes() / first));
  EXPECT_LE(made, chunks + 2) << log.stored_bytes() << " bytes stored, first entry " << first;
  EXPECT_GE(made, 4u);  // it did grow: ~11 KiB from a ~300-byte first chunk
  std::printf("%llu allocations for %zu reads (%zu bytes stored)\n",
              static_cast<unsigned long long>(made), in.size(), log.stored_bytes());
  log.seal();
  EXPECT_EQ(reads_of(log), in);
}

// Every kind of neighbour: equal, a prefix of the last one or it a prefix of this one, shorter,
// longer, sharing only a start or only an end, sharing nothing, empty, one byte; reads larger than
// delta_max between them (logged whole, and the one kept stays the smaller one before them); a
// log moved in the middle and appended to further.
TEST(EventLog, EveryKindOfNeighbourComesBackExact) {
  const std::string big(event_log::delta_max + 1, 'x');
  const std::vector<std::string> reads = {
      "the first read (never kept)",
      "abcdefghijklmnopqrstuvwxyz",
      "abcdefghijklmnopqrstuvwxyz",            // the same
      "abcdefghijklm",                         // a prefix of it
      "abcdefghijklmnopqrstuvwxyz0123",        // it is a prefix of this one
      "0123",                                  // its end only
      "XYZ0123",                               // the end, longer
      "XYZ",                                   // the start, shorter
      "",                                      // empty
      "Q",                                     // one byte, nothing shared
      big,                                     // whole, past delta_max
      "Q!",                                    // compared with "Q", not the big one
      big + "y",                               // past delta_max again
      "Q!",                                    // the same as the kept one
      std::string(event_log::delta_max, 'x'),  // the largest kept
      std::string(event_log::delta_max - 1, 'x') + "z",
      "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
      "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",  // start and end would overlap: bounded
      "aaaaaaaaaaaaaaa",
  };
  std::vector<std::pair<std::int64_t, std::string>> in;
  event_log log;
  for (std::size_t i = 0; i < reads.size(); ++i) {
    in.emplace_back(static_cast<std::int64_t>(i), reads[i]);
    log.append(in.back().first, reads[i]);
    if (i == 5) {  // moved between two reads: the kept read goes with it
      event_log moved(std::move(log));
      log = std::move(moved);
    }
    if (i % 3 == 0)
      log.append_text(1, "t");  // texts are not reads: they do not become the kept one
  }
  log.seal();
  EXPECT_EQ(reads_of(log), in);
}

// Random edits of a random base (bytes replaced, inserted, removed, anywhere; any byte value),
// with texts between them: every read and every text comes back exact.
TEST(EventLog, RandomEditsComeBackExact) {
  for (std::uint32_t seed = 1; seed <= 20; ++seed) {
    std::mt19937 rng(seed);
    auto pick = [&](std::size_t n) {
      return std::uniform_int_distribution<std::size_t>(0, n)(rng);
    };
    std::string cur = random_bytes(rng, pick(600));
    std::vector<std::pair<std::int64_t, std::string>> in;
    std::vector<std::string> texts;
    event_log log;
    for (int i = 0; i < 400; ++i) {
      switch (pick(5)) {
        case 0:
          cur = random_bytes(rng, pick(300));
          break;
        case 1:
          cur.insert(pick(cur.size()), random_bytes(rng, pick(20)));
          break;
        case 2: {
          const auto at = pick(cur.size());
          cur.erase(at, pick(cur.size() - at));
          break;
        }
        case 3:
          if (!cur.empty()) cur[pick(cur.size() - 1)] = static_cast<char>(rng());
          break;
        case 4:
          texts.push_back(random_bytes(rng, pick(30)));
          log.append_text(2, texts.back());
          continue;
        default:
          break;  // the same again
      }
      in.emplace_back(i, cur);
      log.append(i, cur);
    }
    log.seal();
    ASSERT_EQ(reads_of(log), in) << "seed " << seed;
    std::vector<std::string> got;
    log.for_each_text([&](unsigned, std::string_view t) { got.emplace_back(t); });
    ASSERT_EQ(got, texts) << "seed " << seed;
  }
}

// A chat stream's reads as the hook chain hands them to the trace: fed to a decoder first, then
// logged by append_shaped when the decoder says the read was one chunk shaped like the last one
// (parsers::read_shape), else by append.  Returns how many were shaped.
std::size_t log_like_the_trace(event_log& log, const std::vector<std::string>& reads,
                               std::int64_t t0 = 0) {
  parsers::stream_decoder d(parsers::provider::openai_chat, "text/event-stream");
  test::decoder_transcript t;
  std::size_t shaped = 0;
  for (std::size_t i = 0; i < reads.size(); ++i) {
    d.feed(reads[i], 0, t);
    parsers::read_shape s;
    if (d.last_read_shape(reads[i], s)) {
      log.append_shaped(t0 + static_cast<std::int64_t>(i), reads[i], s);
      EXPECT_TRUE(log.last_read().empty()) << i;  // nothing to fetch for the next one
      ++shaped;
    } else {
      log.append(t0 + static_cast<std::int64_t>(i), reads[i]);
    }
  }
  return shaped;
}

std::string chat_chunk(std::string_view field, std::string_view token,
                       std::string_view finish = "null") {
  return R"({"id":"chatcmpl-1","object":"chat.completion.chunk","created":1764400000,)"
         R"("model":"m","choices":[{"index":0,"delta":{")" +
         std::string(field) + R"(":")" + std::string(token) +
         R"("},"logprobs":null,"finish_reason":)" + std::string(finish) + "}]}";
}

// Every kind of read a chat stream brings — chunks shaped like the last one, a shape changing
// (content after reasoning, the finish chunk), escaped and non-ASCII tokens, a usage chunk with
// no text, [DONE], other framings around the chunk (CRLF, a comment, no space after the colon,
// bytes of the next event), two events in one read, an event split across reads — comes back
// byte for byte, and the steady state is shaped: its entries hold the framing and the token.
TEST(EventLog, ReadsShapedLikeTheLastChunkComeBackWhole) {
  std::vector<std::string> reads = {
      ": keep-alive\n\n",
      "data: " + chat_chunk("role", "assistant") + "\n\n",
      "data: " + chat_chunk("reasoning_content", "First,") + "\n\n",
      "data: " + chat_chunk("reasoning_content", " so") + "\n\n",
      "data: " + chat_chunk("content", "Hello") + "\n\n",
  };
  const std::vector<std::string> tokens = {
      " world", R"(\"quoted\")", "caf\u00e9", R"(\u00e9\n)", "", " and", "!", " more text here"};
  for (int i = 0; i < 60; ++i)
    reads.push_back(
        "data: " + chat_chunk("content", tokens[static_cast<std::size_t>(i) % tokens.size()]) +
        "\n\n");
  const std::size_t steady_from = 5, steady_to = reads.size();
  reads.push_back("data: " + chat_chunk("content", "crlf") + "\r\n\r\n");
  reads.push_back(": comment first\ndata: " + chat_chunk("content", "c") + "\n\n");
  reads.push_back("data:" + chat_chunk("content", "nospace") + "\n\n");
  reads.push_back("data: " + chat_chunk("content", "a") +
                  "\n\ndata: " + chat_chunk("content", "b") + "\n\n");
  const std::string split = "data: " + chat_chunk("content", "split") + "\n\n";
  reads.push_back("data: " + chat_chunk("content", "then") + "\n\n" + split.substr(0, 40));
  reads.push_back(split.substr(40));
  reads.push_back("data: " + chat_chunk("content", "", R"("stop")") + "\n\n");
  reads.push_back("data: " + chat_chunk("content", "after stop") + "\n\n");
  reads.push_back(
      R"(data: {"id":"chatcmpl-1","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":60}})"
      "\n\n");
  reads.push_back("data: [DONE]\n\n");

  event_log log;
  const auto shaped = log_like_the_trace(log, reads);
  log.seal();
  const auto out = reads_of(log);
  ASSERT_EQ(out.size(), reads.size());
  for (std::size_t i = 0; i < reads.size(); ++i) {
    EXPECT_EQ(out[i].first, static_cast<std::int64_t>(i));
    EXPECT_EQ(out[i].second, reads[i]) << i;
  }
  // Shaped: every steady-state chunk, and the other framings of one chunk (CRLF, comment, no
  // space, a split event's start after it); not the comment, two events, the split event's
  // end, the usage chunk or [DONE].
  EXPECT_GE(shaped, steady_to - steady_from + 4);
  EXPECT_LE(shaped, reads.size() - 5);

  // At steady state an entry holds the framing ("data: ", "\n\n") and the token (16-byte header).
  event_log steady;
  std::vector<std::string> prefix(reads.begin(), reads.begin() + static_cast<long>(steady_to));
  log_like_the_trace(steady, prefix);
  const auto before = steady.stored_bytes();
  std::vector<std::string> more = prefix;
  more.push_back("data: " + chat_chunk("content", " next") + "\n\n");
  event_log longer;
  log_like_the_trace(longer, more);
  EXPECT_EQ(longer.stored_bytes() - before, event_log::entry_bytes(6 + 5 + 2));
}

// The same stream cut into reads anywhere: whatever the decoder can vouch for is shaped, the rest
// logged as before, and every read comes back exact.
TEST(EventLog, AChatStreamCutAnywhereComesBackExact) {
  std::string body;
  for (int i = 0; i < 40; ++i)
    body +=
        "data: " + chat_chunk(i < 10 ? "reasoning_content" : "content", i % 3 ? " tok" : "x\\ty") +
        (i % 5 == 4 ? "\r\n\r\n" : "\n\n");
  body += "data: [DONE]\n\n";
  std::mt19937 rng(12);
  std::size_t shaped_total = 0;
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<std::string> reads;
    for (std::size_t at = 0; at < body.size();) {
      // Mostly one event per read (the streaming case), sometimes a random cut.
      std::size_t n;
      if (trial % 2 == 0 && body.find("\n\n", at) != std::string::npos)
        n = body.find("\n\n", at) + 2 - at;
      else
        n = std::uniform_int_distribution<std::size_t>(1, 400)(rng);
      if (trial % 4 == 2)
        n = std::max<std::size_t>(1, n + std::uniform_int_distribution<int>(-3, 3)(rng));
      n = std::min(n, body.size() - at);
      reads.push_back(body.substr(at, n));
      at += n;
    }
    event_log log;
    shaped_total += log_like_the_trace(log, reads, 1000);
    log.seal();
    const auto out = reads_of(log);
    ASSERT_EQ(out.size(), reads.size()) << trial;
    for (std::size_t i = 0; i < reads.size(); ++i)
      ASSERT_EQ(out[i].second, reads[i]) << trial << " " << i;
  }
  EXPECT_GT(shaped_total, 1000u);  // the event-per-read trials are mostly shaped
}

// The trace writer escapes a shaped read in pieces (its shape once per shape, the framing once
// while it stays the same, the text per read): what it renders is what it renders for the same
// reads logged whole — for a chat stream with every kind of read, and for pieces that are not
// UTF-8 on their own (a shape cut inside a character, invalid bytes in the text, the framing, the
// shape), which make the whole read decide: a JSON string when it is UTF-8, else base64.
TEST(EventLog, TheWriterRendersShapedReadsAsTheWholeReads) {
  const auto render = [](const event_log& log) {
    std::string out;
    trace_writer::render_events(out, log);
    return out;
  };
  const auto logged_whole = [](const std::vector<std::string>& reads) {
    event_log log;
    for (std::size_t i = 0; i < reads.size(); ++i)
      log.append(static_cast<std::int64_t>(i), reads[i]);
    log.seal();
    return log;
  };

  std::vector<std::string> reads = {"data: " + chat_chunk("role", "assistant") + "\n\n"};
  const std::vector<std::string> tokens = {" world", R"(\"q\")",     "caf\u00e9", R"(\u00e9\n)",
                                           "",       "\u4e2d\u6587", "<\t>",      " more"};
  for (int i = 0; i < 40; ++i) {
    const auto& token = tokens[static_cast<std::size_t>(i) % tokens.size()];
    reads.push_back("data: " + chat_chunk(i < 15 ? "reasoning_content" : "content", token) +
                    (i % 7 == 6 ? "\r\n\r\n" : "\n\n"));
  }
  reads.push_back("data: " + chat_chunk("content", "", R"("stop")") + "\n\n");
  reads.push_back("data: [DONE]\n\n");
  event_log shaped;
  EXPECT_GT(log_like_the_trace(shaped, reads), 30u);
  shaped.seal();
  const auto expected = render(logged_whole(reads));
  EXPECT_EQ(render(shaped), expected);
  EXPECT_NE(expected.find(R"(\"content\":\"\\u00e9\\n\")"), std::string::npos) << expected;

  // Shapes made by hand: the decoder vouches only for UTF-8 chunks cut at quotes.
  const std::string doc = "{\"t\":\"caf\u00e9 \u4e2d\"}";  // text: from 6 to the closing quote
  const std::size_t text_at = 6, text_size = doc.size() - 2 - text_at;
  struct cut {
    std::string read;
    std::size_t doc_at, prefix, text_size;
    std::size_t doc_size = 0;  // 0: through the first '}'
  };
  const std::vector<cut> cuts = {
      {"data: " + doc + "\n\n", 6, text_at, text_size},          // pieces all UTF-8
      {"data: " + doc + "\n\n", 6, text_at + 4, text_size - 5},  // the shape's head ends inside é
      {"data: " + doc + "\n\n", 6, text_at, 4},                  // the text does: whole is UTF-8
      {"data: " + doc + "\n\n", 6, text_at, 4, text_at + 4},     // and nothing of the shape after
      {"data: {\"t\":\"a\xff\"}\n\n", 6, text_at, 2},            // the text is not: base64
      {"data:\xfe {\"t\":\"ab\"}\n\n", 7, text_at, 2},           // the framing before is not
      {"data: {\"t\":\"ab\"}\xc3", 6, text_at, 2},               // nor the framing after
      {"data: {\"\xc3\":\"ab\"}\n\n", 6, text_at, 2},            // nor the shape
  };
  std::vector<std::string> hand;
  event_log cut_log;
  std::uint32_t version = 0;
  for (const auto& c : cuts) {
    hand.push_back(c.read);
    const auto chunk = std::string_view(c.read).substr(
        c.doc_at, c.doc_size != 0 ? c.doc_size : c.read.find('}') + 1 - c.doc_at);
    const std::string shape =
        std::string(chunk.substr(0, c.prefix)) + std::string(chunk.substr(c.prefix + c.text_size));
    parsers::read_shape s{shape, c.prefix, ++version, c.doc_at, chunk.size()};
    cut_log.append_shaped(static_cast<std::int64_t>(hand.size() - 1), c.read, s);
    // The same shape again (no new shape entry): the cached pieces are reused.
    hand.push_back(c.read);
    cut_log.append_shaped(static_cast<std::int64_t>(hand.size() - 1), c.read, s);
  }
  cut_log.seal();
  std::vector<std::string> back;
  cut_log.for_each([&](std::int64_t, std::string_view b) { back.emplace_back(b); });
  ASSERT_EQ(back, hand);  // logged shaped (and whole again)
  const auto hand_expected = render(logged_whole(hand));
  EXPECT_EQ(render(cut_log), hand_expected);
  EXPECT_NE(hand_expected.find("raw_b64"), std::string::npos);
}

}  // namespace
}  // namespace tokentap::hooks
