#pragma once
// Self-signed certificates made at test time with OpenSSL (no files checked in, nothing fetched).
#include <string>

namespace tokentap::test {

struct cert_files {
  std::string cert_path, key_path;
};

/// Writes a self-signed RSA certificate for `host` (as CN and DNS SAN, plus IP 127.0.0.1) and its
/// key into `dir`.
cert_files make_self_signed(const std::string& dir, const std::string& host);

/// A fresh temporary directory.
std::string temp_dir();

}  // namespace tokentap::test
