#include "probes/dynamic_library.h"

#include <dlfcn.h>

namespace ncclguard::probes {

DynamicLibrary DynamicLibrary::Open(std::initializer_list<std::string> candidates) {
  DynamicLibrary library;
  for (const std::string& candidate : candidates) {
    // RTLD_LOCAL: two libfabric copies (EFA installer's and the system's) must not mix symbols.
    void* handle = dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle != nullptr) {
      library.handle_ = handle;
      library.path_ = candidate;
      return library;
    }
    const char* error = dlerror();
    if (!library.error_.empty()) library.error_ += "; ";
    library.error_ += error != nullptr ? error : candidate + ": cannot be loaded";
  }
  return library;
}

void* DynamicLibrary::RawSymbol(const char* name) const {
  if (handle_ == nullptr) return nullptr;
  return dlsym(handle_, name);
}

}  // namespace ncclguard::probes
