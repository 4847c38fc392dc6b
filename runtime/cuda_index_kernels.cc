#include "runtime/cuda_index_kernels.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <memory>
#include <mutex>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "runtime/advanced_indexing.h"
#include "runtime/copy.h"
#include "runtime/cuda_driver.h"
#include "runtime/errors.h"
#include "runtime/log.h"
#include "runtime/nvrtc.h"
#include "runtime/random.h"

namespace dt {
namespace {

// ---- the module: compiled once per element type, loaded once per device ----

absl::StatusOr<std::string> CompileDirectly(const std::string& source, const std::string& name, int sm_arch) {
  return CompileCudaToCubin(source, name, sm_arch);
}

std::atomic<CubinCompiler> cubin_compiler{&CompileDirectly};
std::atomic<IndexKernelRunner*> host_runner{nullptr};
std::atomic<int64_t> cuda_launches{0};

bool Typed(absl::string_view name) {
#define DT_IX_IS(kernel) if (name == #kernel) return true;
  DT_IX_TYPED_KERNELS(DT_IX_IS)
#undef DT_IX_IS
  return false;
}

constexpr unsigned kThreadsPerBlock = 256;
constexpr int64_t kMaxBlocks = int64_t{1} << 20;  // kernels stride over what a grid this size leaves

// One device's loaded modules; launches go on the device's stream.
class CudaRunner final : public IndexKernelRunner {
 public:
  explicit CudaRunner(CudaDevice* device) : device_(device) {}

  // Loads the module for `dtype`; an error says why it can't be (NVRTC, or the driver refused).
  absl::Status Prepare(DType dtype) { return FunctionsFor(dtype).status(); }

  absl::Status Launch(absl::string_view name, DType dtype, const IxArgs& args) override {
    if (args.numel == 0) return absl::OkStatus();
    DT_ASSIGN_OR_RETURN(const Functions* functions, FunctionsFor(dtype, Typed(name)));
    auto it = functions->find(name);
    if (it == functions->end()) return absl::InternalError(absl::StrCat("no index kernel named ", name));
    const int64_t blocks = std::min(kMaxBlocks, (args.numel + kThreadsPerBlock - 1) / kThreadsPerBlock);
    IxArgs copy = args;
    void* params[] = {&copy};
    ++cuda_launches;
    DT_RETURN_IF_ERROR(device_->Activate());
    return CudaCall(device_->driver().cuLaunchKernel(it->second, static_cast<unsigned>(blocks), 1, 1,
                                                     kThreadsPerBlock, 1, 1, 0, device_->stream(), params, nullptr),
                    "cuLaunchKernel");
  }

  absl::Status Memset(void* device, unsigned char value, size_t bytes) override {
    if (bytes == 0) return absl::OkStatus();
    DT_RETURN_IF_ERROR(device_->Activate());
    return CudaCall(device_->driver().cuMemsetD8Async(reinterpret_cast<CUdeviceptr>(device), value, bytes,
                                                      device_->stream()),
                    "cuMemsetD8Async");
  }

  absl::Status Read(void* host, const void* device, size_t bytes) override {
    DT_RETURN_IF_ERROR(device_->Activate());
    DT_RETURN_IF_ERROR(CudaCall(device_->driver().cuMemcpyDtoHAsync(host, reinterpret_cast<CUdeviceptr>(device),
                                                                    bytes, device_->stream()),
                                "cuMemcpyDtoHAsync"));
    return CudaCall(device_->driver().cuStreamSynchronize(device_->stream()), "cuStreamSynchronize");
  }

 private:
  using Functions = absl::flat_hash_map<std::string, CUfunction>;
  // An untyped kernel runs from whichever module is loaded, so an int64 index check does not
  // build the int64 module for a float gather.
  absl::StatusOr<const Functions*> FunctionsFor(DType dtype, bool typed = true);
  absl::StatusOr<Functions> Load(DType dtype);

