// A stand-in for the NVIDIA driver (libcuda.so.1) for machines without a GPU.
//
// It models what dyntrace's runtime relies on: device memory that the host cannot dereference,
// copies in both directions, memset, streams and events (work runs at once, so everything is
// already complete), pinned host memory, and error codes with names and descriptions. Device
// addresses are offsets into a private arena tagged with a non-canonical high bit pattern, so
// host code that wrongly reads a device pointer faults instead of silently working. Kernels
// cannot run: module loading and launches fail with CUDA_ERROR_NOT_SUPPORTED, which is what
// the runtime's error paths are tested against. With FAKE_CUDA_ACCEPT_MODULES=1, modules load
// (a CUBIN's functions are looked up in its symbol names) and launches are accepted without
// running anything (results are garbage), so the mechanics
// around them can be tested: stream capture into graphs (a chain of kernel nodes holding
// copies of dyntrace's argument struct), instantiation, node re-pointing and graph launches,
// with every operand address checked to be device memory. During a capture, allocating or
// synchronising fails and invalidates it, as a real driver does in thread-local mode.
//
// Loaded by tests through DYNTRACE_LIBCUDA=<path of this library>.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "jit/cuda_launch_abi.h"
#include "runtime/index_kernel_abi.h"

namespace {

constexpr int kSuccess = 0;
constexpr int kInvalidValue = 1;
constexpr int kOutOfMemory = 2;
constexpr int kInvalidDevice = 101;
constexpr int kNotFound = 500;
constexpr int kNotSupported = 801;
constexpr int kCaptureUnsupported = 900;
constexpr int kCaptureInvalidated = 901;
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

bool accept_modules() {
  const char* v = std::getenv("FAKE_CUDA_ACCEPT_MODULES");
  return v != nullptr && v[0] == '1';
}

struct FakeFunction {
  std::string name;
  int max_dynamic_shared = 0;  // raised above 48 KiB only by cuFuncSetAttribute
};

struct FakeNode {
  void* function;
  unsigned grid, block, shared;
  dt::CudaKernelArgs args;
};

// CUDA_KERNEL_NODE_PARAMS_v2, as the driver ABI defines it.
struct KernelNodeParams {
  void* func;
  unsigned grid_x, grid_y, grid_z, block_x, block_y, block_z, shared_bytes;
  void** kernel_params;
  void** extra;
  void* kern;
  void* ctx;
};

struct FakeGraph {
  std::vector<std::unique_ptr<FakeNode>> nodes;
};

struct Capture {
  std::mutex mu;
  bool active = false;
  bool invalidated = false;
  FakeGraph* graph = nullptr;
  long launches = 0, graph_launches = 0, node_updates = 0, captures = 0;
};

Capture& capture() {
  static auto* c = new Capture();
  return *c;
}

// An operation a capture forbids: invalidates the capture in progress.
bool ForbiddenDuringCapture() {
  Capture& c = capture();
  std::lock_guard<std::mutex> lock(c.mu);
  if (!c.active) return false;
  c.invalidated = true;
  return true;
}

// Whether every operand of `args` lies inside one device block: every byte its elements reach
// (over all rows and the inner dim, negative strides included) when the launch says how wide its
// elements are, else its first byte.
bool ArgsInsideDevice(const dt::CudaKernelArgs& args) {
  for (int k = 0; k < dt::kCudaMaxOperands; ++k) {
    char* p = args.data[k];
    if (p == nullptr) continue;
    const int64_t itemsize = args.itemsizes[k];
    if (itemsize <= 0 || args.rows == 0 || args.n == 0) {
      if (Translate(reinterpret_cast<uint64_t>(p), 1) == nullptr) return false;
      continue;
    }
    int64_t low = 0, high = 0;  // element offsets reached
    auto reach = [&](int64_t size, int64_t stride) { (stride < 0 ? low : high) += (size - 1) * stride; };
    for (int64_t d = 0; d < args.outer_rank; ++d) reach(args.outer_sizes[d], args.outer_strides[k][d]);
    reach(args.n, args.inner_strides[k]);
    const uint64_t first = reinterpret_cast<uint64_t>(p) + static_cast<uint64_t>(low * itemsize);
    if (Translate(first, static_cast<size_t>((high - low + 1) * itemsize)) == nullptr) return false;
  }
  return args.workspace == nullptr || Translate(reinterpret_cast<uint64_t>(args.workspace), 1) != nullptr;
}

// The index kernels (runtime/index_kernels.cuh) take an IxArgs, which states the byte range
// each operand may touch: every range must lie inside one device allocation.
bool IndexArgsInsideDevice(const dt::IxArgs& args) {
  for (int64_t k = 0; k < args.operands && k < dt::kIxMaxOperands; ++k) {
    const dt::IxOperand& o = args.op[k];
    if (o.data == nullptr || args.numel == 0) continue;
    if (o.high_bytes <= o.low_bytes) return false;
    const uint64_t first = reinterpret_cast<uint64_t>(o.data) + static_cast<uint64_t>(o.low_bytes);
    if (Translate(first, static_cast<size_t>(o.high_bytes - o.low_bytes)) == nullptr) return false;
  }
  return args.error == nullptr || Translate(reinterpret_cast<uint64_t>(args.error), sizeof(uint64_t)) != nullptr;
}

// The limits of the device the stand-in reports (an H200: sm_90, 132 SMs).
constexpr int kMaxThreadsPerBlock = 1024;
constexpr unsigned kMaxGridX = 0x7fffffffu;
constexpr int kDefaultSharedBytes = 48 * 1024;
constexpr int kMaxSharedOptIn = 227 * 1024;

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
    case kNotFound: *s = "CUDA_ERROR_NOT_FOUND"; break;
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
    case kNotFound: *s = "named symbol not found"; break;
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
    case 16: *v = 132; break;  // multiprocessors
    case 1: *v = kMaxThreadsPerBlock; break;  // max threads per block
    case 97: *v = kMaxSharedOptIn; break;     // max shared memory per block (opt-in)
    default: *v = 0; break;
  }
  return kSuccess;
}
int cuDevicePrimaryCtxRetain(void** ctx, int d) { *ctx = reinterpret_cast<void*>(uintptr_t(0x100 + d)); return kSuccess; }
int cuCtxSetCurrent(void*) { return kSuccess; }

