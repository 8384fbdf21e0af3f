// A stand-in libnccl.so.2 (see fake_cuda.cpp): ncclGetVersion answers NCCL 2.21.5.
extern "C" int ncclGetVersion(int* version) {
  *version = 22105;
  return 0;
}
