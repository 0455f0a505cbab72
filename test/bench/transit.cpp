#include "test/bench/transit.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "sim/generator.hpp"

namespace tokentap::bench {
namespace {

using sim::stamp_prefix;  // a stamp is a line of its own: `\n` + stamp_prefix + digits + `\n`
constexpr std::size_t carry_bytes = 32;  // > "\n" + stamp_prefix + 19 digits + "\n"
static_assert(carry_bytes > 1 + stamp_prefix.size() + 19 + 1);
constexpr std::int64_t forgotten_after_ns = 1'000'000'000;  // a held event never sent on

}  // namespace

void transit_matcher::on_segment(std::int64_t time_ns, std::string_view flow,
                                 std::uint16_t src_port, std::string_view payload) {
  const bool upstream = src_port == upstream_port_;
  if (!upstream && src_port != client_port_) {
    ++report_.other_packets;
    return;
  }
  ++report_.packets;
  if (!upstream) note_send(time_ns);
  std::string& carry = carry_[std::string(flow)];
  std::string s;
  s.reserve(carry.size() + payload.size());
  s.append(carry).append(payload);
  // Stamps whose last byte is in this segment (those wholly in the carry were counted before).
  for (std::size_t at = s.find(stamp_prefix); at != std::string::npos;
       at = s.find(stamp_prefix, at + 1)) {
    if (at == 0 || s[at - 1] != '\n') continue;  // not at a line's start
    std::size_t i = at + stamp_prefix.size();
    std::int64_t v = 0;
    const std::size_t digits_from = i;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9' && i - digits_from < 19)
      v = v * 10 + (s[i++] - '0');
    if (i == digits_from || i >= s.size() || s[i] != '\n' || i < carry.size()) continue;
    auto& seen = upstream ? upstream_ : client_;
    if (!seen.emplace(v, time_ns).second) continue;
    if (upstream)
      held_.emplace(time_ns, v);
    else
      order_.emplace_back(time_ns, v);
  }
  carry.assign(s, s.size() - std::min(s.size(), carry_bytes));
}

// A send to a client at `t`: if the proxy held an event since before its previous send (or
// since the event came in, if later) and sent nothing until now, that was a silence.
void transit_matcher::note_send(std::int64_t t) {
  // Sent on already, or never (a stream cut when the load ended): not held.
  while (!held_.empty() &&
         (client_.count(held_.top().second) != 0 || t - held_.top().first > forgotten_after_ns))
    held_.pop();
  if (!held_.empty() && last_sent_ns_ >= 0) {
    const std::int64_t gap = t - std::max(last_sent_ns_, held_.top().first);
    if (gap >= silence_ns_) {
      ++report_.silences;
      report_.silent_ns += gap;
      report_.longest_silence_ns = std::max(report_.longest_silence_ns, gap);
    }
  }
  last_sent_ns_ = t;
}

transit_report transit_matcher::report() const {
  transit_report r = report_;
  r.upstream_stamps = upstream_.size();
  r.client_stamps = client_.size();
  r.transit_ns.reserve(order_.size());
  r.client_ns.reserve(order_.size());
  for (const auto& [t, stamp] : order_) {
    const auto it = upstream_.find(stamp);
    if (it == upstream_.end()) {
      ++r.unmatched_client;
      continue;
    }
    r.transit_ns.push_back(t - it->second);
    r.client_ns.push_back(t);
  }
  return r;
}

namespace {

struct cursor {
  std::string_view b;
  bool swap;
  std::uint32_t u32(std::size_t at) const {
    std::uint32_t v;
    std::memcpy(&v, b.data() + at, 4);
    return swap ? __builtin_bswap32(v) : v;
  }
};

std::uint16_t be16(const unsigned char* p) {
  return static_cast<std::uint16_t>(p[0] << 8 | p[1]);
}

// One captured frame: finds the IP packet, then the TCP segment and its payload.
void on_frame(std::uint32_t linktype, std::int64_t t, std::string_view frame, transit_matcher& m) {
  const auto* p = reinterpret_cast<const unsigned char*>(frame.data());
  std::size_t n = frame.size(), ip = 0;
  std::uint16_t proto = 0;
  switch (linktype) {
    case 1:  // Ethernet
      if (n < 14) return m.on_other();
      proto = be16(p + 12), ip = 14;
      break;
    case 113:  // Linux cooked v1
      if (n < 16) return m.on_other();
      proto = be16(p + 14), ip = 16;
      break;
    case 276:  // Linux cooked v2
      if (n < 20) return m.on_other();
      proto = be16(p), ip = 20;
      break;
    case 101:  // raw IP
      if (n < 1) return m.on_other();
      proto = (p[0] >> 4) == 6 ? 0x86dd : 0x0800;
      break;
    default:
      return m.on_other();
  }
  std::size_t tcp = 0, ip_end = 0;
  if (proto == 0x0800) {
    if (n < ip + 20 || p[ip + 9] != 6) return m.on_other();
    tcp = ip + (p[ip] & 0xfu) * 4u;
    ip_end = ip + be16(p + ip + 2);
  } else if (proto == 0x86dd) {
    if (n < ip + 40 || p[ip + 6] != 6) return m.on_other();  // no extension headers on loopback
    tcp = ip + 40;
    ip_end = tcp + be16(p + ip + 4);
  } else {
    return m.on_other();
  }
  if (n < tcp + 20) return m.on_other();
  const std::size_t data = tcp + (p[tcp + 12] >> 4) * 4u;
  const std::size_t end = std::min(n, ip_end);
  if (data >= end) return;  // an ACK, SYN or FIN alone
  // The flow: addresses and ports, source then destination.
  const std::size_t addr = proto == 0x0800 ? 12 : 8, alen = proto == 0x0800 ? 4 : 16;
  std::string flow(frame.substr(ip + addr, 2 * alen));
  flow.append(frame.substr(tcp, 4));
  m.on_segment(t, flow, be16(p + tcp), frame.substr(data, end - data));
}

}  // namespace

bool read_pcap(std::string_view bytes, transit_matcher& m, std::string& error) {
  if (bytes.size() < 24) {
    error = "not a pcap file (shorter than its header)";
    return false;
  }
  std::uint32_t magic;
  std::memcpy(&magic, bytes.data(), 4);
  bool nano = false, swap = false;
  switch (magic) {
    case 0xa1b2c3d4:
      break;
    case 0xa1b23c4d:
      nano = true;
      break;
    case 0xd4c3b2a1:
      swap = true;
      break;
    case 0x4d3cb2a1:
      swap = nano = true;
      break;
    default:
      error = "not a pcap file (magic number); pcapng is not read: use tcpdump -w";
      return false;
  }
  const cursor c{bytes, swap};
  const std::uint32_t linktype = c.u32(20) & 0x0fffffffu;
  for (std::size_t at = 24; at + 16 <= bytes.size();) {
    const std::uint32_t caplen = c.u32(at + 8);
    if (bytes.size() - at - 16 < caplen) break;  // the capture was cut mid-record
    const std::int64_t t = static_cast<std::int64_t>(c.u32(at)) * 1'000'000'000 +
                           static_cast<std::int64_t>(c.u32(at + 4)) * (nano ? 1 : 1000);
    on_frame(linktype, t, bytes.substr(at + 16, caplen), m);
    at += 16 + caplen;
  }
  return true;
}

std::int64_t quantile(std::vector<std::int64_t>& v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const auto rank = static_cast<std::size_t>(std::ceil(p * static_cast<double>(v.size())));
  return v[std::clamp<std::size_t>(rank, 1, v.size()) - 1];
}

}  // namespace tokentap::bench
