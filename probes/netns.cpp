#include "probes/netns.h"

#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <exception>
#include <stdexcept>
#include <thread>

namespace ncclguard::probes {

void RunInNetworkNamespace(const std::string& path, const std::function<void()>& work) {
  std::string error;
  std::exception_ptr failure;
  std::thread inside([&] {
    const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      const int reason = errno;
      error = "opening " + path + ": " + std::strerror(reason) +
              (reason == ENOENT ? " (the host's /proc is not under the host root)"
               : reason == EACCES || reason == EPERM
                   ? " (another process's namespace takes the privileged probe)"
                   : "");
      return;
    }
    if (setns(fd, CLONE_NEWNET) != 0) {
      const int reason = errno;
      close(fd);
      error = "entering the network namespace " + path + ": " + std::strerror(reason) +
              (reason == EPERM ? " (needs CAP_SYS_ADMIN: the privileged probe)" : "");
      return;
    }
    close(fd);
    try {
      work();
    } catch (...) {
      failure = std::current_exception();
    }
  });
  inside.join();
  if (!error.empty()) throw std::runtime_error(error);
  if (failure) std::rethrow_exception(failure);
}

}  // namespace ncclguard::probes
