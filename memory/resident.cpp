#include "memory/resident.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>

namespace ncclguard::memory {

std::optional<std::size_t> ResidentBytes() {
  const int fd = ::open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  char text[128];
  const ssize_t length = ::read(fd, text, sizeof text - 1);
  ::close(fd);
  if (length <= 0) return std::nullopt;
  text[length] = '\0';
  // "size resident shared text lib data dt", in pages.
  char* end = nullptr;
  std::strtoull(text, &end, 10);
  if (end == text || *end != ' ') return std::nullopt;
  const char* resident_text = end + 1;
  const unsigned long long pages = std::strtoull(resident_text, &end, 10);
  if (end == resident_text) return std::nullopt;
  const long page = ::sysconf(_SC_PAGESIZE);
  if (page <= 0) return std::nullopt;
  return static_cast<std::size_t>(pages) * static_cast<std::size_t>(page);
}

}  // namespace ncclguard::memory
