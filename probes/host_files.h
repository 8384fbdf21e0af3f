#pragma once

#include <cstddef>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace ncclguard::probes {

// Host paths as the probe sees them: the host's / is mounted at `root` (the DaemonSet mounts it
// read-only; tests point it at a fixture tree). Reads never throw: a missing, unreadable or
// oversized file is an error string the check can report.
class HostFiles {
 public:
  explicit HostFiles(std::filesystem::path root);

  const std::filesystem::path& Root() const { return root_; }
  // "/sys/class/infiniband" -> <root>/sys/class/infiniband
  std::filesystem::path Path(std::string_view host_path) const;

  struct Text {
    std::optional<std::string> content;
    std::string error;  // set when content is empty
  };
  // At most max_bytes are read (sysfs files are small; a huge file is not what we expect).
  Text Read(std::string_view host_path, std::size_t max_bytes = 64 * 1024) const;
  Text ReadPath(const std::filesystem::path& path, std::size_t max_bytes = 64 * 1024) const;

  // Entry names of a directory, sorted; empty when it is missing or unreadable.
  std::vector<std::string> List(std::string_view host_path) const;
  bool Exists(std::string_view host_path) const;

 private:
  std::filesystem::path root_;
};

// Leading and trailing whitespace removed.
std::string Trim(std::string_view text);

}  // namespace ncclguard::probes
