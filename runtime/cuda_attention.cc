#include "runtime/cuda_attention.h"

#include <array>
#include <atomic>
#include <limits>
#include <mutex>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "runtime/cuda_driver.h"
#include "runtime/cuda_index_kernels.h"
#include "runtime/errors.h"
#include "runtime/log.h"
#include "runtime/nvrtc.h"

namespace dt {
namespace {

std::atomic<int64_t> launches{0};

bool KernelDType(DType dtype) {
  return dtype == DType::kFloat32 || dtype == DType::kFloat16 || dtype == DType::kBFloat16;
}

Dims LeadingDims(const Tensor& t, int trailing) {
  const int keep = std::max(0, static_cast<int>(t.ndim()) - trailing);
  return Dims(t.sizes().begin(), t.sizes().begin() + keep);
}

// Sizes every operand broadcasts into: (batch dims, L, S, E, Ev).
struct Geometry {
  Dims batch;
  int64_t queries = 0, keys = 0, head = 0, value_head = 0;
};

absl::StatusOr<Geometry> GeometryOf(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor* mask) {
  Geometry g;
  g.queries = q.size(q.ndim() - 2);
  g.keys = k.size(k.ndim() - 2);
  g.head = q.size(q.ndim() - 1);
  g.value_head = v.size(v.ndim() - 1);
  DT_ASSIGN_OR_RETURN(g.batch, BroadcastShapes(LeadingDims(q, 2), LeadingDims(k, 2)));
  DT_ASSIGN_OR_RETURN(g.batch, BroadcastShapes(g.batch, LeadingDims(v, 2)));
  if (mask != nullptr) {
    DT_ASSIGN_OR_RETURN(g.batch, BroadcastShapes(g.batch, LeadingDims(*mask, 2)));
  }
  return g;
}

std::string MaskMisfit(const Tensor& q, const Tensor* mask, const AttentionSpec& spec, const Geometry& g) {
  if ((mask != nullptr) != (spec.mask_kind != kAttentionNoMask)) return "mask and mask kind disagree";
  if (mask == nullptr) return "";
  const bool boolean = spec.mask_kind != kAttentionAddMask;
  if (boolean ? mask->dtype() != DType::kBool : mask->dtype() != q.dtype()) {
    return absl::StrCat("a ", DTypeName(mask->dtype()), " mask for ", DTypeName(q.dtype()), " scores");
  }
  const int64_t r = mask->ndim();
  const bool fits = (r < 1 || mask->size(r - 1) == 1 || mask->size(r - 1) == g.keys) &&
                    (r < 2 || mask->size(r - 2) == 1 || mask->size(r - 2) == g.queries);
  return fits ? "" : absl::StrCat("mask ", mask->ShapeString(), " does not broadcast to the scores");
}

// Operand `t`'s strides over (batch 0, batch 1, rows, columns), right-aligned to `sizes`, 0
// along every dim it broadcasts.
std::array<int64_t, 4> StridesOver(const Tensor& t, const std::array<int64_t, 4>& sizes) {
  std::array<int64_t, 4> strides{};
  for (int d = 0; d < 4; ++d) {
    const int64_t own = static_cast<int64_t>(t.ndim()) - 4 + d;
    if (own >= 0 && sizes[d] > 1 && t.size(own) == sizes[d]) strides[d] = t.stride(own);
  }
  return strides;
}

AttentionOperand Operand(const Tensor& t, const std::array<int64_t, 4>& sizes) {
  AttentionOperand o{};
  o.data = static_cast<char*>(t.data());
  const std::array<int64_t, 4> strides = StridesOver(t, sizes);
  int64_t low = 0, high = 0;
  for (int d = 0; d < 4; ++d) {
    o.strides[d] = strides[d];
    const int64_t reach = (sizes[d] - 1) * strides[d];
    (reach < 0 ? low : high) += reach;
  }
  const int64_t itemsize = ItemSize(t.dtype());
  o.low_bytes = low * itemsize;
  o.high_bytes = (high + 1) * itemsize;
  return o;
}

// Threads sharing one query row (runtime/attention_kernel.cuh's kGroup).
int ThreadsPerRow(int64_t head, int64_t value_head) {
  const int64_t widest = std::max(head, value_head);
  return widest <= 32 ? 1 : widest <= 64 ? 2 : 4;
}

// Threads per block: kAttentionThreads, halved (down to one warp) while the launch would give
// fewer than two blocks per SM, so that a small problem (GPT-2's 48 heads of 128 tokens) still
// spreads over the device. Smaller blocks load each key tile more often, from L2.
int BlockThreads(int64_t batch, int64_t queries, int group, int sm_count) {
  int threads = kAttentionThreads;
  auto blocks = [&](int t) { return batch * ((queries + t / group - 1) / (t / group)); };
  while (threads > 32 && blocks(threads) < 2 * int64_t{sm_count}) threads /= 2;
  return threads;
}

// One device's compiled variants, each loaded once; failures are remembered.
class AttentionModules {
 public:
  absl::StatusOr<CUfunction> Function(CudaDevice* device, const std::string& source, const std::string& name) {
    std::lock_guard<std::mutex> lock(mu_);
    const std::string key = absl::StrCat(device->index(), "|", source);
    if (auto it = functions_.find(key); it != functions_.end()) return it->second;
    absl::StatusOr<CUfunction> loaded = Load(device, source, name);
    functions_.emplace(key, loaded);
    return loaded;
  }

