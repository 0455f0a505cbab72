#include "test/bench/transit.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <string>

namespace tokentap::bench {
namespace {

constexpr std::uint16_t sim_port = 9001, proxy_port = 8080;

// A pcap file as tcpdump writes it on `lo`: Ethernet frames, IPv4, TCP.
class pcap_writer {
 public:
  explicit pcap_writer(bool nano = true, std::uint32_t linktype = 1) : linktype_(linktype) {
    put32(nano ? 0xa1b23c4d : 0xa1b2c3d4);
    put16(2), put16(4), put32(0), put32(0), put32(65535), put32(linktype);
    nano_ = nano;
  }
  // A segment from `src` to `dst` at `t_ns` (whole microseconds unless nano).
  void segment(std::int64_t t_ns, std::uint16_t src, std::uint16_t dst, std::string_view payload) {
    std::string f;
    if (linktype_ == 1) f.append(12, '\0').append("\x08\x00", 2);
    std::string ip(20, '\0');
    ip[0] = 0x45;
    const auto total = static_cast<std::uint16_t>(20 + 20 + payload.size());
    ip[2] = static_cast<char>(total >> 8), ip[3] = static_cast<char>(total & 0xff);
    ip[9] = 6;
    const char lo[4] = {127, 0, 0, 1};
    std::memcpy(&ip[12], lo, 4), std::memcpy(&ip[16], lo, 4);
    std::string tcp(20, '\0');
    tcp[0] = static_cast<char>(src >> 8), tcp[1] = static_cast<char>(src & 0xff);
    tcp[2] = static_cast<char>(dst >> 8), tcp[3] = static_cast<char>(dst & 0xff);
    tcp[12] = 0x50;
    f += ip + tcp;
    f.append(payload);
    put32(static_cast<std::uint32_t>(t_ns / 1'000'000'000));
    put32(static_cast<std::uint32_t>(nano_ ? t_ns % 1'000'000'000 : t_ns % 1'000'000'000 / 1000));
    put32(static_cast<std::uint32_t>(f.size())), put32(static_cast<std::uint32_t>(f.size()));
    out_ += f;
  }
  const std::string& bytes() const { return out_; }

 private:
  void put16(std::uint16_t v) { out_.append(reinterpret_cast<const char*>(&v), 2); }
  void put32(std::uint32_t v) { out_.append(reinterpret_cast<const char*>(&v), 4); }
  std::string out_;
  std::uint32_t linktype_;
  bool nano_ = true;
};

transit_report read(const pcap_writer& w) {
  transit_matcher m(sim_port, proxy_port);
  std::string err;
  EXPECT_TRUE(read_pcap(w.bytes(), m, err)) << err;
  return m.report();
}

// Two events of one chunk, as the simulator writes them.
const std::string chunk = "2e\r\n: t 111\ndata: {\"a\":1}\n\n: t 222\ndata: {\"b\":2}\n\n\r\n";

TEST(Transit, EachStampsTimeFromTheUpstreamSegmentToTheClientSegment) {
  pcap_writer w;
  w.segment(1'000'000, sim_port, 40000, chunk);    // upstream → proxy
  w.segment(1'000'500, 40000, sim_port, "");       // the proxy's ACK: no payload
  w.segment(1'003'000, proxy_port, 50000, chunk);  // proxy → client
  const auto r = read(w);
  ASSERT_EQ(r.transit_ns.size(), 2u);
  EXPECT_EQ(r.transit_ns[0], 3000);
  EXPECT_EQ(r.transit_ns[1], 3000);
  EXPECT_EQ(r.client_ns[0], 1'003'000);
  EXPECT_EQ(r.upstream_stamps, 2u);
  EXPECT_EQ(r.client_stamps, 2u);
  EXPECT_EQ(r.unmatched_client, 0u);
  EXPECT_EQ(r.packets, 2u);
}

// However the client's byte stream is cut into segments, a stamp is timed by the segment that
// holds its last byte: that is when the client could have read it.
TEST(Transit, AStampSplitAcrossSegmentsIsTimedByItsLastByteAtEveryCut) {
  for (std::size_t cut = 1; cut < chunk.size(); ++cut) {
    pcap_writer w;
    w.segment(1'000'000, sim_port, 40000, chunk);
    w.segment(2'000'000, proxy_port, 50000, chunk.substr(0, cut));
    w.segment(3'000'000, proxy_port, 50000, chunk.substr(cut));
    const auto r = read(w);
    ASSERT_EQ(r.transit_ns.size(), 2u) << "cut " << cut;
    const auto end_of = [&](std::string_view stamp) {
      return chunk.find(stamp) + stamp.size();  // one past the stamp's '\n'
    };
    EXPECT_EQ(r.transit_ns[0], cut >= end_of(": t 111\n") ? 1'000'000 : 2'000'000) << cut;
    EXPECT_EQ(r.transit_ns[1], cut >= end_of(": t 222\n") ? 1'000'000 : 2'000'000) << cut;
  }
}

TEST(Transit, ByteByByteSegmentsFindEveryStampOnce) {
  pcap_writer w;
  w.segment(0, sim_port, 40000, chunk);
  for (std::size_t i = 0; i < chunk.size(); ++i)
    w.segment(static_cast<std::int64_t>(i + 1) * 1000, proxy_port, 50000, chunk.substr(i, 1));
  const auto r = read(w);
  ASSERT_EQ(r.transit_ns.size(), 2u);
  EXPECT_EQ(r.transit_ns[0], static_cast<std::int64_t>(chunk.find(": t 111\n") + 8) * 1000);
  EXPECT_EQ(r.transit_ns[1], static_cast<std::int64_t>(chunk.find(": t 222\n") + 8) * 1000);
}

TEST(Transit, FirstSightingsOnlyOtherPortsAndFlowsKeptApart) {
  pcap_writer w;
  w.segment(1000, sim_port, 40000, chunk);
  w.segment(2000, sim_port, 40000, chunk);         // a retransmission: ignored
  w.segment(3000, 7777, 40001, "x\n: t 333\n");    // neither leg
  w.segment(4000, sim_port, 40002, "x\n: t 4");    // another upstream connection...
  w.segment(5000, proxy_port, 50000, "x\n: t 4");  // ... its client, half a stamp
  w.segment(6000, proxy_port, 50001, "44\n");      // another client: not a continuation
  w.segment(7000, sim_port, 40002, "44\n");        // the stamp 444 completes upstream
  w.segment(8000, proxy_port, 50000, "44\n");      // ... and at its client
  w.segment(9000, proxy_port, 50000, chunk);
  w.segment(9500, proxy_port, 50000, chunk);  // the client's retransmission
  const auto r = read(w);
  EXPECT_EQ(r.other_packets, 1u);
  EXPECT_EQ(r.upstream_stamps, 3u);  // 111, 222, 444
  EXPECT_EQ(r.client_stamps, 3u);    // 444, 111, 222
  ASSERT_EQ(r.transit_ns.size(), 3u);
  EXPECT_EQ(r.transit_ns[0], 1000);  // 444: 8000 − 7000
  EXPECT_EQ(r.transit_ns[1], 8000);  // 111: 9000 − 1000
  EXPECT_EQ(r.transit_ns[2], 8000);
  EXPECT_EQ(r.unmatched_client, 0u);
}

TEST(Transit, AStampTheUpstreamNeverSentIsUnmatched) {
  pcap_writer w;
  w.segment(1000, proxy_port, 50000, "\n: t 9\n");
  const auto r = read(w);
  EXPECT_TRUE(r.transit_ns.empty());
  EXPECT_EQ(r.unmatched_client, 1u);
}

TEST(Transit, MicrosecondCapturesAndACutLastRecord) {
  pcap_writer w(/*nano=*/false);
  w.segment(5'000'000'000, sim_port, 40000, chunk);
  w.segment(5'000'017'000, proxy_port, 50000, chunk);
  w.segment(5'000'020'000, proxy_port, 50000, "\n: t 7\n");
  const auto cut = w.bytes().substr(0, w.bytes().size() - 3);  // tcpdump killed mid-write
  transit_matcher m(sim_port, proxy_port);
  std::string err;
  ASSERT_TRUE(read_pcap(cut, m, err)) << err;
  const auto r = m.report();
  ASSERT_EQ(r.transit_ns.size(), 2u);
  EXPECT_EQ(r.transit_ns[0], 17'000);
  EXPECT_EQ(r.unmatched_client, 0u);
}

TEST(Transit, RejectsWhatIsNotAPcapFile) {
  transit_matcher m(sim_port, proxy_port);
  std::string err;
  EXPECT_FALSE(read_pcap("short", m, err));
  EXPECT_FALSE(read_pcap(std::string(24, 'x'), m, err));
  EXPECT_NE(err.find("magic"), std::string::npos);
  std::string pcapng = "\x0a\x0d\x0d\x0a" + std::string(40, '\0');
  EXPECT_FALSE(read_pcap(pcapng, m, err));
}

// The proxy held an event and sent nothing for a while: a silence, timed from the later of its
// previous send and the event's arrival.  Gaps with nothing held are not.
TEST(Transit, SilencesAreGapsBetweenSendsWhileAnEventWasHeld) {
  pcap_writer w;
  w.segment(0, sim_port, 40000, "\n: t 1\n");
  w.segment(30'000, proxy_port, 50000, "\n: t 1\n");   // 30 µs: a busy proxy's pace
  w.segment(5'000'000, proxy_port, 50001, "x");        // 5 ms idle, nothing held: no silence
  w.segment(6'000'000, sim_port, 40000, "\n: t 2\n");  // held from 6 ms...
  w.segment(6'500'000, sim_port, 40001, "\n: t 3\n");
  w.segment(9'000'000, proxy_port, 50000, "\n: t 2\n");  // ... to 9: a silence of 3 ms
  w.segment(9'040'000, proxy_port, 50001, "\n: t 3\n");  // 40 µs later: none
  w.segment(9'100'000, sim_port, 40000, "\n: t 4\n");
  w.segment(9'200'000, proxy_port, 50002, "y");           // sends go on while 4 is held...
  w.segment(10'700'000, proxy_port, 50000, "\n: t 4\n");  // ... 1.5 ms since the last: one
  const auto r = read(w);
  EXPECT_EQ(r.silences, 2u);
  EXPECT_EQ(r.silent_ns, 3'000'000 + 1'500'000);
  EXPECT_EQ(r.longest_silence_ns, 3'000'000);
  ASSERT_EQ(r.transit_ns.size(), 4u);
  EXPECT_EQ(r.transit_ns[1], 3'000'000);
}

TEST(Transit, AnEventNeverSentOnStopsCountingAsHeldAfterASecond) {
  pcap_writer w;
  w.segment(0, sim_port, 40000, "\n: t 1\n");  // the client left: never forwarded
  w.segment(10'000, proxy_port, 50001, "x");
  w.segment(2'000'000, proxy_port, 50001, "x");      // held 2 ms: a silence
  w.segment(1'500'000'000, proxy_port, 50001, "x");  // 1.5 s later: forgotten
  const auto r = read(w);
  EXPECT_EQ(r.silences, 1u);
  EXPECT_EQ(r.longest_silence_ns, 1'990'000);
}

TEST(Transit, QuantileIsTheNearestRank) {
  std::vector<std::int64_t> v{5, 1, 4, 2, 3, 6, 7, 8, 9, 10};
  EXPECT_EQ(quantile(v, 0.5), 5);
  EXPECT_EQ(quantile(v, 0.9), 9);
  EXPECT_EQ(quantile(v, 0.99), 10);
  EXPECT_EQ(quantile(v, 1.0), 10);
  EXPECT_EQ(quantile(v, 0.0), 1);
  std::vector<std::int64_t> none;
  EXPECT_EQ(quantile(none, 0.99), 0);
}

}  // namespace
}  // namespace tokentap::bench
