#pragma once

#include <stdexcept>
#include <string>

namespace ncclguard::core {

// Input that the rules cannot read: the message names where (a JSON Pointer or document) and why.
class InputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A policy file or value that cannot be used.
class PolicyError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace ncclguard::core
