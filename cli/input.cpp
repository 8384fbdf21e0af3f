#include "cli/input.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

#include "core/errors.h"

namespace ncclguard::cli {

namespace {

constexpr std::size_t kReadStepBytes = 1 << 16;

// Reads `fd` to its end with read(2): std::cin took a read error (EISDIR when standard input is
// a directory, EIO) for the end of the input, and an input that could not be read passed as
// empty.
std::string ReadAll(int fd, const std::string& name) {
  std::string text;
  std::vector<char> buffer(kReadStepBytes);
  while (true) {
    const ssize_t n = ::read(fd, buffer.data(), buffer.size());
    if (n == 0) return text;
    if (n < 0) {
      if (errno == EINTR) continue;
      throw core::InputError(name + ": read error: " + std::strerror(errno));
    }
    text.append(buffer.data(), static_cast<std::size_t>(n));
    if (text.size() > kMaxInputBytes) {
      throw core::InputError(name + ": larger than the " + std::to_string(kMaxInputBytes >> 20) +
                             " MiB input limit");
    }
  }
}

class FileDescriptor {
 public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  ~FileDescriptor() { ::close(fd_); }
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

}  // namespace

std::string ReadInput(const std::string& path) {
  if (path == "-") return ReadAll(STDIN_FILENO, "<stdin>");
  std::error_code error;
  if (std::filesystem::is_directory(path, error)) throw core::InputError(path + ": is a directory");
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw core::InputError(path + ": cannot open: " + std::strerror(errno));
  const FileDescriptor file(fd);
  return ReadAll(file.get(), path);
}

}  // namespace ncclguard::cli
