#pragma once

#include <initializer_list>
#include <string>

namespace ncclguard::probes {

// A vendor library opened with dlopen, so that one probe binary runs on nodes without it and
// reports "not present" instead of failing to start. Never unloaded: drivers (libcuda) do not
// support being unloaded while the process runs, and the probe is short-lived.
class DynamicLibrary {
 public:
  // Tries each candidate in order (absolute paths, or sonames for the loader's search).
  static DynamicLibrary Open(std::initializer_list<std::string> candidates);

  bool Loaded() const { return handle_ != nullptr; }
  const std::string& Path() const { return path_; }
  // Each candidate that did not load, with its dlerror (also when a later one loaded).
  const std::string& Error() const { return error_; }

  // nullptr when absent; the caller names the type from the vendor header.
  template <typename Function>
  Function Symbol(const char* name) const {
    return reinterpret_cast<Function>(RawSymbol(name));
  }

 private:
  void* RawSymbol(const char* name) const;

  void* handle_ = nullptr;
  std::string path_;
  std::string error_;
};

}  // namespace ncclguard::probes