  CudaDevice* device_;
  std::mutex mu_;
  absl::flat_hash_map<DType, std::unique_ptr<Functions>> modules_;
  absl::flat_hash_map<DType, absl::Status> failures_;
  absl::Status refused_;  // why the driver refused a module, once it has
};

absl::StatusOr<const CudaRunner::Functions*> CudaRunner::FunctionsFor(DType dtype, bool typed) {
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = modules_.find(dtype); it != modules_.end()) return it->second.get();
  if (!typed && !modules_.empty()) return modules_.begin()->second.get();
  if (auto it = failures_.find(dtype); it != failures_.end()) return it->second;
  if (!refused_.ok()) return refused_;
  absl::StatusOr<Functions> loaded = Load(dtype);
  if (!loaded.ok()) {
    failures_.emplace(dtype, loaded.status());
    // A driver that refused one module refuses them all: don't compile the others for it.
    if (absl::StrContains(loaded.status().message(), "cuModuleLoadData")) refused_ = loaded.status();
    return loaded.status();
  }
  return modules_.emplace(dtype, std::make_unique<Functions>(*std::move(loaded))).first->second.get();
}

absl::StatusOr<CudaRunner::Functions> CudaRunner::Load(DType dtype) {
  if (!ProbeNvrtc().available) return Error(ErrorKind::kRuntime, ProbeNvrtc().reason);
  DT_ASSIGN_OR_RETURN(std::string cubin,
                      cubin_compiler.load()(IndexKernelSource(dtype),
                                            absl::StrCat("index_kernels_", DTypeName(dtype)), device_->sm_arch()));
  DT_RETURN_IF_ERROR(device_->Activate());
  CUmodule module = nullptr;  // lives for the process, like the device
  DT_RETURN_IF_ERROR(CudaCall(device_->driver().cuModuleLoadData(&module, cubin.data()), "cuModuleLoadData"));
  Functions functions;
  std::vector<std::string> names;
#define DT_IX_NAME(name) names.push_back(#name);
  DT_IX_UNTYPED_KERNELS(DT_IX_NAME)
  DT_IX_TYPED_KERNELS(DT_IX_NAME)
#undef DT_IX_NAME
  for (const std::string& name : names) {
    CUfunction fn = nullptr;
    DT_RETURN_IF_ERROR(CudaCall(device_->driver().cuModuleGetFunction(&fn, module, ("dt_ix_" + name).c_str()),
                                "cuModuleGetFunction"));
    functions.emplace(name, fn);
  }
  return functions;
}

CudaRunner* CudaRunnerFor(int index) {
  static std::mutex mu;
  static std::array<CudaRunner*, 64> runners{};
  std::lock_guard<std::mutex> lock(mu);
  if (index < 0 || index >= static_cast<int>(runners.size())) return nullptr;
  CudaRunner*& r = runners[index];
  if (r == nullptr) {
    absl::StatusOr<CudaDevice*> device = CudaDevice::Get(index);
    if (!device.ok()) return nullptr;
    r = new CudaRunner(*device);  // lives for the process, like the devices
  }
  return r;
}

IndexKernelRunner* RunnerFor(const Tensor& t) {
  if (t.device().type == DeviceType::kCuda) return CudaRunnerFor(t.device().index);
  if (t.device().is_cpu()) return host_runner.load();
  return nullptr;
}

absl::StatusOr<IndexKernelRunner*> Runner(const Tensor& t) {
  IndexKernelRunner* runner = RunnerFor(t);
  if (runner == nullptr) return absl::InternalError("index kernels: no runner for " + t.device().ToString());
  return runner;
}

// ---- launch arguments ----

// The element offsets [low, high] an operand reaches over `domain`, plus `extra` (index terms'
// reach) on either side.
std::pair<int64_t, int64_t> Reach(const Dims& domain, const Dims& strides, int64_t extra_low, int64_t extra_high) {
  int64_t low = extra_low, high = extra_high;
  for (size_t d = 0; d < domain.size(); ++d) {
    const int64_t r = (domain[d] - 1) * strides[d];
    (r < 0 ? low : high) += r;
  }
  return {low, high};
}

IxOperand Operand(const Tensor& t, const Dims& domain, const Dims& strides, int64_t extra_low = 0,
                  int64_t extra_high = 0) {
  IxOperand o{};
  o.data = static_cast<char*>(t.data());
  o.itemsize = t.itemsize();
  for (size_t d = 0; d < strides.size(); ++d) o.strides[d] = strides[d];
  const auto [low, high] = Reach(domain, strides, extra_low, extra_high);
  o.low_bytes = low * o.itemsize;
  o.high_bytes = (high + 1) * o.itemsize;
  return o;
}

// A contiguous buffer addressed by position (row kernels index it themselves).
IxOperand Flat(const Tensor& t) {
  IxOperand o{};
  o.data = static_cast<char*>(t.data());
  o.itemsize = t.itemsize();
  o.high_bytes = std::max<int64_t>(t.numel(), 1) * o.itemsize;
  return o;
}

absl::StatusOr<IxArgs> DomainArgs(const Dims& domain) {
  if (domain.size() > static_cast<size_t>(kIxMaxRank)) {
    return Error(ErrorKind::kNotImplemented,
                 absl::StrFormat("indexing on CUDA supports results of at most %d dims, got %d", kIxMaxRank,
                                 domain.size()));
  }
  IxArgs a{};
  a.rank = static_cast<int64_t>(domain.size());
  a.numel = 1;
  for (size_t d = 0; d < domain.size(); ++d) {
    a.sizes[d] = domain[d];
    a.numel *= domain[d];
  }
  return a;
}

// A row kernel's arguments: `positions` launches, operands flat.
IxArgs RowArgs(int64_t positions, std::initializer_list<const Tensor*> operands) {
  IxArgs a{};
  a.rank = 1;
  a.sizes[0] = std::max<int64_t>(positions, 1);
  a.numel = positions;
  for (const Tensor* t : operands) a.op[a.operands++] = Flat(*t);
  return a;
}

// Adds `indices` as operands 2.. and terms moving operand `target`; returns the reach they add
// to the target (elements, low and high).
absl::StatusOr<std::pair<int64_t, int64_t>> AddIndices(IxArgs& a, const Dims& domain,
                                                       absl::Span<const DomainIndex> indices, int target) {
  if (a.operands + static_cast<int64_t>(indices.size()) > kIxMaxOperands) {
    return Error(ErrorKind::kNotImplemented,
                 absl::StrFormat("indexing on CUDA takes at most %d index tensors, got %d",
                                 kIxMaxOperands - a.operands, indices.size()));
  }
  int64_t low = 0, high = 0;
  for (const DomainIndex& index : indices) {
    IxIndexTerm& term = a.term[a.terms++];
    term.operand = a.operands;
    term.target = target;
    term.size = index.size;
    term.wrap = index.wrap_negative ? 1 : 0;
    term.gain = index.gain;
    a.op[a.operands++] = Operand(index.values.tensor, domain, index.values.strides);
    const int64_t r = (index.size - 1) * index.gain;
    (r < 0 ? low : high) += r;
  }
  return std::make_pair(low, high);
}

template <typename T>
absl::Status ReadInto(IndexKernelRunner* runner, T* host, const void* device) {
  return runner->Read(host, device, sizeof(T));
}

// Launches a kernel that records the first bad position in the error word, and reads the word
// back (one small synchronous copy): that position, or nullopt when the kernel found none.
absl::StatusOr<std::optional<int64_t>> LaunchChecked(IndexKernelRunner* runner, absl::string_view name, DType dtype,
                                                     IxArgs& a, Device device) {
  const Tensor word = Tensor::Empty({1}, DType::kInt64, device);
  a.error = static_cast<uint64_t*>(word.data());
  DT_RETURN_IF_ERROR(runner->Memset(word.data(), 0xff, sizeof(uint64_t)));
  DT_RETURN_IF_ERROR(runner->Launch(name, dtype, a));
  uint64_t first = 0;
  DT_RETURN_IF_ERROR(ReadInto(runner, &first, word.data()));
  if (first == ~uint64_t{0}) return std::optional<int64_t>();
  return std::optional<int64_t>(static_cast<int64_t>(first - 1));
}

}  // namespace

