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
// With the stand-in NVRTC (fake_nvrtc.cc, through DYNTRACE_LIBNVRTC) kernels do run: its images
// are host libraries, which cuModuleLoadData loads and cuLaunchKernel runs on the arena's host
// bytes (kernel_emulator.h), so dyntrace's CUDA results can be checked without a GPU. Captures
// then record what replays must redo (kernels, device copies, memsets, the stand-in cuBLAS's
// GEMMs) and graph launches run it in capture order.
//
// Loaded by tests through DYNTRACE_LIBCUDA=<path of this library>.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "jit/cuda_launch_abi.h"
#include "runtime/attention_abi.h"
#include "runtime/index_kernel_abi.h"
#include "tests/fake_cuda/emulated_image.h"
#include "tests/fake_cuda/kernel_emulator.h"

namespace {

constexpr int kSuccess = 0;
constexpr int kInvalidValue = 1;
constexpr int kOutOfMemory = 2;
constexpr int kInvalidDevice = 101;
constexpr int kNotFound = 500;
constexpr int kInvalidImage = 200;
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

// The three argument structs dyntrace's kernels take, told apart by the function's name.
enum class KernelAbi { kGenerated, kIndex, kAttention };

KernelAbi AbiOf(const std::string& name) {
  if (name.rfind("dt_ix_", 0) == 0) return KernelAbi::kIndex;
  if (name.rfind("dt_att_", 0) == 0) return KernelAbi::kAttention;
  return KernelAbi::kGenerated;
}

// One launch's argument, copied: the struct of the function's ABI is the one set.
struct LaunchArgs {
  dt::CudaKernelArgs generated{};
  dt::IxArgs index{};
  dt::CudaAttentionArgs attention{};
};

struct FakeFunction {
  std::string name;
  KernelAbi abi = KernelAbi::kGenerated;
  int max_dynamic_shared = 0;  // raised above 48 KiB only by cuFuncSetAttribute
  // Emulated modules only: the host function and its library. An index kernel's entry takes
  // its IxArgs by address (fake_nvrtc.cc's dt_emu_ix_ entries).
  void* entry = nullptr;
  const fake_cuda::EmulatedLibrary* library = nullptr;
  int max_threads = 1024;  // its __launch_bounds__ (emulated modules; the device limit otherwise)
};

// A captured operation: a kernel launch, or (when kernels run) host work a replay redoes.
struct FakeNode {
  void* function;
  unsigned grid, block, shared;
  LaunchArgs args;
  std::function<int()> host_work;  // set for copies, memsets and GEMMs captured
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

// An instantiated graph: copies of the captured nodes in capture order, found by the captured
// node's address (the handle cuGraphExecKernelNodeSetParams gets).
struct FakeExec {
  std::vector<FakeNode> nodes;
  std::map<void*, size_t> index;
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

// The host address of operand k's element 0 when every byte its elements reach (over all rows
// and the inner dim, negative strides included) lies inside one device block, when the launch
// says how wide its elements are, else when its first byte does; null otherwise.
char* OperandOnHost(const dt::CudaKernelArgs& args, int k) {
  char* p = args.data[k];
  const int64_t itemsize = args.itemsizes[k];
  if (itemsize <= 0 || args.rows == 0 || args.n == 0) return Translate(reinterpret_cast<uint64_t>(p), 1);
  int64_t low = 0, high = 0;  // element offsets reached
  auto reach = [&](int64_t size, int64_t stride) { (stride < 0 ? low : high) += (size - 1) * stride; };
  for (int64_t d = 0; d < args.outer_rank; ++d) reach(args.outer_sizes[d], args.outer_strides[k][d]);
  reach(args.n, args.inner_strides[k]);
  const uint64_t first = reinterpret_cast<uint64_t>(p) + static_cast<uint64_t>(low * itemsize);
  char* host = Translate(first, static_cast<size_t>((high - low + 1) * itemsize));
  return host == nullptr ? nullptr : host - low * itemsize;
}

// Whether every operand of `args` lies inside one device block (OperandOnHost); with `on_host`,
// also `args` with each device address replaced by its host bytes' address.
bool ArgsInsideDevice(const dt::CudaKernelArgs& args, dt::CudaKernelArgs* on_host = nullptr) {
  if (on_host != nullptr) *on_host = args;
  for (int k = 0; k < dt::kCudaMaxOperands; ++k) {
    if (args.data[k] == nullptr) continue;
    char* host = OperandOnHost(args, k);
    if (host == nullptr) return false;
    if (on_host != nullptr) on_host->data[k] = host;
  }
  if (args.workspace == nullptr) return true;
  char* workspace = Translate(reinterpret_cast<uint64_t>(args.workspace), 1);
  if (on_host != nullptr) on_host->workspace = workspace;
  return workspace != nullptr;
}

// The index kernels (runtime/index_kernels.cuh) take an IxArgs, which states the byte range
// each operand may touch: every range must lie inside one device allocation. With `on_host`,
// also `args` with host addresses, as ArgsInsideDevice.
bool IndexArgsInsideDevice(const dt::IxArgs& args, dt::IxArgs* on_host = nullptr) {
  if (on_host != nullptr) *on_host = args;
  for (int64_t k = 0; k < args.operands && k < dt::kIxMaxOperands; ++k) {
    const dt::IxOperand& o = args.op[k];
    if (o.data == nullptr || args.numel == 0) continue;
    if (o.high_bytes <= o.low_bytes) return false;
    const uint64_t first = reinterpret_cast<uint64_t>(o.data) + static_cast<uint64_t>(o.low_bytes);
    char* host = Translate(first, static_cast<size_t>(o.high_bytes - o.low_bytes));
    if (host == nullptr) return false;
    if (on_host != nullptr) on_host->op[k].data = host - o.low_bytes;
  }
  if (args.error == nullptr) return true;
  char* error = Translate(reinterpret_cast<uint64_t>(args.error), sizeof(uint64_t));
  if (on_host != nullptr) on_host->error = reinterpret_cast<uint64_t*>(error);
  return error != nullptr;
}

// The fused attention kernel (runtime/attention_kernel.cuh) states each operand's byte range, as
// the index kernels do; with `on_host`, also `args` with host addresses.
bool AttentionArgsInsideDevice(const dt::CudaAttentionArgs& args, dt::CudaAttentionArgs* on_host = nullptr) {
  if (on_host != nullptr) *on_host = args;
  dt::AttentionOperand dt::CudaAttentionArgs::*const operands[] = {
      &dt::CudaAttentionArgs::query, &dt::CudaAttentionArgs::key, &dt::CudaAttentionArgs::value,
      &dt::CudaAttentionArgs::mask, &dt::CudaAttentionArgs::keep, &dt::CudaAttentionArgs::out};
  for (auto member : operands) {
    const dt::AttentionOperand& o = args.*member;
    if (o.data == nullptr) continue;
    if (o.high_bytes <= o.low_bytes) return false;
    const uint64_t first = reinterpret_cast<uint64_t>(o.data) + static_cast<uint64_t>(o.low_bytes);
    char* host = Translate(first, static_cast<size_t>(o.high_bytes - o.low_bytes));
    if (host == nullptr) return false;
    if (on_host != nullptr) (on_host->*member).data = host - o.low_bytes;
  }
  return true;
}

// Whether every operand of a launch of `fn` lies in device memory; with `on_host`, the args with
// host addresses.
bool LaunchInsideDevice(const FakeFunction& fn, const LaunchArgs& args, LaunchArgs* on_host = nullptr) {
  switch (fn.abi) {
    case KernelAbi::kIndex:
      return IndexArgsInsideDevice(args.index, on_host ? &on_host->index : nullptr);
    case KernelAbi::kAttention:
      return AttentionArgsInsideDevice(args.attention, on_host ? &on_host->attention : nullptr);
    case KernelAbi::kGenerated:
      break;
  }
  return ArgsInsideDevice(args.generated, on_host ? &on_host->generated : nullptr);
}

// The launch's argument struct, read from the kernel's parameters as its ABI lays it out.
void ReadParams(const FakeFunction& fn, void* const* params, LaunchArgs& args) {
  switch (fn.abi) {
    case KernelAbi::kIndex:
      args.index = *static_cast<const dt::IxArgs*>(params[0]);
      return;
    case KernelAbi::kAttention:
      args.attention = *static_cast<const dt::CudaAttentionArgs*>(params[0]);
      return;
    case KernelAbi::kGenerated:
      args.generated = *static_cast<const dt::CudaKernelArgs*>(params[0]);
      return;
  }
}

constexpr int kLaunchFailed = 719;
constexpr int kLaunchOutOfResources = 701;

// Runs an emulated kernel on the arena's host bytes: one call of its host function per thread.
int RunEmulated(const FakeFunction& fn, unsigned grid, unsigned block, const LaunchArgs& args) {
  LaunchArgs host;
  if (!LaunchInsideDevice(fn, args, &host)) return kInvalidValue;
  std::function<void()> body;
  switch (fn.abi) {
    case KernelAbi::kIndex:  // takes its IxArgs by address (fake_nvrtc.cc's entries)
      body = [&] { reinterpret_cast<void (*)(const dt::IxArgs*)>(fn.entry)(&host.index); };
      break;
    case KernelAbi::kAttention:
      body = [&] { reinterpret_cast<void (*)(dt::CudaAttentionArgs)>(fn.entry)(host.attention); };
      break;
    case KernelAbi::kGenerated:
      body = [&] { reinterpret_cast<void (*)(dt::CudaKernelArgs)>(fn.entry)(host.generated); };
      break;
  }
  // The index kernels never wait for each other (runtime/index_kernels.cuh): no fibers needed.
  const bool index_kernel = fn.abi == KernelAbi::kIndex;
  std::string error;
  if (!fake_cuda::RunGrid(*fn.library, fake_cuda::Dim3{grid, 1, 1}, fake_cuda::Dim3{block, 1, 1}, !index_kernel, body,
                          &error)) {
    std::fprintf(stderr, "fake CUDA: kernel %s failed: %s\n", fn.name.c_str(), error.c_str());
    return kLaunchFailed;
  }
  return kSuccess;
}

// Runs `work` now, or, while a capture is in progress, records it for the graph's launches.
int RunOrRecord(std::function<int()> work) {
  Capture& c = capture();
  {
    std::lock_guard<std::mutex> lock(c.mu);
    if (c.active) {
      auto node = std::make_unique<FakeNode>();
      node->host_work = std::move(work);
      c.graph->nodes.push_back(std::move(node));
      return kSuccess;
    }
  }
  return work();
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
    case kInvalidImage: *s = "CUDA_ERROR_INVALID_IMAGE"; break;
    case kLaunchFailed: *s = "CUDA_ERROR_LAUNCH_FAILED"; break;
    case kLaunchOutOfResources: *s = "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES"; break;
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
    case kInvalidImage: *s = "device kernel image is invalid"; break;
    case kLaunchFailed: *s = "unspecified launch failure (fake driver: see its message on stderr)"; break;
    case kLaunchOutOfResources: *s = "too many resources requested for launch"; break;
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
  return RunOrRecord([=] {
    char* d = Translate(dst, n);
    char* s = Translate(src, n);
    if (d == nullptr || s == nullptr) return kInvalidValue;
    std::memmove(d, s, n);
    return kSuccess;
  });
}
// Fills `count` items of `size` bytes (the low bytes of `value`) from dst, `width` items per row
// of `pitch` bytes.
int Fill(uint64_t dst, size_t pitch, uint32_t value, size_t size, size_t width, size_t height) {
  if (height == 0 || width == 0) return kSuccess;
  if (dst % size != 0 || pitch < width * size) return kInvalidValue;
  return RunOrRecord([=] {
    char* d = Translate(dst, (height - 1) * pitch + width * size);
    if (d == nullptr) return kInvalidValue;
    for (size_t r = 0; r < height; ++r) {
      for (size_t i = 0; i < width; ++i) std::memcpy(d + r * pitch + i * size, &value, size);
    }
    return kSuccess;
  });
}
int cuMemsetD8Async(uint64_t dst, unsigned char v, size_t n, void*) { return Fill(dst, n, v, 1, n, 1); }
int cuMemsetD16Async(uint64_t dst, unsigned short v, size_t n, void*) { return Fill(dst, n * 2, v, 2, n, 1); }
int cuMemsetD32Async(uint64_t dst, unsigned v, size_t n, void*) { return Fill(dst, n * 4, v, 4, n, 1); }
int cuMemsetD2D32Async(uint64_t dst, size_t pitch, unsigned v, size_t width, size_t height, void*) {
  return Fill(dst, pitch, v, 4, width, height);
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
  // From the stand-in NVRTC; never unloaded, as captured graphs may still name its kernels.
  fake_cuda::EmulatedLibrary* emulated = nullptr;
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
  const std::string library = fake_cuda::UnwrapEmulatedImage(image);
  if (!library.empty()) {
    std::string error;
    auto* loaded = new FakeModule();
    loaded->emulated = fake_cuda::LoadEmulatedLibrary(library, &error);
    if (loaded->emulated == nullptr) {
      std::fprintf(stderr, "fake CUDA: %s\n", error.c_str());
      delete loaded;
      return kInvalidImage;
    }
    *module = loaded;
    return kSuccess;
  }
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
  const bool index_kernel = std::strncmp(name, "dt_ix_", 6) == 0;
  void* entry = loaded.emulated == nullptr ? nullptr
                : index_kernel ? fake_cuda::FindEmulatedKernel(*loaded.emulated, ("dt_emu_ix_" + std::string(name + 6)).c_str())
                               : fake_cuda::FindEmulatedKernel(*loaded.emulated, name);
  if (loaded.emulated != nullptr && entry == nullptr) return kNotFound;
  auto& slot = loaded.functions[name];
  if (slot == nullptr) {
    const int bound = loaded.emulated != nullptr ? fake_cuda::EmulatedLaunchBound(*loaded.emulated, name)
                                                 : kMaxThreadsPerBlock;
    slot = std::make_unique<FakeFunction>(FakeFunction{name, AbiOf(name), 0, entry, loaded.emulated, bound});
  }
  *fn = slot.get();
  return kSuccess;
}
int cuFuncSetAttribute(void* fn, int attribute, int value) {
  if (!accept_modules() && static_cast<FakeFunction*>(fn)->entry == nullptr) return kNotSupported;
  // CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES: the opt-in above 48 KiB.
  if (attribute == 8) {
    if (value < 0 || value > kMaxSharedOptIn) return kInvalidValue;
    static_cast<FakeFunction*>(fn)->max_dynamic_shared = value;
  }
  return kSuccess;
}
int cuLaunchKernel(void* fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                   unsigned shared, void*, void** params, void**) {
  const FakeFunction& function = *static_cast<FakeFunction*>(fn);
  if (!accept_modules() && function.entry == nullptr) return kNotSupported;
  // What a real device refuses: empty or oversized grids and blocks, shared memory beyond the
  // default 48 KiB without the function's opt-in.
  if (gx == 0 || gy == 0 || gz == 0 || gx > kMaxGridX || bx == 0 || by == 0 || bz == 0 ||
      static_cast<long>(bx) * by * bz > kMaxThreadsPerBlock) {
    return kInvalidValue;
  }
  if (static_cast<long>(bx) * by * bz > function.max_threads) {
    std::fprintf(stderr, "fake CUDA: %s launched with %u threads, beyond its __launch_bounds__(%d)\n",
                 function.name.c_str(), bx * by * bz, function.max_threads);
    return kLaunchOutOfResources;
  }
  const int shared_limit = std::max(kDefaultSharedBytes, function.max_dynamic_shared);
  if (static_cast<int>(shared) > shared_limit) return kInvalidValue;
  LaunchArgs args;
  ReadParams(function, params, args);
  if (!LaunchInsideDevice(function, args)) return kInvalidValue;
  if (function.entry != nullptr && (gy != 1 || gz != 1 || by != 1 || bz != 1)) return kNotSupported;
  {
    Capture& c = capture();
    std::lock_guard<std::mutex> lock(c.mu);
    if (c.active) {
      c.graph->nodes.push_back(std::make_unique<FakeNode>(FakeNode{fn, gx, bx, shared, args, {}}));
      return kSuccess;
    }
    ++c.launches;
  }
  return function.entry != nullptr ? RunEmulated(function, gx, bx, args) : kSuccess;
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
  auto* e = new FakeExec();
  for (const auto& node : g->nodes) {
    e->index[node.get()] = e->nodes.size();
    e->nodes.push_back(*node);
  }
  *exec = e;
  return kSuccess;
}
int cuGraphLaunch(void* exec, void*) {
  if (ForbiddenDuringCapture()) return kCaptureUnsupported;
  const FakeExec& graph = *static_cast<FakeExec*>(exec);
  for (const FakeNode& node : graph.nodes) {
    if (node.host_work) continue;
    if (!LaunchInsideDevice(*static_cast<FakeFunction*>(node.function), node.args)) return kInvalidValue;
  }
  {
    Capture& c = capture();
    std::lock_guard<std::mutex> lock(c.mu);
    ++c.graph_launches;
  }
  for (const FakeNode& node : graph.nodes) {
    int result = kSuccess;
    if (node.host_work) {
      result = node.host_work();
    } else if (const auto& fn = *static_cast<FakeFunction*>(node.function); fn.entry != nullptr) {
      result = RunEmulated(fn, node.grid, node.block, node.args);
    }
    if (result != kSuccess) return result;
  }
  return kSuccess;
}
int cuGraphGetNodes(void*, void**, size_t*) { return kNotSupported; }
int cuGraphNodeGetType(void*, int*) { return kNotSupported; }
int cuGraphKernelNodeGetParams_v2(void*, void*) { return kNotSupported; }
int cuGraphExecKernelNodeSetParams_v2(void* exec, void* node, const void* raw) {
  auto& graph = *static_cast<FakeExec*>(exec);
  auto it = graph.index.find(node);
  if (it == graph.index.end()) return kInvalidValue;
  FakeNode& copy = graph.nodes[it->second];
  const auto& p = *static_cast<const KernelNodeParams*>(raw);
  if (copy.host_work || p.func != copy.function || p.kernel_params == nullptr) return kInvalidValue;
  ReadParams(*static_cast<FakeFunction*>(copy.function), p.kernel_params, copy.args);
  copy.grid = p.grid_x;
  copy.block = p.block_x;
  Capture& c = capture();
  std::lock_guard<std::mutex> lock(c.mu);
  ++c.node_updates;
  return kSuccess;
}
int cuGraphExecDestroy(void* exec) {
  delete static_cast<FakeExec*>(exec);
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
// For the fake cuBLAS: runs work(closure) now, or records it in the capture in progress; the
// closure is released with the graph (or at once when the work ran).
int fakeCudaRunOrRecord(int (*work)(void*), void* closure, void (*release)(void*)) {
  std::shared_ptr<void> owned(closure, release);
  return RunOrRecord([work, owned] { return work(owned.get()); });
}

}  // extern "C"
