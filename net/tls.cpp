#include "net/tls.hpp"

#include <stdexcept>

namespace tokentap::net {

namespace ssl = boost::asio::ssl;

std::shared_ptr<ssl::context> tls_client_context(bool verify, const std::string& ca_file) {
  auto ctx = std::make_shared<ssl::context>(ssl::context::tls_client);
  boost::system::error_code ec;
  ctx->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                       ssl::context::no_sslv3 | ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1,
                   ec);
  if (!verify) {
    ctx->set_verify_mode(ssl::verify_none);
    return ctx;
  }
  ctx->set_verify_mode(ssl::verify_peer, ec);
  ctx->set_default_verify_paths(ec);
  if (ec) throw std::runtime_error("cannot load the system trust store: " + ec.message());
  if (!ca_file.empty()) {
    ctx->load_verify_file(ca_file, ec);
    if (ec) throw std::runtime_error("cannot load CA file '" + ca_file + "': " + ec.message());
  }
  return ctx;
}

std::shared_ptr<ssl::context> tls_server_context(const std::string& cert_file,
                                                 const std::string& key_file) {
  auto ctx = std::make_shared<ssl::context>(ssl::context::tls_server);
  boost::system::error_code ec;
  ctx->use_certificate_chain_file(cert_file, ec);
  if (ec) throw std::runtime_error("cannot load certificate '" + cert_file + "': " + ec.message());
  ctx->use_private_key_file(key_file, ssl::context::pem, ec);
  if (ec) throw std::runtime_error("cannot load key '" + key_file + "': " + ec.message());
  return ctx;
}

}  // namespace tokentap::net