// ---- public ----

int64_t CudaIndexKernelLaunches() { return cuda_launches.load(); }

void SetIndexKernelCompiler(CubinCompiler compiler) { cubin_compiler.store(compiler); }
absl::StatusOr<std::string> CompileRuntimeModule(const std::string& source, const std::string& name, int sm_arch) {
  return cubin_compiler.load()(source, name, sm_arch);
}
void SetHostIndexKernelRunnerForTesting(IndexKernelRunner* runner) { host_runner.store(runner); }

std::string IndexKernelSource(DType dtype) {
  return absl::StrCat("#define DT_IX_SCALAR ", CppType(dtype), "\n", IndexKernelModuleText());
}

bool IndexKernelsRun(const Tensor& t) { return t.defined() && IndexKernelsRun(t.device(), t.dtype()); }

bool IndexKernelsRun(Device device, DType dtype) {
  if (device.is_cpu()) return host_runner.load() != nullptr;
  if (device.type != DeviceType::kCuda) return false;
  CudaRunner* runner = CudaRunnerFor(device.index);
  if (runner == nullptr) return false;
  absl::Status ready = runner->Prepare(dtype);
  if (!ready.ok() && log::Enabled(log::Kind::kKernels)) {
    log::Write(log::Kind::kKernels, absl::StrCat("index kernels for ", DTypeName(dtype), " on ", device.ToString(),
                                                 " run through the host: ", ready.message()));
  }
  return ready.ok();
}

absl::StatusOr<std::optional<int64_t>> FindValueOutside(const Tensor& index, int64_t low, int64_t high) {
  if (index.numel() == 0) return std::optional<int64_t>();
  DT_ASSIGN_OR_RETURN(IndexKernelRunner * runner, Runner(index));
  DT_ASSIGN_OR_RETURN(IxArgs a, DomainArgs(index.sizes()));
  a.op[a.operands++] = Operand(index, index.sizes(), index.strides());
  a.param[0] = low;
  a.param[1] = high;
  DT_ASSIGN_OR_RETURN(std::optional<int64_t> first, LaunchChecked(runner, "check", index.dtype(), a, index.device()));
  if (!first.has_value()) return first;
  // The bad position's element, read back by itself.
  int64_t at = *first, element = 0;
  for (int64_t d = index.ndim() - 1; d >= 0; --d) {
    element += (at % index.size(d)) * index.stride(d);
    at /= index.size(d);
  }
  const char* address = static_cast<const char*>(index.data()) + element * index.itemsize();
  if (index.itemsize() == 8) {
    int64_t v = 0;
    DT_RETURN_IF_ERROR(ReadInto(runner, &v, address));
    return std::optional<int64_t>(v);
  }
  int32_t v = 0;
  DT_RETURN_IF_ERROR(ReadInto(runner, &v, address));
  return std::optional<int64_t>(v);
}

namespace {
thread_local DeferredIndexChecks* deferred_index_checks = nullptr;
}  // namespace

