#include "sim/fleet.hpp"

namespace tokentap::sim {

fleet::fleet(server_options opts, unsigned replicas) : opts_(std::move(opts)) {
  for (unsigned i = 0; i < replicas; ++i) {
    auto o = opts_;
    if (o.port != 0) o.port = static_cast<std::uint16_t>(opts_.port + i);
    auto s = std::make_unique<server>(o);
    s->start();  // (a throw here stops the ones started: their destructors shut them down)
    ports_.push_back(s->endpoint().port());
    servers_.push_back(std::move(s));
  }
}

fleet::~fleet() {
  shutdown(std::chrono::milliseconds(0));
  join();
}

std::uint64_t fleet::requests(std::size_t i) {
  std::lock_guard lk(mu_);
  return servers_[i] ? servers_[i]->stats().requests.load() : 0;
}

bool fleet::up(std::size_t i) {
  std::lock_guard lk(mu_);
  return servers_[i] != nullptr;
}

void fleet::take_down(std::size_t i) {
  std::unique_ptr<server> s;
  {
    std::lock_guard lk(mu_);
    s = std::move(servers_[i]);
  }
  if (s) {
    s->shutdown(std::chrono::milliseconds(0));
    s->join();
  }
}

bool fleet::bring_up(std::size_t i) {
  std::lock_guard lk(mu_);
  if (servers_[i]) return true;
  auto o = opts_;
  o.port = ports_[i];
  try {
    auto s = std::make_unique<server>(o);
    s->start();
    servers_[i] = std::move(s);
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

void fleet::shutdown(std::chrono::milliseconds grace) {
  std::lock_guard lk(mu_);
  for (auto& s : servers_)
    if (s) s->shutdown(grace);
}

void fleet::join() {
  // Without the lock while waiting: shutdown() comes from another thread meanwhile.
  std::vector<server*> up;
  {
    std::lock_guard lk(mu_);
    for (auto& s : servers_)
      if (s) up.push_back(s.get());
  }
  for (auto* s : up) s->join();
}

}  // namespace tokentap::sim
