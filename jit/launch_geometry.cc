#include "jit/launch_geometry.h"

#include "absl/strings/str_format.h"
#include "runtime/errors.h"

namespace dt::jit {
namespace {

// One loop dim: its size and each operand's stride along it.
struct LoopDim {
  int64_t size;
  Dims strides;
};

// Drops size-1 dims and merges neighbours every operand walks contiguously. Outer first.
std::vector<LoopDim> Coalesce(std::vector<LoopDim> dims) {
  std::vector<LoopDim> out;
  for (LoopDim& d : dims) {
    if (d.size == 1) continue;
    if (!out.empty()) {
      LoopDim& prev = out.back();
      bool mergeable = true;
      for (size_t k = 0; k < d.strides.size() && mergeable; ++k) {
        mergeable = prev.strides[k] == d.strides[k] * d.size;
      }
      if (mergeable) {
        prev.size *= d.size;
        prev.strides = d.strides;
        continue;
      }
    }
    out.push_back(std::move(d));
  }
  return out;
}

}  // namespace

absl::StatusOr<LaunchGeometry> PrepareLaunch(const Kernel& kernel, DimsView domain,
                                             absl::Span<const Tensor> tensors) {
  const int64_t rank = static_cast<int64_t>(domain.size());
  const size_t num_operands = kernel.operands.size();
  std::vector<bool> reduced(rank, false);
  for (int64_t d : kernel.reduced_dims) reduced[d] = true;
  Dims keep_shape, squeezed_shape;
  for (int64_t d = 0; d < rank; ++d) {
    keep_shape.push_back(reduced[d] ? 1 : domain[d]);
    if (!reduced[d]) squeezed_shape.push_back(domain[d]);
  }
  // strides[k][d]: operand k's element stride along domain dim d.
  std::vector<Dims> strides(num_operands);
  for (size_t k = 0; k < num_operands; ++k) {
    const KernelOperand& op = kernel.operands[k];
    switch (op.mapping) {
      case Mapping::kFull: {
        DT_ASSIGN_OR_RETURN(strides[k], BroadcastStrides(tensors[k], domain));
        break;
      }
      case Mapping::kRowKeepdim: {
        DT_ASSIGN_OR_RETURN(strides[k], BroadcastStrides(tensors[k], keep_shape));
        break;
      }
      case Mapping::kRowSqueezed: {
        DT_ASSIGN_OR_RETURN(Dims s, BroadcastStrides(tensors[k], squeezed_shape));
        Dims full(rank, 0);
        for (int64_t d = 0, j = 0; d < rank; ++d) {
          if (!reduced[d]) full[d] = s[j++];
        }
        strides[k] = std::move(full);
        break;
      }
    }
  }
  std::vector<LoopDim> kept, folded;
  for (int64_t d = 0; d < rank; ++d) {
    LoopDim dim{domain[d], {}};
    for (size_t k = 0; k < num_operands; ++k) dim.strides.push_back(strides[k][d]);
    (reduced[d] && kernel.is_row_kernel() ? folded : kept).push_back(std::move(dim));
  }
  kept = Coalesce(std::move(kept));
  folded = Coalesce(std::move(folded));
  LoopDim inner{1, Dims(num_operands, 0)};
  if (kernel.is_row_kernel()) {
    if (folded.size() > 1) {
      return Error(ErrorKind::kRuntime, "the reduced dims can't be walked as one loop");
    }
    if (!folded.empty()) inner = folded[0];
  } else if (!kept.empty()) {
    inner = kept.back();
    kept.pop_back();
  }
  LaunchGeometry g;
  for (const LoopDim& d : kept) g.outer_sizes.push_back(d.size);
  g.inner_size = inner.size;
  g.strides.reserve(num_operands * (kept.size() + 1));
  for (size_t k = 0; k < num_operands; ++k) {
    for (const LoopDim& d : kept) g.strides.push_back(d.strides[k]);
    g.strides.push_back(inner.strides[k]);
  }
  return g;
}

}  // namespace dt::jit