DeferredIndexChecks::DeferredIndexChecks(GraphIndexChecks* checks)
    : checks_(checks), previous_(deferred_index_checks) {
  deferred_index_checks = this;
}
DeferredIndexChecks::~DeferredIndexChecks() { deferred_index_checks = previous_; }

namespace {

// Captures the check of `index` into the graph: slot `slot` of `checks.slots` gets the first bad
// position and its value.
absl::Status CaptureInGraphCheck(const Tensor& index, int64_t low, int64_t high, const GraphIndexChecks& checks,
                                 int64_t slot) {
  DT_ASSIGN_OR_RETURN(IndexKernelRunner * runner, Runner(index));
  DT_ASSIGN_OR_RETURN(IxArgs a, DomainArgs(index.sizes()));
  a.op[a.operands++] = Operand(index, index.sizes(), index.strides());
  a.param[0] = low;
  a.param[1] = high;
  a.error = static_cast<uint64_t*>(checks.slots.data()) + 2 * slot;
  a.mode = kIxCheckFind;
  DT_RETURN_IF_ERROR(runner->Launch("check", index.dtype(), a));
  a.mode = kIxCheckReadValue;
  return runner->Launch("check", index.dtype(), a);
}

}  // namespace

absl::Status CheckIndicesOnDevice(const Tensor& index, int64_t size, int64_t dim, bool wrap_negative) {
  if (DeferredIndexChecks* deferred = deferred_index_checks; deferred != nullptr) {
    GraphIndexChecks& checks = *deferred->checks_;
    if (checks.caller_storage.contains(index.storage().get())) {
      checks.before_launch.push_back([index, size, dim, wrap_negative] {
        DeferredIndexChecks* outer = deferred_index_checks;
        deferred_index_checks = nullptr;  // the recorded check itself runs now
        absl::Status status = CheckIndicesOnDevice(index, size, dim, wrap_negative);
        deferred_index_checks = outer;
        return status;
      });
      return absl::OkStatus();
    }
    if (checks.in_graph.size() >= static_cast<size_t>(GraphIndexChecks::kMaxInGraph)) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "more than %d index checks on values the CUDA graph computes", GraphIndexChecks::kMaxInGraph));
    }
    DT_RETURN_IF_ERROR(
        CaptureInGraphCheck(index, wrap_negative ? -size : 0, size, checks, static_cast<int64_t>(checks.in_graph.size())));
    checks.in_graph.push_back(GraphIndexChecks::InGraph{size, dim, wrap_negative});
    return absl::OkStatus();
  }
  DT_ASSIGN_OR_RETURN(std::optional<int64_t> bad, FindValueOutside(index, wrap_negative ? -size : 0, size));
  if (!bad.has_value()) return absl::OkStatus();
  return CheckedIndex(*bad, size, dim, wrap_negative).status();
}

absl::Status ReadInGraphIndexChecks(const GraphIndexChecks& checks) {
  if (checks.in_graph.empty()) return absl::OkStatus();
  DT_ASSIGN_OR_RETURN(IndexKernelRunner * runner, Runner(checks.slots));
  std::vector<uint64_t> words(2 * checks.in_graph.size());
  DT_RETURN_IF_ERROR(runner->Read(words.data(), checks.slots.data(), words.size() * sizeof(uint64_t)));
  for (size_t k = 0; k < checks.in_graph.size(); ++k) {
    if (words[2 * k] == ~uint64_t{0}) continue;
    DT_RETURN_IF_ERROR(runner->Memset(checks.slots.data(), 0xff, words.size() * sizeof(uint64_t)));
    const GraphIndexChecks::InGraph& c = checks.in_graph[k];
    return CheckedIndex(static_cast<int64_t>(words[2 * k + 1]), c.size, c.dim, c.wrap_negative).status();
  }
  return absl::OkStatus();
}

absl::Status GatherOnDevice(const Tensor& out, const DomainOperand& src, absl::Span<const DomainIndex> indices,
                            absl::Span<const DomainRemap> remaps) {
  if (out.numel() == 0) return absl::OkStatus();
  DT_ASSIGN_OR_RETURN(IndexKernelRunner * runner, Runner(out));
  DT_ASSIGN_OR_RETURN(IxArgs a, DomainArgs(out.sizes()));
  a.op[a.operands++] = Operand(out, out.sizes(), out.strides());
  a.operands++;  // src, once the index terms' reach is known
  DT_ASSIGN_OR_RETURN(auto reach, AddIndices(a, out.sizes(), indices, /*target=*/1));
  Dims read_sizes = out.sizes();  // a remapped dim reads positions [0, modulus)
  for (size_t d = 0; d < remaps.size(); ++d) {
    a.remap[d] = remaps[d];
    if (remaps[d].modulus > 0) read_sizes[d] = remaps[d].modulus;
  }
  a.op[1] = Operand(src.tensor, read_sizes, src.strides, reach.first, reach.second);
  return runner->Launch("gather", out.dtype(), a);
}

