// A stand-in for the NVIDIA driver (libcuda.so.1) for machines without a GPU.
//
// It models what dyntrace's runtime relies on: device memory that the host cannot dereference,
// copies in both directions, memset, streams and events (work runs at once, so everything is
// already complete), pinned host memory, and error codes with names and descriptions. Device
// addresses are offsets into a private arena tagged with a non-canonical high bit pattern, so
// host code that wrongly reads a device pointer faults instead of silently working. Kernels
// cannot run: module loading and launches fail with CUDA_ERROR_NOT_SUPPORTED, which is what
// the runtime's error paths are tested against.
//
// Loaded by tests through DYNTRACE_LIBCUDA=<path of this library>.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <map>

namespace {

constexpr int kSuccess = 0;
constexpr int kInvalidValue = 1;
constexpr int kOutOfMemory = 2;
constexpr int kInvalidDevice = 101;
constexpr int kNotSupported = 801;
constexpr uint64_t kDeviceTag = 0xD000000000000000ull;

struct Arena {
  std::mutex mu;
  std::map<uint64_t, std::pair<char*, size_t>> blocks;  // device address -> host bytes, size
  uint64_t next = 0x1000;
  size_t in_use = 0;
  size_t limit = 0;
  long allocations = 0;
};

Arena& arena() {
  static Arena* a = [] {
    auto* x = new Arena();
    const char* limit = std::getenv("FAKE_CUDA_MEMORY_BYTES");
    x->limit = limit ? std::strtoull(limit, nullptr, 10) : (size_t{1} << 32);
    return x;
  }();
  return *a;
}

// The host bytes behind [address, address + n); null when the range is not inside one block.
char* Translate(uint64_t address, size_t n) {
  Arena& a = arena();
  std::lock_guard<std::mutex> lock(a.mu);
  auto it = a.blocks.upper_bound(address);
  if (it == a.blocks.begin()) return nullptr;
  --it;
  const uint64_t start = it->first;
  if (address < start || address + n > start + it->second.second) return nullptr;
  return it->second.first + (address - start);
}

int device_count() {
  const char* n = std::getenv("FAKE_CUDA_DEVICES");
  return n ? std::atoi(n) : 1;
}

}  // namespace

