// The GPU check's NCCL job (scripts/gpu-ras-check.sh): one process, a communicator over every
// GPU it sees (ncclCommInitAll), AllReduces for --run seconds, then the communicator held idle
// for --hold seconds while the script reads its RAS service. NCCL and the CUDA runtime are the
// PyPI wheels' libraries, opened with dlopen (paths from the environment), so this builds
// anywhere and needs neither CUDA's nor NCCL's headers; only the few entry points used are
// declared, with the C ABI NCCL and CUDA document.
#include <dlfcn.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

namespace {

using Comm = void*;
using Stream = void*;

struct Api {
  int (*cudaGetDeviceCount)(int*);
  int (*cudaSetDevice)(int);
  int (*cudaMalloc)(void**, std::size_t);
  int (*cudaStreamCreate)(Stream*);
  int (*cudaStreamSynchronize)(Stream);
  int (*ncclGetVersion)(int*);
  int (*ncclCommInitAll)(Comm*, int, const int*);
  int (*ncclGroupStart)();
  int (*ncclGroupEnd)();
  int (*ncclAllReduce)(const void*, void*, std::size_t, int, int, Comm, Stream);
  int (*ncclCommDestroy)(Comm);
};

template <typename F>
void Bind(void* library, const char* name, F& out) {
  out = reinterpret_cast<F>(dlsym(library, name));
  if (out == nullptr) {
    std::fprintf(stderr, "nccl_ras_check: %s not found: %s\n", name, dlerror());
    std::exit(2);
  }
}

void* Open(const char* variable, const char* fallback) {
  const char* path = std::getenv(variable);
  void* library = dlopen(path != nullptr ? path : fallback, RTLD_NOW | RTLD_GLOBAL);
  if (library == nullptr) {
    std::fprintf(stderr, "nccl_ras_check: cannot open %s (set %s): %s\n",
                 path != nullptr ? path : fallback, variable, dlerror());
    std::exit(2);
  }
  return library;
}

void Check(int result, const char* what) {
  if (result == 0) return;
  std::fprintf(stderr, "nccl_ras_check: %s failed: %d\n", what, result);
  std::exit(1);
}

}  // namespace

int main(int argc, char** argv) {
  double run_seconds = 5;
  double hold_seconds = 60;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--run") run_seconds = std::atof(argv[i + 1]);
    if (flag == "--hold") hold_seconds = std::atof(argv[i + 1]);
  }
  Api api{};
  void* cudart = Open("NCCLGUARD_CUDART", "libcudart.so");
  void* nccl = Open("NCCLGUARD_NCCL", "libnccl.so.2");
  Bind(cudart, "cudaGetDeviceCount", api.cudaGetDeviceCount);
  Bind(cudart, "cudaSetDevice", api.cudaSetDevice);
  Bind(cudart, "cudaMalloc", api.cudaMalloc);
  Bind(cudart, "cudaStreamCreate", api.cudaStreamCreate);
  Bind(cudart, "cudaStreamSynchronize", api.cudaStreamSynchronize);
  Bind(nccl, "ncclGetVersion", api.ncclGetVersion);
  Bind(nccl, "ncclCommInitAll", api.ncclCommInitAll);
  Bind(nccl, "ncclGroupStart", api.ncclGroupStart);
  Bind(nccl, "ncclGroupEnd", api.ncclGroupEnd);
  Bind(nccl, "ncclAllReduce", api.ncclAllReduce);
  Bind(nccl, "ncclCommDestroy", api.ncclCommDestroy);

  int gpus = 0;
  Check(api.cudaGetDeviceCount(&gpus), "cudaGetDeviceCount");
  int version = 0;
  Check(api.ncclGetVersion(&version), "ncclGetVersion");
  std::vector<int> devices(static_cast<std::size_t>(gpus));
  for (int d = 0; d < gpus; ++d) devices[static_cast<std::size_t>(d)] = d;
  std::vector<Comm> comms(devices.size());
  Check(api.ncclCommInitAll(comms.data(), gpus, devices.data()), "ncclCommInitAll");

  constexpr std::size_t kFloats = 1 << 20;
  std::vector<void*> buffers(devices.size());
  std::vector<Stream> streams(devices.size());
  for (std::size_t d = 0; d < devices.size(); ++d) {
    Check(api.cudaSetDevice(devices[d]), "cudaSetDevice");
    Check(api.cudaMalloc(&buffers[d], kFloats * sizeof(float)), "cudaMalloc");
    Check(api.cudaStreamCreate(&streams[d]), "cudaStreamCreate");
  }
  std::printf("ready pid=%d nccl=%d gpus=%d\n", static_cast<int>(getpid()), version, gpus);
  std::fflush(stdout);

  long long collectives = 0;
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(run_seconds);
  while (std::chrono::steady_clock::now() < until) {
    Check(api.ncclGroupStart(), "ncclGroupStart");
    for (std::size_t d = 0; d < devices.size(); ++d) {
      // ncclFloat32 = 7, ncclSum = 0 (nccl.h's enums).
      Check(api.ncclAllReduce(buffers[d], buffers[d], kFloats, 7, 0, comms[d], streams[d]),
            "ncclAllReduce");
    }
    Check(api.ncclGroupEnd(), "ncclGroupEnd");
    for (std::size_t d = 0; d < devices.size(); ++d) {
      Check(api.cudaSetDevice(devices[d]), "cudaSetDevice");
      Check(api.cudaStreamSynchronize(streams[d]), "cudaStreamSynchronize");
    }
    ++collectives;
  }
  std::printf("allreduces=%lld, holding %.0fs\n", collectives, hold_seconds);
  std::fflush(stdout);
  std::this_thread::sleep_for(std::chrono::duration<double>(hold_seconds));
  for (Comm comm : comms) api.ncclCommDestroy(comm);
  return 0;
}