 private:
  static absl::StatusOr<CUfunction> Load(CudaDevice* device, const std::string& source, const std::string& name) {
    if (!ProbeNvrtc().available) return absl::UnavailableError(ProbeNvrtc().reason);
    DT_ASSIGN_OR_RETURN(std::string cubin, CompileRuntimeModule(source, name, device->sm_arch()));
    DT_RETURN_IF_ERROR(device->Activate());
    CUmodule module = nullptr;  // lives for the process: captured graphs may name its kernel
    DT_RETURN_IF_ERROR(CudaCall(device->driver().cuModuleLoadData(&module, cubin.data()), "cuModuleLoadData"));
    CUfunction fn = nullptr;
    DT_RETURN_IF_ERROR(CudaCall(device->driver().cuModuleGetFunction(&fn, module, "dt_att_forward"),
                                "cuModuleGetFunction"));
    return fn;
  }

  std::mutex mu_;
  absl::flat_hash_map<std::string, absl::StatusOr<CUfunction>> functions_;
};

AttentionModules& Modules() {
  static auto* modules = new AttentionModules();  // lives for the process, like the devices
  return *modules;
}

bool OnDevice(const Tensor& t, Device device) { return t.device() == device; }

CudaAttentionArgs LaunchArgs(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor* mask,
                             const Tensor& out, const Geometry& g, const AttentionSpec& spec, int threads) {
  const int64_t b0 = g.batch.size() == 2 ? g.batch[0] : 1;
  const int64_t b1 = g.batch.empty() ? 1 : g.batch.back();
  CudaAttentionArgs a{};
  a.query = Operand(q, {b0, b1, g.queries, g.head});
  a.key = Operand(k, {b0, b1, g.keys, g.head});
  a.value = Operand(v, {b0, b1, g.keys, g.value_head});
  if (mask != nullptr) a.mask = Operand(*mask, {b0, b1, g.queries, g.keys});
  a.out = Operand(out, {b0, b1, g.queries, g.value_head});
  a.batch[0] = b0;
  a.batch[1] = b1;
  a.queries = g.queries;
  a.keys = g.keys;
  const int rows = threads / ThreadsPerRow(g.head, g.value_head);
  a.query_blocks = (g.queries + rows - 1) / rows;
  a.scale = static_cast<float>(spec.scale);
  a.post_scale = static_cast<float>(spec.post_scale);
  return a;
}

}  // namespace

std::string AttentionKernelMisfit(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor* mask,
                                  const AttentionSpec& spec) {
  if (!KernelDType(q.dtype()) || k.dtype() != q.dtype() || v.dtype() != q.dtype()) {
    return absl::StrCat("query, key, value are ", DTypeName(q.dtype()), ", ", DTypeName(k.dtype()), ", ",
                        DTypeName(v.dtype()), " (the kernel takes one of float32, float16, bfloat16)");
  }
  if (q.ndim() < 2 || k.ndim() < 2 || v.ndim() < 2 || q.size(q.ndim() - 1) != k.size(k.ndim() - 1) ||
      k.size(k.ndim() - 2) != v.size(v.ndim() - 2)) {
    return absl::StrCat("shapes ", q.ShapeString(), ", ", k.ShapeString(), ", ", v.ShapeString(),
                        " are not [..., L, E], [..., S, E], [..., S, Ev]");
  }
  absl::StatusOr<Geometry> g = GeometryOf(q, k, v, mask);
  if (!g.ok()) return std::string(g.status().message());
  if (g->batch.size() > 2) return absl::StrCat(g->batch.size(), " batch dims (the kernel takes two)");
  if (g->head < 1 || g->head > kAttentionMaxHeadDim || g->value_head < 1 || g->value_head > kAttentionMaxHeadDim) {
    return absl::StrFormat("head dims %d and %d (the kernel takes 1 to %d)", g->head, g->value_head,
                           kAttentionMaxHeadDim);
  }
  if (g->keys == 0) return "no keys";
  return MaskMisfit(q, mask, spec, *g);
}

absl::StatusOr<std::optional<Tensor>> FusedAttentionOnDevice(const Tensor& q, const Tensor& k, const Tensor& v,
                                                             const Tensor* mask, const AttentionSpec& spec) {
  const Device device = q.device();
  if (device.type != DeviceType::kCuda || !OnDevice(k, device) || !OnDevice(v, device) ||
      (mask != nullptr && !OnDevice(*mask, device))) {
    return std::nullopt;
  }
  if (std::string misfit = AttentionKernelMisfit(q, k, v, mask, spec); !misfit.empty()) return std::nullopt;
  DT_ASSIGN_OR_RETURN(Geometry g, GeometryOf(q, k, v, mask));
  Dims out_sizes = g.batch;
  out_sizes.push_back(g.queries);
  out_sizes.push_back(g.value_head);
  int64_t elements = g.queries * g.value_head;
  for (int64_t b : g.batch) elements *= b;
  if (elements == 0) return Tensor::Empty(out_sizes, q.dtype(), device);
  DT_ASSIGN_OR_RETURN(CudaDevice * cuda, CudaDevice::Get(device.index));
  const std::string source = AttentionKernelSource(q.dtype(), static_cast<int>(g.head),
                                                   static_cast<int>(g.value_head), spec.mask_kind, spec.causal);
  const std::string name = absl::StrFormat("attention_%s_%d_%d_%d%s", DTypeName(q.dtype()), g.head, g.value_head,
                                           static_cast<int>(spec.mask_kind), spec.causal ? "_causal" : "");
  absl::StatusOr<CUfunction> fn = Modules().Function(cuda, source, name);
  if (!fn.ok()) {
    if (log::Enabled(log::Kind::kKernels)) {
      log::Write(log::Kind::kKernels, absl::StrCat("fused attention on ", device.ToString(),
                                                   " runs as separate ops: ", fn.status().message()));
    }
    return std::nullopt;
  }
  Tensor out = Tensor::Empty(out_sizes, q.dtype(), device);
  int64_t batch = 1;
  for (int64_t b : g.batch) batch *= b;
  const int threads = BlockThreads(batch, g.queries, ThreadsPerRow(g.head, g.value_head), cuda->multiprocessors());
  CudaAttentionArgs args = LaunchArgs(q, k, v, mask, out, g, spec, threads);
  const int64_t blocks = args.batch[0] * args.batch[1] * args.query_blocks;
  if (blocks > std::numeric_limits<int32_t>::max()) return std::nullopt;
  void* params[] = {&args};
  DT_RETURN_IF_ERROR(cuda->Activate());
  DT_RETURN_IF_ERROR(CudaCall(cuda->driver().cuLaunchKernel(*fn, static_cast<unsigned>(blocks), 1, 1,
                                                            static_cast<unsigned>(threads), 1, 1, 0, cuda->stream(), params,
                                                            nullptr),
                              "cuLaunchKernel"));
  ++launches;
  return out;
}

int64_t FusedAttentionLaunches() { return launches.load(); }

std::string AttentionKernelSource(DType dtype, int head_dim, int value_dim, AttentionMask mask_kind, bool causal) {
  return absl::StrFormat("#define DT_ATT_SCALAR %s\n#define DT_ATT_E %d\n#define DT_ATT_EV %d\n"
                         "#define DT_ATT_MASK %d\n#define DT_ATT_CAUSAL %d\n%s",
                         CppType(dtype), head_dim, value_dim, static_cast<int>(mask_kind), causal ? 1 : 0,
                         AttentionKernelModuleText());
}

}  // namespace dt