int cuMemAlloc_v2(uint64_t* ptr, size_t n) {
  if (ForbiddenDuringCapture()) return kCaptureUnsupported;
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
  if (ForbiddenDuringCapture()) return kCaptureUnsupported;
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
  if (ForbiddenDuringCapture()) return kCaptureUnsupported;
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
int cuMemsetD16Async(uint64_t dst, unsigned short v, size_t n, void*) {
  char* d = Translate(dst, n * sizeof(v));
  if (d == nullptr || dst % sizeof(v) != 0) return kInvalidValue;
  for (size_t i = 0; i < n; ++i) std::memcpy(d + i * sizeof(v), &v, sizeof(v));
  return kSuccess;
}
int cuMemsetD32Async(uint64_t dst, unsigned v, size_t n, void*) {
  char* d = Translate(dst, n * sizeof(v));
  if (d == nullptr || dst % sizeof(v) != 0) return kInvalidValue;
  for (size_t i = 0; i < n; ++i) std::memcpy(d + i * sizeof(v), &v, sizeof(v));
  return kSuccess;
}
int cuMemsetD2D32Async(uint64_t dst, size_t pitch, unsigned v, size_t width, size_t height, void*) {
  if (height == 0 || width == 0) return kSuccess;
  if (dst % sizeof(v) != 0 || pitch < width * sizeof(v)) return kInvalidValue;
  char* d = Translate(dst, (height - 1) * pitch + width * sizeof(v));
  if (d == nullptr) return kInvalidValue;
  for (size_t r = 0; r < height; ++r) {
    for (size_t i = 0; i < width; ++i) std::memcpy(d + r * pitch + i * sizeof(v), &v, sizeof(v));
  }
  return kSuccess;
}
int cuStreamCreate(void** s, unsigned) { static int streams; *s = reinterpret_cast<void*>(uintptr_t(0x200 + ++streams)); return kSuccess; }
int cuStreamDestroy_v2(void*) { return kSuccess; }
int cuStreamSynchronize(void*) { return ForbiddenDuringCapture() ? kCaptureUnsupported : kSuccess; }
int cuStreamWaitEvent(void*, void*, unsigned) { return kSuccess; }
int cuEventCreate(void** e, unsigned) { static int events; *e = reinterpret_cast<void*>(uintptr_t(0x300 + ++events)); return kSuccess; }
int cuEventRecord(void*, void*) { return kSuccess; }
int cuEventQuery(void*) { return kSuccess; }
int cuEventSynchronize(void*) { return ForbiddenDuringCapture() ? kCaptureUnsupported : kSuccess; }
int cuEventElapsedTime_v2(float* ms, void*, void*) { *ms = 0; return kSuccess; }
int cuEventDestroy_v2(void*) { return kSuccess; }
// A loaded module. For an ELF image (a CUBIN NVRTC built) it keeps the image, so that asking
// for a function the image does not define fails as on a real driver.
struct FakeModule {
  std::string elf_image;  // empty: not an ELF image, every name is accepted
  std::map<std::string, std::unique_ptr<FakeFunction>> functions;
};

// An ELF64 image's size: its section header table is last (as in the CUBINs NVRTC writes).
size_t Elf64ImageSize(const unsigned char* image) {
  uint64_t section_headers = 0;
  uint16_t entry_size = 0, entries = 0;
  std::memcpy(&section_headers, image + 0x28, sizeof(section_headers));
  std::memcpy(&entry_size, image + 0x3A, sizeof(entry_size));
  std::memcpy(&entries, image + 0x3C, sizeof(entries));
  return section_headers + size_t{entry_size} * entries;
}

int cuModuleLoadData(void** module, const void* image) {
  if (!accept_modules()) return kNotSupported;
  auto* loaded = new FakeModule();
  const auto* bytes = static_cast<const unsigned char*>(image);
  if (bytes != nullptr && std::memcmp(bytes, "\x7f" "ELF", 4) == 0 && bytes[4] == 2) {
    loaded->elf_image.assign(reinterpret_cast<const char*>(bytes), Elf64ImageSize(bytes));
  }
  *module = loaded;
  return kSuccess;
}
int cuModuleUnload(void* module) {
  delete static_cast<FakeModule*>(module);
  return kSuccess;
}
int cuModuleGetFunction(void** fn, void* module, const char* name) {
  if (module == nullptr) return kNotSupported;
  auto& loaded = *static_cast<FakeModule*>(module);
  // Symbol names sit NUL-terminated in the image's string table.
  const std::string symbol = std::string(1, '\0') + name + std::string(1, '\0');
  if (!loaded.elf_image.empty() && loaded.elf_image.find(symbol) == std::string::npos) return kNotFound;
  auto& slot = loaded.functions[name];
  if (slot == nullptr) slot = std::make_unique<FakeFunction>(FakeFunction{name});
  *fn = slot.get();
  return kSuccess;
}
int cuFuncSetAttribute(void* fn, int attribute, int value) {
  if (!accept_modules()) return kNotSupported;
  // CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES: the opt-in above 48 KiB.
  if (attribute == 8) {
    if (value < 0 || value > kMaxSharedOptIn) return kInvalidValue;
    static_cast<FakeFunction*>(fn)->max_dynamic_shared = value;
  }
  return kSuccess;
}
int cuLaunchKernel(void* fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                   unsigned shared, void*, void** params, void**) {
  if (!accept_modules()) return kNotSupported;
  // What a real device refuses: empty or oversized grids and blocks, shared memory beyond the
  // default 48 KiB without the function's opt-in.
  if (gx == 0 || gy == 0 || gz == 0 || gx > kMaxGridX || bx == 0 || by == 0 || bz == 0 ||
      static_cast<long>(bx) * by * bz > kMaxThreadsPerBlock) {
    return kInvalidValue;
  }
  const int shared_limit = std::max(kDefaultSharedBytes, static_cast<FakeFunction*>(fn)->max_dynamic_shared);
  if (static_cast<int>(shared) > shared_limit) return kInvalidValue;
  dt::CudaKernelArgs args{};
  if (static_cast<FakeFunction*>(fn)->name.rfind("dt_ix_", 0) == 0) {
    if (!IndexArgsInsideDevice(*static_cast<const dt::IxArgs*>(params[0]))) return kInvalidValue;
  } else {
    args = *static_cast<const dt::CudaKernelArgs*>(params[0]);
    if (!ArgsInsideDevice(args)) return kInvalidValue;
  }
  Capture& c = capture();
  std::lock_guard<std::mutex> lock(c.mu);
  if (c.active) {
    c.graph->nodes.push_back(std::make_unique<FakeNode>(FakeNode{fn, gx, bx, shared, args}));
  } else {
    ++c.launches;
  }
  return kSuccess;
}
int cuStreamBeginCapture_v2(void*, int mode) {
  if (!accept_modules() || std::getenv("FAKE_CUDA_CAPTURE_FAILS") != nullptr) return kNotSupported;
  if (mode != 1) return kInvalidValue;  // dyntrace captures in thread-local mode
  Capture& c = capture();
  std::lock_guard<std::mutex> lock(c.mu);
  if (c.active) return kInvalidValue;
  c.active = true;
  c.invalidated = false;
  c.graph = new FakeGraph();
  return kSuccess;
}
int cuStreamEndCapture(void*, void** graph) {
  Capture& c = capture();
  std::lock_guard<std::mutex> lock(c.mu);
  if (!c.active) return kInvalidValue;
  c.active = false;
  if (c.invalidated) {
    delete c.graph;
    c.graph = nullptr;
    *graph = nullptr;
    return kCaptureInvalidated;
  }
  *graph = c.graph;
  c.graph = nullptr;
  ++c.captures;
  return kSuccess;
}
int cuStreamGetCaptureInfo_v2(void*, int* status, uint64_t* id, void** graph, const void** deps, size_t* num) {
  Capture& c = capture();
  std::lock_guard<std::mutex> lock(c.mu);
  *status = c.active ? (c.invalidated ? 2 : 1) : 0;
  *id = c.captures + 1;
  if (graph) *graph = c.graph;
  static thread_local void* last;
  last = c.active && !c.graph->nodes.empty() ? c.graph->nodes.back().get() : nullptr;
  *deps = last ? &last : nullptr;
  *num = last ? 1 : 0;
  return kSuccess;
}
// An executable graph is a copy of the captured graph's nodes, so updates touch only it.
int cuGraphInstantiateWithFlags(void** exec, void* graph, unsigned long long) {
  auto* g = static_cast<FakeGraph*>(graph);
  if (g == nullptr) return kInvalidValue;
  auto* e = new std::map<void*, FakeNode>();
  for (const auto& node : g->nodes) (*e)[node.get()] = *node;
  *exec = e;
  return kSuccess;
}
int cuGraphLaunch(void* exec, void*) {
  if (ForbiddenDuringCapture()) return kCaptureUnsupported;
  for (const auto& [key, node] : *static_cast<std::map<void*, FakeNode>*>(exec)) {
    if (!ArgsInsideDevice(node.args)) return kInvalidValue;
  }
  Capture& c = capture();
  std::lock_guard<std::mutex> lock(c.mu);
  ++c.graph_launches;
  return kSuccess;
}
int cuGraphGetNodes(void*, void**, size_t*) { return kNotSupported; }
int cuGraphNodeGetType(void*, int*) { return kNotSupported; }
int cuGraphKernelNodeGetParams_v2(void*, void*) { return kNotSupported; }
int cuGraphExecKernelNodeSetParams_v2(void* exec, void* node, const void* raw) {
  auto& nodes = *static_cast<std::map<void*, FakeNode>*>(exec);
  auto it = nodes.find(node);
  if (it == nodes.end()) return kInvalidValue;
  const auto& p = *static_cast<const KernelNodeParams*>(raw);
  if (p.func != it->second.function || p.kernel_params == nullptr) return kInvalidValue;
  it->second.args = *static_cast<const dt::CudaKernelArgs*>(p.kernel_params[0]);
  it->second.grid = p.grid_x;
  it->second.block = p.block_x;
  Capture& c = capture();
  std::lock_guard<std::mutex> lock(c.mu);
  ++c.node_updates;
  return kSuccess;
}
int cuGraphExecDestroy(void* exec) {
  delete static_cast<std::map<void*, FakeNode>*>(exec);
  return kSuccess;
}
int cuGraphDestroy(void* graph) {
  delete static_cast<FakeGraph*>(graph);
  return kSuccess;
}

// For tests: driver allocations so far, and bytes allocated now.
long fakeCudaAllocations() { return arena().allocations; }
long fakeCudaBytesInUse() { return static_cast<long>(arena().in_use); }
// For tests: direct launches, graph launches, node updates and completed captures so far.
long fakeCudaLaunches() { return capture().launches; }
long fakeCudaGraphLaunches() { return capture().graph_launches; }
long fakeCudaNodeUpdates() { return capture().node_updates; }
long fakeCudaCaptures() { return capture().captures; }
// For the fake cuBLAS: the host bytes behind a device range, or null.
char* fakeCudaHostAddress(uint64_t address, size_t n) { return Translate(address, n); }

}  // extern "C"
