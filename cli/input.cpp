#include "cli/input.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>

#include "core/errors.h"

namespace ncclguard::cli {

namespace {
std::string Describe(const std::string& path) {
  return path == "-" ? std::string("<stdin>") : path;
}

std::string ReadStream(std::istream& in, const std::string& path) {
  std::string text;
  char buffer[1 << 16];
  while (in.read(buffer, sizeof buffer) || in.gcount() > 0) {
    text.append(buffer, static_cast<std::size_t>(in.gcount()));
    if (text.size() > kMaxInputBytes) {
      throw core::InputError(Describe(path) + ": larger than the " +
                             std::to_string(kMaxInputBytes >> 20) + " MiB input limit");
    }
  }
  if (in.bad()) throw core::InputError(Describe(path) + ": read error");
  return text;
}
}  // namespace

std::string ReadInput(const std::string& path) {
  if (path == "-") return ReadStream(std::cin, path);
  std::error_code error;
  if (std::filesystem::is_directory(path, error)) throw core::InputError(path + ": is a directory");
  std::ifstream file(path, std::ios::binary);
  if (!file) throw core::InputError(path + ": cannot open: " + std::strerror(errno));
  return ReadStream(file, path);
}

}  // namespace ncclguard::cli