absl::Status BandOnDevice(const Tensor& out, const DomainOperand& src, int64_t low, int64_t high) {
  if (out.numel() == 0) return absl::OkStatus();
  DT_ASSIGN_OR_RETURN(IndexKernelRunner * runner, Runner(out));
  DT_ASSIGN_OR_RETURN(IxArgs a, DomainArgs(out.sizes()));
  a.op[a.operands++] = Operand(out, out.sizes(), out.strides());
  a.op[a.operands++] = Operand(src.tensor, out.sizes(), src.strides);
  a.param[0] = low;
  a.param[1] = high;
  return runner->Launch("band", out.dtype(), a);
}

namespace {

IxFold FoldCode(DeviceFold fold) {
  switch (fold) {
    case DeviceFold::kAssign: return kIxAssign;
    case DeviceFold::kSum:
    case DeviceFold::kMean: return kIxSum;
    case DeviceFold::kProd: return kIxProd;
    case DeviceFold::kMax: return kIxMax;
    case DeviceFold::kMin: return kIxMin;
  }
  return kIxSum;
}

// One int64 per element dst can reach (from element offset `low`), zeroed: the claims of an
// assignment, or the counts of a mean.
absl::StatusOr<Tensor> Slots(IndexKernelRunner* runner, const Tensor& like, IxArgs& a, int64_t low, int64_t high) {
  Tensor slots = Tensor::Empty({high - low + 1}, DType::kInt64, like.device());
  DT_RETURN_IF_ERROR(runner->Memset(slots.data(), 0, slots.numel() * sizeof(int64_t)));
  a.param[0] = a.operands;
  a.param[1] = low;
  a.op[a.operands++] = Flat(slots);
  return slots;
}

// The mean's division, over every element dst reaches (its slots' counts beside them).
absl::Status DivideByCounts(IndexKernelRunner* runner, const Tensor& dst_base, const Tensor& slots, int64_t low,
                            bool include_self) {
  IxArgs a = RowArgs(slots.numel(), {&dst_base, &dst_base, &slots});
  a.op[0].data += low * a.op[0].itemsize;  // element `low` of dst's reach is the slots' first
  a.op[0].strides[0] = 1;
  a.op[0].low_bytes = 0;
  a.op[0].high_bytes = slots.numel() * a.op[0].itemsize;
  a.op[2].strides[0] = 1;
  a.param[2] = include_self ? 1 : 0;
  return runner->Launch("mean", dst_base.dtype(), a);
}

}  // namespace

absl::Status ScatterOnDevice(const Dims& domain, const DomainOperand& dst, const DomainOperand& src,
                             absl::Span<const DomainIndex> indices, DeviceFold fold, bool include_self,
                             double alpha) {
  DT_ASSIGN_OR_RETURN(IxArgs a, DomainArgs(domain));
  if (a.numel == 0) return absl::OkStatus();
  DT_ASSIGN_OR_RETURN(IndexKernelRunner * runner, Runner(dst.tensor));
  a.operands = 2;
  DT_ASSIGN_OR_RETURN(auto reach, AddIndices(a, domain, indices, /*target=*/0));
  a.op[0] = Operand(dst.tensor, domain, dst.strides, reach.first, reach.second);
  a.op[1] = Operand(src.tensor, domain, src.strides);
  a.mode = FoldCode(fold);
  a.alpha = alpha;
  const auto [low, high] = Reach(domain, dst.strides, reach.first, reach.second);
  const DType dtype = dst.tensor.dtype();
  if (fold == DeviceFold::kAssign) {
    DT_ASSIGN_OR_RETURN(Tensor slots, Slots(runner, dst.tensor, a, low, high));
    DT_RETURN_IF_ERROR(runner->Launch("claim", dtype, a));
    return runner->Launch("put", dtype, a);
  }
  if (!include_self) DT_RETURN_IF_ERROR(runner->Launch("identity", dtype, a));
  if (fold != DeviceFold::kMean) return runner->Launch("fold", dtype, a);
  DT_ASSIGN_OR_RETURN(Tensor counts, Slots(runner, dst.tensor, a, low, high));
  a.param[2] = 1;
  DT_RETURN_IF_ERROR(runner->Launch("fold", dtype, a));
  return DivideByCounts(runner, dst.tensor, counts, low, include_self);
}

