// Notices when files change (Secret and ConfigMap volumes are swapped by symlink, so the
// identity of the file behind the path is compared, not only its mtime).
#pragma once

#include <string>
#include <vector>

namespace ncclguard::webhook {

class FileWatch {
 public:
  explicit FileWatch(std::vector<std::string> paths);

  // True when any file differs from the state last accepted with Accept().
  bool Changed() const;
  // Records the current state as seen; call after a successful reload.
  void Accept();

 private:
  struct Stamp {
    bool exists = false;
    unsigned long long device = 0, inode = 0, size = 0;
    long long mtime_ns = 0;
    bool operator==(const Stamp&) const = default;
  };
  std::vector<Stamp> Current() const;

  std::vector<std::string> paths_;
  std::vector<Stamp> accepted_;
};

}  // namespace ncclguard::webhook
