#include "webhook/file_watch.h"

#include <sys/stat.h>

namespace ncclguard::webhook {

FileWatch::FileWatch(std::vector<std::string> paths) : paths_(std::move(paths)) { Accept(); }

std::vector<FileWatch::Stamp> FileWatch::Current() const {
  std::vector<Stamp> stamps;
  stamps.reserve(paths_.size());
  for (const auto& path : paths_) {
    Stamp stamp;
    struct stat info {};
    if (::stat(path.c_str(), &info) == 0) {  // follows the ..data symlink of a volume
      stamp.exists = true;
      stamp.device = static_cast<unsigned long long>(info.st_dev);
      stamp.inode = static_cast<unsigned long long>(info.st_ino);
      stamp.size = static_cast<unsigned long long>(info.st_size);
      stamp.mtime_ns = static_cast<long long>(info.st_mtim.tv_sec) * 1000000000LL +
                       static_cast<long long>(info.st_mtim.tv_nsec);
    }
    stamps.push_back(stamp);
  }
  return stamps;
}

bool FileWatch::Changed() const { return Current() != accepted_; }

void FileWatch::Accept() { accepted_ = Current(); }

}  // namespace ncclguard::webhook
