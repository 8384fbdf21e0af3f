#include "tests/unit/test_support.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "core/documents.h"

namespace ncclguard::test {

core::Json Yaml(const std::string& text) {
  core::DocumentSet set = core::ParseDocuments(text);
  if (set.documents.size() != 1) throw std::runtime_error("test manifest must hold one document");
  return set.documents.front();
}

core::Evaluation Check(const core::Json& object, const core::Policy& policy) {
  return core::Evaluate(object, policy);
}

std::vector<core::Finding> FindingsOf(const core::Evaluation& evaluation, const std::string& rule) {
  std::vector<core::Finding> out;
  std::copy_if(evaluation.findings.begin(), evaluation.findings.end(), std::back_inserter(out),
               [&](const core::Finding& f) { return f.rule == rule; });
  return out;
}

core::ObservedInstanceType ObservedType(const std::string& name, int gpus, int efa_devices,
                                        int nodes) {
  core::ObservedInstanceType type;
  type.name = name;
  type.gpus = gpus;
  type.efa_devices = efa_devices;
  type.nodes = nodes;
  return type;
}

core::Json CompliantPod() {
  return Yaml(R"(
apiVersion: v1
kind: Pod
metadata:
  name: trainer
  namespace: ml
spec:
  nodeSelector:
    node.kubernetes.io/instance-type: p5.48xlarge
  containers:
    - name: pytorch
      image: registry.example/train@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
      env:
        - name: FI_PROVIDER
          value: efa
        - name: FI_EFA_USE_DEVICE_RDMA
          value: "1"
        - name: NCCL_SOCKET_IFNAME
          value: ^lo,docker,efa,veth
        - name: TORCH_NCCL_ASYNC_ERROR_HANDLING
          value: "1"
        - name: NCCL_DEBUG
          value: INFO
        - name: NCCL_DEBUG_SUBSYS
          value: INIT,NET
      resources:
        requests:
          nvidia.com/gpu: 8
          vpc.amazonaws.com/efa: 32
          memory: 1000Gi
        limits:
          nvidia.com/gpu: 8
          vpc.amazonaws.com/efa: 32
          memory: 1000Gi
      securityContext:
        capabilities:
          add: [IPC_LOCK]
      volumeMounts:
        - name: dshm
          mountPath: /dev/shm
  volumes:
    - name: dshm
      emptyDir:
        medium: Memory
)");
}

std::string EnvPointer(const core::Json& object, const std::string& name,
                       const std::string& container) {
  const core::JsonPointer env(container + "/env");
  if (object.contains(env) && object.at(env).is_array()) {
    const core::Json& vars = object.at(env);
    for (std::size_t i = 0; i < vars.size(); ++i) {
      if (vars[i].is_object() && vars[i].value("name", "") == name)
        return env.to_string() + "/" + std::to_string(i);
    }
  }
  return env.to_string() + "/<no " + name + ">";
}

std::string SourcePath(const std::string& relative) {
  return std::string(NCCLGUARD_SOURCE_DIR) + "/" + relative;
}

std::string LogFixturePath(const std::string& name) {
  return SourcePath("tests/fixtures/logs/" + name);
}

std::string LogFixture(const std::string& name) { return ReadFile(LogFixturePath(name)); }

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

TempFile::TempFile(const std::string& content, const std::string& suffix) {
  static std::atomic<int> counter{0};
  path_ = (std::filesystem::temp_directory_path() / ("ncclguard-unit-" + std::to_string(getpid()) +
                                                     "-" + std::to_string(counter++) + suffix))
              .string();
  std::ofstream(path_, std::ios::binary) << content;
}

TempFile::~TempFile() { std::remove(path_.c_str()); }

CommandResult RunCli(const std::vector<std::string>& args, const std::string& stdin_text) {
  int in_pipe[2], out_pipe[2], err_pipe[2];
  if (pipe(in_pipe) != 0 || pipe(out_pipe) != 0 || pipe(err_pipe) != 0)
    throw std::runtime_error("pipe");
  const pid_t pid = fork();
  if (pid < 0) throw std::runtime_error("fork");
  if (pid == 0) {
    dup2(in_pipe[0], 0);
    dup2(out_pipe[1], 1);
    dup2(err_pipe[1], 2);
    for (int fd : {in_pipe[0], in_pipe[1], out_pipe[0], out_pipe[1], err_pipe[0], err_pipe[1]})
      close(fd);
    std::vector<char*> argv;
    std::string binary = NCCLGUARD_BINARY;
    argv.push_back(binary.data());
    std::vector<std::string> copy = args;
    for (std::string& a : copy) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(binary.c_str(), argv.data());
    _exit(127);
  }
  close(in_pipe[0]);
  close(out_pipe[1]);
  close(err_pipe[1]);
  CommandResult result;
  std::size_t written = 0;
  int in_fd = in_pipe[1];
  if (stdin_text.empty()) {
    close(in_fd);
    in_fd = -1;
  } else {
    fcntl(in_fd, F_SETFL, O_NONBLOCK);
  }
  bool out_open = true, err_open = true;
  char buffer[65536];
  while (out_open || err_open || in_fd >= 0) {
    pollfd fds[3];
    nfds_t n = 0;
    if (out_open) fds[n++] = {out_pipe[0], POLLIN, 0};
    if (err_open) fds[n++] = {err_pipe[0], POLLIN, 0};
    if (in_fd >= 0) fds[n++] = {in_fd, POLLOUT, 0};
    if (poll(fds, n, 30000) <= 0) break;
    for (nfds_t i = 0; i < n; ++i) {
      if (fds[i].revents == 0) continue;
      if (fds[i].fd == in_fd) {
        const ssize_t w = write(in_fd, stdin_text.data() + written, stdin_text.size() - written);
        if (w > 0) written += static_cast<std::size_t>(w);
        if (w < 0 || written == stdin_text.size()) {
          close(in_fd);
          in_fd = -1;
        }
        continue;
      }
      const ssize_t r = read(fds[i].fd, buffer, sizeof buffer);
      std::string& sink = fds[i].fd == out_pipe[0] ? result.out : result.err;
      if (r > 0) {
        sink.append(buffer, static_cast<std::size_t>(r));
      } else {
        (fds[i].fd == out_pipe[0] ? out_open : err_open) = false;
      }
    }
  }
  if (in_fd >= 0) close(in_fd);
  close(out_pipe[0]);
  close(err_pipe[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

}  // namespace ncclguard::test
