// OpenSSL reports failures on a per-thread error queue; this turns the queue into the text our
// errors carry (webhook/ serving certificates, manager/ the self-managed CA).
#pragma once

#include <string>

namespace ncclguard::crypto {

// The oldest error on this thread's OpenSSL queue as text ("unknown OpenSSL error" when it is
// empty), and the queue cleared so the next failure does not report this one.
std::string OpenSslError();

}  // namespace ncclguard::crypto
