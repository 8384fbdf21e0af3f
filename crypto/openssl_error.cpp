#include "crypto/openssl_error.h"

#include <openssl/err.h>

namespace ncclguard::crypto {

std::string OpenSslError() {
  const unsigned long code = ERR_get_error();
  ERR_clear_error();
  if (code == 0) return "unknown OpenSSL error";
  char buffer[256];
  ERR_error_string_n(code, buffer, sizeof buffer);
  return buffer;
}

}  // namespace ncclguard::crypto
