// Runs work in a child process under a CPU-time and an address-space limit, so that a test can
// say "this input costs linear time and bounded memory" without timing anything: the limits are
// tens of times what the work needs, and far below what a quadratic or unbounded version needs
// (which the child then dies of: SIGXCPU, or std::bad_alloc and an abort).
#pragma once

#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstddef>
#include <cstdio>
#include <exception>
#include <fstream>
#include <functional>
#include <string>

namespace ncclguard::test {

struct BoundedRun {
  bool finished = false;   // the work returned (or threw) and the child exited by itself
  int signal = 0;          // what ended the child otherwise (SIGXCPU: out of CPU time)
  std::string result;      // what the work returned, or "exception: ..." when it threw
  double cpu_seconds = 0;  // what the child used, for the failure message
};

// The child's address space may grow by `extra_address_space` bytes over the parent's.
inline BoundedRun RunBounded(int cpu_seconds, std::size_t extra_address_space,
                             const std::function<std::string()>& work) {
  std::size_t pages = 0;
  std::ifstream("/proc/self/statm") >> pages;
  const auto address_space = static_cast<rlim_t>(
      pages * static_cast<std::size_t>(sysconf(_SC_PAGESIZE)) + extra_address_space);
  int out[2];
  if (pipe(out) != 0) return {};
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    close(out[0]);
    const rlimit cpu{static_cast<rlim_t>(cpu_seconds), static_cast<rlim_t>(cpu_seconds)};
    const rlimit memory{address_space, address_space};
    setrlimit(RLIMIT_CPU, &cpu);
    setrlimit(RLIMIT_AS, &memory);
    std::string result;
    try {
      result = work();
    } catch (const std::exception& e) {
      result = std::string("exception: ") + e.what();
    }
    for (std::size_t done = 0; done < result.size();) {
      const ssize_t n = write(out[1], result.data() + done, result.size() - done);
      if (n <= 0) break;
      done += static_cast<std::size_t>(n);
    }
    _exit(0);
  }
  close(out[1]);
  BoundedRun run;
  char buffer[4096];
  for (ssize_t n; (n = read(out[0], buffer, sizeof buffer)) > 0;) {
    run.result.append(buffer, static_cast<std::size_t>(n));
  }
  close(out[0]);
  int status = 0;
  rusage usage{};
  wait4(pid, &status, 0, &usage);
  run.cpu_seconds = static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
                    static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
  run.finished = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  run.signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  return run;
}

}  // namespace ncclguard::test