extern "C" {

int cuInit(unsigned) { return device_count() > 0 ? kSuccess : 100; /* CUDA_ERROR_NO_DEVICE */ }
int cuDriverGetVersion(int* v) { *v = 13000; return kSuccess; }
int cuGetErrorName(int e, const char** s) {
  switch (e) {
    case kSuccess: *s = "CUDA_SUCCESS"; break;
    case kInvalidValue: *s = "CUDA_ERROR_INVALID_VALUE"; break;
    case kOutOfMemory: *s = "CUDA_ERROR_OUT_OF_MEMORY"; break;
    case 100: *s = "CUDA_ERROR_NO_DEVICE"; break;
    case kInvalidDevice: *s = "CUDA_ERROR_INVALID_DEVICE"; break;
    case kNotSupported: *s = "CUDA_ERROR_NOT_SUPPORTED"; break;
    default: *s = "CUDA_ERROR_UNKNOWN"; break;
  }
  return kSuccess;
}
int cuGetErrorString(int e, const char** s) {
  switch (e) {
    case kOutOfMemory: *s = "out of memory"; break;
    case 100: *s = "no CUDA-capable device is detected"; break;
    case kNotSupported: *s = "operation not supported (fake driver: kernels cannot run)"; break;
    case kInvalidValue: *s = "invalid argument"; break;
    default: *s = "unknown error"; break;
  }
  return kSuccess;
}
int cuDeviceGetCount(int* n) { *n = device_count(); return kSuccess; }
int cuDeviceGet(int* d, int ordinal) {
  if (ordinal < 0 || ordinal >= device_count()) return kInvalidDevice;
  *d = ordinal;
  return kSuccess;
}
int cuDeviceGetName(char* name, int len, int) { std::strncpy(name, "dyntrace fake GPU", len); return kSuccess; }
int cuDeviceGetAttribute(int* v, int attribute, int) {
  switch (attribute) {
    case 75: *v = 9; break;   // compute capability major
    case 76: *v = 0; break;   // minor
    case 16: *v = 4; break;   // multiprocessors
    default: *v = 0; break;
  }
  return kSuccess;
}
int cuDevicePrimaryCtxRetain(void** ctx, int d) { *ctx = reinterpret_cast<void*>(uintptr_t(0x100 + d)); return kSuccess; }
int cuCtxSetCurrent(void*) { return kSuccess; }

int cuMemAlloc_v2(uint64_t* ptr, size_t n) {
  Arena& a = arena();
  std::lock_guard<std::mutex> lock(a.mu);
  if (a.in_use + n > a.limit) return kOutOfMemory;
  char* host = static_cast<char*>(std::calloc(n ? n : 1, 1));
  if (host == nullptr) return kOutOfMemory;
  const uint64_t address = kDeviceTag | a.next;
  a.next += (n + 511) / 256 * 256;
  a.blocks[address] = {host, n};
  a.in_use += n;
  ++a.allocations;
  *ptr = address;
  return kSuccess;
}
int cuMemFree_v2(uint64_t ptr) {
  Arena& a = arena();
  std::lock_guard<std::mutex> lock(a.mu);
  auto it = a.blocks.find(ptr);
  if (it == a.blocks.end()) return kInvalidValue;
  std::free(it->second.first);
  a.in_use -= it->second.second;
  a.blocks.erase(it);
  return kSuccess;
}
int cuMemHostAlloc(void** p, size_t n, unsigned) { *p = std::aligned_alloc(4096, (n + 4095) / 4096 * 4096); return *p ? kSuccess : kOutOfMemory; }
int cuMemFreeHost(void* p) { std::free(p); return kSuccess; }
int cuMemcpyHtoDAsync_v2(uint64_t dst, const void* src, size_t n, void*) {
  char* d = Translate(dst, n);
  if (d == nullptr) return kInvalidValue;
  std::memcpy(d, src, n);
  return kSuccess;
}
int cuMemcpyDtoHAsync_v2(void* dst, uint64_t src, size_t n, void*) {
  char* s = Translate(src, n);
  if (s == nullptr) return kInvalidValue;
  std::memcpy(dst, s, n);
  return kSuccess;
}
int cuMemcpyDtoDAsync_v2(uint64_t dst, uint64_t src, size_t n, void*) {
  char* d = Translate(dst, n);
  char* s = Translate(src, n);
  if (d == nullptr || s == nullptr) return kInvalidValue;
  std::memmove(d, s, n);
  return kSuccess;
}
int cuMemsetD8Async(uint64_t dst, unsigned char v, size_t n, void*) {
  char* d = Translate(dst, n);
  if (d == nullptr) return kInvalidValue;
  std::memset(d, v, n);
  return kSuccess;
}
int cuStreamCreate(void** s, unsigned) { static int streams; *s = reinterpret_cast<void*>(uintptr_t(0x200 + ++streams)); return kSuccess; }
int cuStreamDestroy_v2(void*) { return kSuccess; }
int cuStreamSynchronize(void*) { return kSuccess; }
int cuStreamWaitEvent(void*, void*, unsigned) { return kSuccess; }
int cuEventCreate(void** e, unsigned) { static int events; *e = reinterpret_cast<void*>(uintptr_t(0x300 + ++events)); return kSuccess; }
int cuEventRecord(void*, void*) { return kSuccess; }
int cuEventQuery(void*) { return kSuccess; }
int cuEventSynchronize(void*) { return kSuccess; }
int cuEventElapsedTime_v2(float* ms, void*, void*) { *ms = 0; return kSuccess; }
int cuEventDestroy_v2(void*) { return kSuccess; }
int cuModuleLoadData(void**, const void*) { return kNotSupported; }
int cuModuleUnload(void*) { return kSuccess; }
int cuModuleGetFunction(void**, void*, const char*) { return kNotSupported; }
int cuFuncSetAttribute(void*, int, int) { return kNotSupported; }
int cuLaunchKernel(void*, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void*, void**, void**) { return kNotSupported; }
int cuStreamBeginCapture_v2(void*, int) { return kNotSupported; }
int cuStreamEndCapture(void*, void**) { return kNotSupported; }
int cuGraphInstantiateWithFlags(void**, void*, unsigned long long) { return kNotSupported; }
int cuGraphLaunch(void*, void*) { return kNotSupported; }
int cuGraphGetNodes(void*, void**, size_t*) { return kNotSupported; }
int cuGraphNodeGetType(void*, int*) { return kNotSupported; }
int cuGraphKernelNodeGetParams_v2(void*, void*) { return kNotSupported; }
int cuGraphExecKernelNodeSetParams_v2(void*, void*, const void*) { return kNotSupported; }
int cuGraphExecDestroy(void*) { return kSuccess; }
int cuGraphDestroy(void*) { return kSuccess; }

// For tests: driver allocations so far, and bytes allocated now.
long fakeCudaAllocations() { return arena().allocations; }
long fakeCudaBytesInUse() { return static_cast<long>(arena().in_use); }
// For the fake cuBLAS: the host bytes behind a device range, or null.
char* fakeCudaHostAddress(uint64_t address, size_t n) { return Translate(address, n); }

}  // extern "C"
