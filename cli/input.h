#pragma once

#include <cstddef>
#include <string>

namespace ncclguard::cli {

// Inputs larger than this are refused before parsing: Kubernetes objects are at most ~1.5 MB,
// and a multi-document file of thousands of them stays well below it.
inline constexpr std::size_t kMaxInputBytes = 32u * 1024u * 1024u;

// Reads a file, or standard input for "-". Throws core::InputError naming the file.
std::string ReadInput(const std::string& path);

}  // namespace ncclguard::cli
