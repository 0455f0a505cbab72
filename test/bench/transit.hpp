// A proxy's transit time per event, from a packet capture of both its legs on loopback.
//
// The simulator stamps each event (`x-sim-stamp`) with an SSE comment `: t <ns>`
// (sim::stamp_prefix) that every proxy
// forwards unchanged.  A capture (`tcpdump -i lo`) timestamps each segment in the kernel as it is
// transmitted — on loopback, when it reaches the receiver's socket.  So the time between the
// segment that carried a stamp from the upstream (source port = the upstream's) and the one that
// carried it on to the client (source port = the proxy's listener) is what the proxy added:
// waking, reading, its own work, writing — and nothing of the simulator's or the client's
// scheduling, which the load generator's write → receive latency includes.  The same measure for
// nginx and tokentap; no cooperation from either.
//
// Pure: fed the capture's bytes, no I/O.
#pragma once

#include <cstdint>
#include <functional>
#include <queue>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace tokentap::bench {

struct transit_report {
  std::vector<std::int64_t> transit_ns;  // per matched stamp: client segment − upstream segment
  std::vector<std::int64_t> client_ns;   // ... and its client segment's time (same order)
  std::size_t packets = 0;               // TCP segments with a payload, either leg
  std::size_t other_packets = 0;         // not TCP over IPv4/IPv6, or neither leg's port
  std::size_t upstream_stamps = 0;       // distinct stamps seen leaving the upstream
  std::size_t client_stamps = 0;         // distinct stamps seen reaching the client
  std::size_t unmatched_client = 0;      // reached the client without having been seen upstream
  // Silences: the proxy held an event (in from the upstream, not yet out to its client) and sent
  // nothing to any client for at least silence_ns — from the later of its previous send and the
  // oldest held event's arrival to its next send.  What a single-threaded proxy does when it is
  // not running; a busy one sends something every few tens of µs.
  std::size_t silences = 0;
  std::int64_t silent_ns = 0;  // their total
  std::int64_t longest_silence_ns = 0;
};

/// Matches stamps between the two legs.  Feed segments in capture order.
class transit_matcher {
 public:
  transit_matcher(std::uint16_t upstream_port, std::uint16_t client_port,
                  std::int64_t silence_ns = 1'000'000)
      : upstream_port_(upstream_port), client_port_(client_port), silence_ns_(silence_ns) {}

  /// One TCP segment's payload; `flow` names its connection and direction (any unique key).
  void on_segment(std::int64_t time_ns, std::string_view flow, std::uint16_t src_port,
                  std::string_view payload);
  void on_other() { ++report_.other_packets; }

  /// The matches so far (transit_ns in the order the client received them).
  transit_report report() const;

 private:
  void note_send(std::int64_t t);

  // The bytes of a flow's last segment that may begin a stamp its next segment completes.
  std::unordered_map<std::string, std::string> carry_;
  std::unordered_map<std::int64_t, std::int64_t> upstream_;   // stamp → first time seen
  std::unordered_map<std::int64_t, std::int64_t> client_;     // stamp → first time seen
  std::vector<std::pair<std::int64_t, std::int64_t>> order_;  // (client time, stamp)
  // Events held by the proxy: (arrival, stamp), oldest first; the sent ones are dropped lazily.
  std::priority_queue<std::pair<std::int64_t, std::int64_t>,
                      std::vector<std::pair<std::int64_t, std::int64_t>>, std::greater<>>
      held_;
  std::int64_t last_sent_ns_ = -1;
  std::uint16_t upstream_port_, client_port_;
  std::int64_t silence_ns_;
  transit_report report_;
};

/// Reads a pcap file's bytes (microsecond or nanosecond timestamps, either byte order; link
/// types Ethernet — what `-i lo` gives —, Linux cooked v1/v2, raw IP) into `m`.  False, with
/// `error`, when the bytes are not such a capture; a truncated last record is ignored.
bool read_pcap(std::string_view bytes, transit_matcher& m, std::string& error);

/// The `p`-quantile (0..1) of `v` by nearest rank; 0 for an empty vector.  Sorts `v`.
std::int64_t quantile(std::vector<std::int64_t>& v, double p);

}  // namespace tokentap::bench
