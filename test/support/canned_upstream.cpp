#include "test/support/canned_upstream.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <stdexcept>

namespace tokentap::test {

namespace {

bool send_all(int fd, const std::string& s) {
  for (std::size_t at = 0; at < s.size();) {
    const auto n = ::send(fd, s.data() + at, s.size() - at, MSG_NOSIGNAL);
    if (n <= 0) return false;
    at += static_cast<std::size_t>(n);
  }
  return true;
}

std::string chunk(const std::string& s) {
  char size[32];
  std::snprintf(size, sizeof size, "%zx\r\n", s.size());
  return size + s + "\r\n";
}

}  // namespace

canned_upstream::canned_upstream(std::map<std::string, canned_response> responses)
    : responses_(std::move(responses)) {
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (listen_fd_ < 0 || ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::listen(listen_fd_, 64) != 0 ||
      ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0)
    throw std::runtime_error("canned_upstream: cannot listen on 127.0.0.1");
  port_ = ntohs(a.sin_port);
  acceptor_ = std::thread([this] {
    while (!stop_) {
      pollfd p{listen_fd_, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      const int fd = ::accept(listen_fd_, nullptr, nullptr);
      if (fd < 0) continue;
      std::lock_guard lk(mu_);
      connections_.emplace_back([this, fd] { serve(fd); });
    }
  });
}

canned_upstream::~canned_upstream() {
  stop_ = true;
  acceptor_.join();
  for (auto& t : connections_) t.join();
  ::close(listen_fd_);
}

void canned_upstream::serve(int fd) {
  std::string in;
  char buf[16384];
  while (!stop_) {
    // One request: the head, then a Content-Length body.
    std::size_t head_end;
    while ((head_end = in.find("\r\n\r\n")) == std::string::npos) {
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) {
        if (stop_) break;
        continue;
      }
      const auto n = ::recv(fd, buf, sizeof buf, 0);
      if (n <= 0) {
        ::close(fd);
        return;
      }
      in.append(buf, static_cast<std::size_t>(n));
    }
    if (head_end == std::string::npos) break;
    const std::string head = in.substr(0, head_end);
    std::size_t length = 0;
    for (std::string_view name : {"content-length:", "Content-Length:"})
      if (const auto k = head.find(name); k != std::string::npos)
        length = std::stoul(head.substr(k + name.size()));
    while (in.size() < head_end + 4 + length) {
      const auto n = ::recv(fd, buf, sizeof buf, 0);
      if (n <= 0) {
        ::close(fd);
        return;
      }
      in.append(buf, static_cast<std::size_t>(n));
    }
    {
      std::lock_guard lk(mu_);
      received_.push_back({head, in.substr(head_end + 4, length)});
    }
    in.erase(0, head_end + 4 + length);
    ++requests;
    const auto sp1 = head.find(' '), sp2 = head.find(' ', sp1 + 1);
    const auto target = head.substr(sp1 + 1, sp2 - sp1 - 1);
    const auto it = responses_.find(target);
    if (it == responses_.end()) {
      send_all(fd, "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n");
      continue;
    }
    const auto& r = it->second;
    bool ok = send_all(
        fd, "HTTP/1.1 " + std::to_string(r.status) + " " + (r.status == 200 ? "OK" : "Canned") +
                "\r\nContent-Type: " + r.content_type + "\r\nTransfer-Encoding: chunked\r\n\r\n");
    for (std::size_t i = 0; ok && i < r.events.size(); ++i) {
      if (i > 0) std::this_thread::sleep_for(r.gap);
      ok = send_all(fd, chunk(r.events[i]));
    }
    if (!ok || !send_all(fd, "0\r\n\r\n")) break;
  }
  ::close(fd);
}

std::string ready_endpoint(const std::string& line, const std::string& key) {
  const auto k = line.find(key + "=");
  if (k == std::string::npos) return {};
  const auto start = k + key.size() + 1;
  return line.substr(start, line.find(' ', start) - start);
}

}  // namespace tokentap::test