namespace {

int64_t PowerOfTwoAtLeast(int64_t n) {
  int64_t padded = 1;
  while (padded < n) padded *= 2;
  return padded;
}

// Initialises the sort buffers of `a` (rows of param[1] positions) and runs the bitonic
// network's stages over them: log^2 of the padded length launches.
absl::Status RunSortNetwork(IndexKernelRunner* runner, DType dtype, IxArgs& a) {
  DT_RETURN_IF_ERROR(runner->Launch("sort_init", dtype, a));
  for (int64_t k = 2; k <= a.param[1]; k *= 2) {
    for (int64_t j = k / 2; j > 0; j /= 2) {
      a.param[2] = j;
      a.param[3] = k;
      DT_RETURN_IF_ERROR(runner->Launch("sort_step", dtype, a));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status SortRowsOnDevice(const Tensor& rows, bool descending, const Tensor& values, const Tensor& positions) {
  if (values.numel() == 0) return absl::OkStatus();
  DT_ASSIGN_OR_RETURN(IndexKernelRunner * runner, Runner(rows));
  const int64_t outer = rows.size(0), n = rows.size(1), keep = values.size(1);
  const int64_t padded = PowerOfTwoAtLeast(n);
  const Tensor buffer_values = Tensor::Empty({outer, padded}, rows.dtype(), rows.device());
  const Tensor buffer_positions = Tensor::Empty({outer, padded}, DType::kInt64, rows.device());
  IxArgs a = RowArgs(outer * padded, {&rows, &buffer_values, &buffer_positions, &values, &positions});
  a.param[0] = n;
  a.param[1] = padded;
  a.mode = descending ? 1 : 0;
  DT_RETURN_IF_ERROR(RunSortNetwork(runner, rows.dtype(), a));
  a.numel = a.sizes[0] = outer * keep;
  a.param[2] = keep;
  return runner->Launch("sort_take", rows.dtype(), a);
}

absl::Status ScanRowsOnDevice(const Tensor& rows, DeviceScan scan, const Tensor& out) {
  if (rows.numel() == 0) return absl::OkStatus();
  DT_ASSIGN_OR_RETURN(IndexKernelRunner * runner, Runner(rows));
  const int64_t n = rows.size(1);
  const DType accumulator = IsFloating(rows.dtype()) ? DType::kFloat64 : DType::kInt64;
  Tensor ping = Tensor::Empty(rows.sizes(), accumulator, rows.device());
  Tensor pong = Tensor::Empty(rows.sizes(), accumulator, rows.device());
  IxArgs a = RowArgs(rows.numel(), {&rows, &ping});
  a.param[0] = n;
  a.mode = scan == DeviceScan::kSum ? kIxSum : scan == DeviceScan::kProd ? kIxProd : kIxLogSumExp;
  DT_RETURN_IF_ERROR(runner->Launch("scan_init", rows.dtype(), a));
  for (int64_t step = 1; step < n; step *= 2) {
    a.op[0] = Flat(ping);
    a.op[1] = Flat(pong);
    a.param[1] = step;
    DT_RETURN_IF_ERROR(runner->Launch("scan_step", rows.dtype(), a));
    std::swap(ping, pong);
  }
  a.op[0] = Flat(ping);
  a.op[1] = Flat(out);
  return runner->Launch("scan_store", rows.dtype(), a);
}

absl::Status CumExtremeRowsOnDevice(const Tensor& rows, bool is_max, const Tensor& values, const Tensor& positions) {
  if (rows.numel() == 0) return absl::OkStatus();
  DT_ASSIGN_OR_RETURN(IndexKernelRunner * runner, Runner(rows));
  const int64_t n = rows.size(1);
  Tensor in_values = values, in_positions = positions;
  Tensor out_values = Tensor::Empty(rows.sizes(), rows.dtype(), rows.device());
  Tensor out_positions = Tensor::Empty(rows.sizes(), DType::kInt64, rows.device());
  IxArgs a = RowArgs(rows.numel(), {&rows, &in_values, &in_positions});
  a.param[0] = n;
  a.mode = is_max ? kIxMax : kIxMin;
  DT_RETURN_IF_ERROR(runner->Launch("pair_init", rows.dtype(), a));
  for (int64_t step = 1; step < n; step *= 2) {
    a = RowArgs(rows.numel(), {&rows, &in_values, &in_positions, &out_values, &out_positions});
    a.param[0] = n;
    a.param[1] = step;
    a.mode = is_max ? kIxMax : kIxMin;
    DT_RETURN_IF_ERROR(runner->Launch("cumext_step", rows.dtype(), a));
    std::swap(in_values, out_values);
    std::swap(in_positions, out_positions);
  }
  if (in_values.data() == values.data()) return absl::OkStatus();
  // An odd number of steps left the result in the scratch pair: one copy each into place.
  a = RowArgs(rows.numel(), {&values, &in_values});
  a.op[0].strides[0] = a.op[1].strides[0] = 1;
  DT_RETURN_IF_ERROR(runner->Launch("gather", rows.dtype(), a));
  a = RowArgs(rows.numel(), {&positions, &in_positions});
  a.op[0].strides[0] = a.op[1].strides[0] = 1;
  return runner->Launch("gather", rows.dtype(), a);
}

absl::Status ArgExtremeRowsOnDevice(const Tensor& rows, bool is_max, const Tensor& positions) {
  if (rows.numel() == 0) return absl::OkStatus();
  DT_ASSIGN_OR_RETURN(IndexKernelRunner * runner, Runner(rows));
  const int64_t outer = rows.size(0), n = rows.size(1);
  const Tensor values = Tensor::Empty(rows.sizes(), rows.dtype(), rows.device());
  const Tensor all_positions = Tensor::Empty(rows.sizes(), DType::kInt64, rows.device());
  IxArgs a = RowArgs(rows.numel(), {&rows, &values, &all_positions});
  a.param[0] = n;
  a.mode = is_max ? kIxMax : kIxMin;
  DT_RETURN_IF_ERROR(runner->Launch("pair_init", rows.dtype(), a));
  for (int64_t step = 1; step < n; step *= 2) {
    a.param[1] = step;
    DT_RETURN_IF_ERROR(runner->Launch("argext_step", rows.dtype(), a));
  }
  // Each row's winner sits at its lane 0: a strided gather picks them out.
  IxArgs take = RowArgs(outer, {&positions, &all_positions});
  take.op[0].strides[0] = 1;
  take.op[1].strides[0] = n;
  take.op[1].high_bytes = all_positions.numel() * sizeof(int64_t);
  return runner->Launch("gather", rows.dtype(), take);
}

absl::Status SearchSortedOnDevice(const Tensor& sequence, const Tensor* sorter, const Tensor& values,
                                  int64_t per_row, bool right, const Tensor& out) {
  if (out.numel() == 0) return absl::OkStatus();
  DT_ASSIGN_OR_RETURN(IndexKernelRunner * runner, Runner(values));
  IxArgs a = RowArgs(values.numel(), {&out, &values, &sequence, sorter != nullptr ? sorter : &sequence});
  a.param[0] = sequence.size(sequence.ndim() - 1);
  a.param[1] = per_row;
  a.param[3] = sorter != nullptr ? 1 : 0;
  a.mode = right ? 1 : 0;
  return runner->Launch("search", values.dtype(), a);
}

absl::StatusOr<Tensor> NonzeroOnDevice(const Tensor& input) {
  DT_ASSIGN_OR_RETURN(IndexKernelRunner * runner, Runner(input));
  const int64_t n = input.numel();
  if (n == 0) return Tensor::Empty({0, input.ndim()}, DType::kInt64, input.device());
  const Tensor flags = Contiguous(CastTo(input, DType::kBool));
  const Tensor running = Tensor::Empty({1, n}, DType::kInt64, input.device());
  DT_RETURN_IF_ERROR(ScanRowsOnDevice(flags.AsStrided({1, n}, {n, 1}, flags.offset()), DeviceScan::kSum, running));
  int64_t count = 0;
  DT_RETURN_IF_ERROR(ReadInto(runner, &count, static_cast<const int64_t*>(running.data()) + (n - 1)));
  if (count < 0 || count > n) {
    return absl::InternalError(absl::StrFormat("nonzero: the device counted %d of %d elements", count, n));
  }
  Tensor out = Tensor::Empty({count, input.ndim()}, DType::kInt64, input.device());
  if (count == 0 || input.ndim() == 0) return out;
  DT_ASSIGN_OR_RETURN(IxArgs a, DomainArgs(input.sizes()));
  a.op[a.operands++] = Flat(out);
  a.op[a.operands++] = Flat(flags);
  a.op[a.operands++] = Flat(running);
  DT_RETURN_IF_ERROR(runner->Launch("compact", input.dtype(), a));
  return out;
}

namespace {

// The positions of the rows of `rows` ([n, width], contiguous, width > 0) in stable sorted
// order, NaN largest: a bitonic network over positions alone, comparing the rows they point at.
// The first n of the (power-of-two) result are the order; padding follows.
absl::StatusOr<Tensor> SortedRowOrder(IndexKernelRunner* runner, const Tensor& rows) {
  const int64_t padded = PowerOfTwoAtLeast(rows.size(0));
  Tensor order = Tensor::Empty({padded}, DType::kInt64, rows.device());
  IxArgs a = RowArgs(padded, {&rows, &rows, &order});
  a.param[0] = rows.size(0);
  a.param[1] = padded;
  a.param[4] = rows.size(1);
  DT_RETURN_IF_ERROR(RunSortNetwork(runner, rows.dtype(), a));
  return order;
}

}  // namespace

absl::StatusOr<RowGroups> GroupRowsOnDevice(const Tensor& rows) {
  const int64_t n = rows.size(0);
  const Device device = rows.device();
  RowGroups g{Tensor::Empty({0}, DType::kInt64, device), Tensor::Empty({n}, DType::kInt64, device),
              Tensor::Empty({0}, DType::kInt64, device)};
  if (n == 0) return g;
  if (rows.size(1) == 0) return absl::InternalError("unique: rows without elements reached the device");
  DT_ASSIGN_OR_RETURN(IndexKernelRunner * runner, Runner(rows));
  DT_ASSIGN_OR_RETURN(const Tensor order, SortedRowOrder(runner, rows));
  const Tensor starts = Tensor::Empty({1, n}, DType::kBool, device);
  IxArgs a = RowArgs(n, {&rows, &starts, &order});
  a.param[4] = rows.size(1);
  DT_RETURN_IF_ERROR(runner->Launch("run_starts", rows.dtype(), a));
  const Tensor running = Tensor::Empty({1, n}, DType::kInt64, device);
  DT_RETURN_IF_ERROR(ScanRowsOnDevice(starts, DeviceScan::kSum, running));
  int64_t count = 0;
  DT_RETURN_IF_ERROR(ReadInto(runner, &count, static_cast<const int64_t*>(running.data()) + (n - 1)));
  if (count < 0 || count > n) {
    return absl::InternalError(absl::StrFormat("unique: the device counted %d groups of %d rows", count, n));
  }
  g.firsts = Tensor::Empty({count}, DType::kInt64, device);
  g.sizes = Tensor::Empty({count}, DType::kInt64, device);
  if (count == 0) return g;  // only a stand-in driver that runs no kernel counts none
  DT_RETURN_IF_ERROR(runner->Memset(g.sizes.data(), 0, count * sizeof(int64_t)));
  IxArgs r = RowArgs(n, {&order, &starts, &running, &g.group_of, &g.firsts, &g.sizes});
  DT_RETURN_IF_ERROR(runner->Launch("runs", rows.dtype(), r));
  return g;
}

absl::Status ArangeOnDevice(const Tensor& out, Scalar start, Scalar step) {
  if (out.numel() == 0) return absl::OkStatus();
  DT_ASSIGN_OR_RETURN(IndexKernelRunner * runner, Runner(out));
  IxArgs a = RowArgs(out.numel(), {&out});
  a.mode = kIxArange;
  a.param[1] = start.ToInt();
  a.param[2] = step.ToInt();
  a.param[3] = BitCast<int64_t>(start.ToDouble());
  a.param[4] = BitCast<int64_t>(step.ToDouble());
  return runner->Launch("range", out.dtype(), a);
}

uint64_t RandomCounters(int64_t numel, DType dtype, bool normal) {
  const uint64_t words = (normal ? 2 : 1) * (ItemSize(dtype) == 8 ? 2 : 1);
  return (static_cast<uint64_t>(numel) * words + 3) / 4;
}

thread_local CapturedRandomDraws* captured_random_draws = nullptr;

CapturedRandomDraws::CapturedRandomDraws(const Tensor& state) : state_(state), previous_(captured_random_draws) {
  captured_random_draws = this;
}
CapturedRandomDraws::~CapturedRandomDraws() { captured_random_draws = previous_; }

absl::Status CapturedRandomDraws::Advance() {
  if (counters_ == 0) return absl::OkStatus();
  DT_ASSIGN_OR_RETURN(IndexKernelRunner * runner, Runner(state_));
  IxArgs a = RowArgs(1, {&state_});
  a.mode = kIxAdvanceCounters;
  a.param[2] = static_cast<int64_t>(counters_);
  return runner->Launch("random", DType::kFloat32, a);
}

absl::Status RandomOnDevice(const Tensor& out, bool normal) {
  if (out.numel() == 0) return absl::OkStatus();
  DT_ASSIGN_OR_RETURN(IndexKernelRunner * runner, Runner(out));
  CapturedRandomDraws* captured = captured_random_draws;
  IxArgs a = captured != nullptr ? RowArgs(out.numel(), {&out, &captured->state_}) : RowArgs(out.numel(), {&out});
  a.mode = normal ? kIxNormal : kIxUniform;
  const uint64_t counters = RandomCounters(out.numel(), out.dtype(), normal);
  if (captured != nullptr) {
    a.param[2] = static_cast<int64_t>(captured->counters_);
    captured->counters_ += counters;
  } else {
    const PhiloxDraw draw = ReservePhiloxCounters(counters);
    a.param[1] = static_cast<int64_t>(draw.seed);
    a.param[2] = static_cast<int64_t>(draw.first);
  }
  return runner->Launch("random", out.dtype(), a);
}

absl::Status LinspaceOnDevice(const Tensor& out, double start, double end, double step) {
  if (out.numel() == 0) return absl::OkStatus();
  DT_ASSIGN_OR_RETURN(IndexKernelRunner * runner, Runner(out));
  IxArgs a = RowArgs(out.numel(), {&out});
  a.mode = kIxLinspace;
  a.param[1] = BitCast<int64_t>(start);
  a.param[2] = BitCast<int64_t>(end);
  a.param[3] = BitCast<int64_t>(step);
  a.param[4] = out.numel();
  return runner->Launch("range", out.dtype(), a);
}

absl::StatusOr<bool> IntegerOpOnDevice(DeviceIntegerOp op, const Tensor& out, const DomainOperand& x,
                                       const DomainOperand& y) {
  if (out.numel() == 0) return true;
  DT_ASSIGN_OR_RETURN(IndexKernelRunner * runner, Runner(out));
  DT_ASSIGN_OR_RETURN(IxArgs a, DomainArgs(out.sizes()));
  a.op[a.operands++] = Operand(out, out.sizes(), out.strides());
  a.op[a.operands++] = Operand(x.tensor, out.sizes(), x.strides);
  a.op[a.operands++] = Operand(y.tensor, out.sizes(), y.strides);
  a.mode = op == DeviceIntegerOp::kFloorDivide ? kIxFloorDivide
           : op == DeviceIntegerOp::kRemainder ? kIxRemainder
                                               : kIxPower;
  DT_ASSIGN_OR_RETURN(std::optional<int64_t> bad, LaunchChecked(runner, "int_binary", out.dtype(), a, out.device()));
  return !bad.has_value();
}

}  // namespace dt
