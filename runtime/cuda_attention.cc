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

AttentionOperand Operand(const Tensor& t, const std::array<int64_t, 4>& strides, const std::array<int64_t, 4>& sizes) {
  AttentionOperand o{};
  o.data = static_cast<char*>(t.data());
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

// One kernel variant: what its source's defines fix.
struct Variant {
  DType dtype;
  int head, value_head;
  AttentionMask mask_kind;
  bool causal;
  bool dropout;

  std::string Name() const {
    return absl::StrFormat("attention_%s_%d_%d_%d%s%s", DTypeName(dtype), head, value_head,
                           static_cast<int>(mask_kind), causal ? "_causal" : "", dropout ? "_dropout" : "");
  }
};

// One device's compiled variants, each loaded once; failures are remembered. Looked up by the
// variant's name, so a cached call builds no source text.
class AttentionModules {
 public:
  absl::StatusOr<CUfunction> Function(CudaDevice* device, const Variant& variant) {
    std::lock_guard<std::mutex> lock(mu_);
    std::string key = absl::StrCat(device->index(), "|", variant.Name());
    if (auto it = functions_.find(key); it != functions_.end()) return it->second;
    absl::StatusOr<CUfunction> loaded = Load(device, variant);
    functions_.emplace(std::move(key), loaded);
    return loaded;
  }

 private:
  static absl::StatusOr<CUfunction> Load(CudaDevice* device, const Variant& v) {
    if (!ProbeNvrtc().available) return absl::UnavailableError(ProbeNvrtc().reason);
    const std::string source = AttentionKernelSource(v.dtype, v.head, v.value_head, v.mask_kind, v.causal, v.dropout);
    DT_ASSIGN_OR_RETURN(std::string cubin, CompileRuntimeModule(source, v.Name(), device->sm_arch()));
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
                             const Tensor* keep, const Tensor& out, const AttentionLayout& l,
                             const AttentionSpec& spec, int threads) {
  CudaAttentionArgs a{};
  a.query = Operand(q, l.q, l.QuerySizes());
  a.key = Operand(k, l.k, l.KeySizes());
  a.value = Operand(v, l.v, l.ValueSizes());
  if (mask != nullptr) a.mask = Operand(*mask, l.mask, l.MaskSizes());
  if (keep != nullptr) a.keep = Operand(*keep, l.keep, l.MaskSizes());
  a.out = Operand(out, StridesOver(out, l.OutSizes()), l.OutSizes());
  a.batch[0] = l.batch[0];
  a.batch[1] = l.batch[1];
  a.queries = l.queries;
  a.keys = l.keys;
  const int rows = threads / ThreadsPerRow(l.head, l.value_head);
  a.query_blocks = (l.queries + rows - 1) / rows;
  a.scale = static_cast<float>(spec.scale);
  a.post_scale = static_cast<float>(spec.post_scale);
  a.keep_scale = static_cast<float>(spec.keep_scale);
  return a;
}

}  // namespace

absl::StatusOr<std::optional<Tensor>> FusedAttentionOnDevice(const Tensor& q, const Tensor& k, const Tensor& v,
                                                             const Tensor* mask, const Tensor* keep,
                                                             const AttentionSpec& spec) {
  const Device device = q.device();
  if (device.type != DeviceType::kCuda || !OnDevice(k, device) || !OnDevice(v, device) ||
      (mask != nullptr && !OnDevice(*mask, device)) || (keep != nullptr && !OnDevice(*keep, device))) {
    return std::nullopt;
  }
  if (!AttentionKernelMisfit(q, k, v, mask, keep, spec).empty()) return std::nullopt;
  DT_ASSIGN_OR_RETURN(const AttentionLayout l, AttentionLayoutOf(q, k, v, mask, keep));
  if (l.batch_count() * l.queries * l.value_head == 0) return Tensor::Empty(l.out_sizes, q.dtype(), device);
  DT_ASSIGN_OR_RETURN(CudaDevice * cuda, CudaDevice::Get(device.index));
  const Variant variant{q.dtype(), static_cast<int>(l.head), static_cast<int>(l.value_head), spec.mask_kind,
                        spec.causal, keep != nullptr};
  absl::StatusOr<CUfunction> fn = Modules().Function(cuda, variant);
  if (!fn.ok()) {
    if (log::Enabled(log::Kind::kKernels)) {
      log::Write(log::Kind::kKernels, absl::StrCat("fused attention on ", device.ToString(),
                                                   " runs as separate ops: ", fn.status().message()));
    }
    return std::nullopt;
  }
  Tensor out = Tensor::Empty(l.out_sizes, q.dtype(), device);
  const int threads =
      BlockThreads(l.batch_count(), l.queries, ThreadsPerRow(l.head, l.value_head), cuda->multiprocessors());
  CudaAttentionArgs args = LaunchArgs(q, k, v, mask, keep, out, l, spec, threads);
  const int64_t blocks = args.batch[0] * args.batch[1] * args.query_blocks;
  if (blocks > std::numeric_limits<int32_t>::max()) return std::nullopt;
  void* params[] = {&args};
  DT_RETURN_IF_ERROR(cuda->Activate());
  DT_RETURN_IF_ERROR(CudaCall(cuda->driver().cuLaunchKernel(*fn, static_cast<unsigned>(blocks), 1, 1,
                                                            static_cast<unsigned>(threads), 1, 1, 0, cuda->stream(), params,
                                                            nullptr),
                              "cuLaunchKernel"));
  ++launches;
  CountFusedAttentionRun();
  return out;
}

int64_t FusedAttentionLaunches() { return launches.load(); }

std::string AttentionKernelSource(DType dtype, int head_dim, int value_dim, AttentionMask mask_kind, bool causal,
                                  bool dropout) {
  return absl::StrFormat("#define DT_ATT_SCALAR %s\n#define DT_ATT_E %d\n#define DT_ATT_EV %d\n"
                         "#define DT_ATT_MASK %d\n#define DT_ATT_CAUSAL %d\n#define DT_ATT_DROPOUT %d\n%s",
                         CppType(dtype), head_dim, value_dim, static_cast<int>(mask_kind), causal ? 1 : 0,
                         dropout ? 1 : 0, AttentionKernelModuleText());
}

}  // namespace dt
