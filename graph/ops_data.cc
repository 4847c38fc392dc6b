// Data ops that rearrange or overwrite whole tensors: fill_/zero_/copy_, tril/triu, flip, roll,
// repeat, unbind, eye. Each is one node between fused kernels (unbind returns views). On CUDA,
// fill_/zero_/copy_ stay on the device (runtime/copy.h); flip, roll and repeat are remapped
// gathers and tril/triu/eye band kernels (runtime/cuda_index_kernels.h).
#include <cstring>

#include "absl/strings/str_format.h"
#include "graph/cuda_eager.h"
#include "graph/op_registry.h"
#include "runtime/copy.h"
#include "runtime/cuda_index_kernels.h"
#include "runtime/errors.h"

namespace dt {
namespace {

OpResult One(Tensor t) { return OpResult{std::move(t)}; }

// ---- fill_, zero_, copy_: the in-place forms write these results into the tensor ----

absl::StatusOr<OpResult> FillEager(const OpDef& op, const OpArgs& args) {
  const Tensor& input = args.tensor(0);
  Tensor out = Tensor::Empty(input.sizes(), input.dtype(), input.device());
  if (op.name() == "zero") {
    DT_RETURN_IF_ERROR(Fill(out, Scalar::Int(0)));
    return One(out);
  }
  if (args.is_tensor(1)) {
    if (args.tensor(1).ndim() != 0) {
      return Error(ErrorKind::kValue, absl::StrFormat("fill_(): the value must be a number or a 0-d tensor, got a "
                                                      "tensor of shape %s",
                                                      args.tensor(1).ShapeString()));
    }
    DT_RETURN_IF_ERROR(CopyInto(out, args.tensor(1)));  // broadcasts, and stays on the device
    return One(out);
  }
  DT_RETURN_IF_ERROR(Fill(out, args.scalar(1)));
  return One(out);
}

absl::StatusOr<OpResult> CopyEager(const OpDef&, const OpArgs& args) {
  const Tensor& input = args.tensor(0);
  Tensor out = Tensor::Empty(input.sizes(), input.dtype(), input.device());
  DT_RETURN_IF_ERROR(CopyInto(out, args.tensor(1)));
  return One(out);
}

// ---- moves along each dim: out[i_0, ..., i_k] = input[source[0][i_0], ..., source[k][i_k]] ----

Tensor RemapEachDim(const Tensor& input, const std::vector<std::vector<int64_t>>& source) {
  Dims sizes;
  for (const auto& s : source) sizes.push_back(static_cast<int64_t>(s.size()));
  Tensor out = Tensor::Empty(sizes, input.dtype(), input.device());
  if (out.is_meta() || out.numel() == 0) return out;
  const int64_t rank = input.ndim(), itemsize = input.itemsize();
  const char* base = static_cast<const char*>(input.data()) - input.offset() * itemsize;
  char* dst = static_cast<char*>(out.data());
  Dims counter(rank, 0);
  int64_t from = input.offset();
  for (int64_t d = 0; d < rank; ++d) from += source[d][0] * input.stride(d);
  for (int64_t at = 0; at < out.numel(); ++at) {
    std::memcpy(dst + at * itemsize, base + from * itemsize, itemsize);
    for (int64_t d = rank - 1; d >= 0; --d) {
      from -= source[d][counter[d]] * input.stride(d);
      if (++counter[d] < sizes[d]) {
        from += source[d][counter[d]] * input.stride(d);
        break;
      }
      counter[d] = 0;
      from += source[d][0] * input.stride(d);
    }
  }
  return out;
}

// The device form: out[i] = input[remapped i] in one gather.
absl::StatusOr<OpResult> RemapOnDevice(const Tensor& input, const Dims& sizes, const std::vector<DomainRemap>& remaps) {
  Tensor out = Tensor::Empty(sizes, input.dtype(), input.device());
  DT_RETURN_IF_ERROR(GatherOnDevice(out, DomainOperand{input, input.strides()}, {}, remaps));
  return One(out);
}

std::vector<std::vector<int64_t>> Identity(const Tensor& t) {
  std::vector<std::vector<int64_t>> source(t.ndim());
  for (int64_t d = 0; d < t.ndim(); ++d) {
    for (int64_t i = 0; i < t.size(d); ++i) source[d].push_back(i);
  }
  return source;
}

absl::StatusOr<OpResult> FlipEager(const OpDef& op, const OpArgs& args) {
  const Tensor& input = args.tensor(0);
  DT_RUN_THROUGH_HOST_IF_NEEDED(op, args, input);
  auto source = Identity(input);
  std::vector<DomainRemap> remaps(input.ndim(), DomainRemap{1, 0, 0});
  std::vector<bool> seen(input.ndim(), false);
  for (int64_t d : args.ints(1)) {
    DT_ASSIGN_OR_RETURN(int64_t nd, NormalizeDim(d, input.ndim()));
    if (seen[nd]) return Error(ErrorKind::kValue, absl::StrFormat("flip(): dim %d appears multiple times", nd));
    seen[nd] = true;
    std::reverse(source[nd].begin(), source[nd].end());
    remaps[nd] = DomainRemap{-1, input.size(nd) - 1, input.size(nd)};
  }
  if (IndexKernelsRun(input)) return RemapOnDevice(input, input.sizes(), remaps);
  return One(RemapEachDim(input, source));
}

absl::StatusOr<OpResult> RollEager(const OpDef& op, const OpArgs& args) {
  const Tensor& input = args.tensor(0);
  DT_RUN_THROUGH_HOST_IF_NEEDED(op, args, input);
  const Dims& shifts = args.ints(1);
  if (args.is_none(2) || args.ints(2).empty()) {  // over the flattened tensor, shape kept
    if (shifts.size() != 1) return Error(ErrorKind::kValue, "roll(): without dims, shifts must be one int");
    const Tensor flat = Contiguous(input);
    DT_ASSIGN_OR_RETURN(OpResult rolled, CallOp(*OpRegistry::Get().Find("roll"),
                                                OpArgs({flat.AsStrided({flat.numel()}, {1}, flat.offset()), shifts,
                                                        Dims{0}})));
    return One(rolled[0].AsStrided(input.sizes(), ContiguousStrides(input.sizes()), rolled[0].offset()));
  }
  const Dims& dims = args.ints(2);
  if (dims.size() != shifts.size()) {
    return Error(ErrorKind::kValue, absl::StrFormat("roll(): shifts (%d) and dims (%d) must have the same length",
                                                    shifts.size(), dims.size()));
  }
  auto source = Identity(input);
  std::vector<DomainRemap> remaps(input.ndim(), DomainRemap{1, 0, 0});
  for (size_t k = 0; k < dims.size(); ++k) {
    DT_ASSIGN_OR_RETURN(int64_t d, NormalizeDim(dims[k], input.ndim()));
    const int64_t n = input.size(d);
    for (int64_t i = 0; n > 0 && i < n; ++i) source[d][i] = (((source[d][i] - shifts[k]) % n) + n) % n;
    if (n > 0) remaps[d] = DomainRemap{1, (remaps[d].shift - shifts[k] % n) % n, n};
  }
  if (IndexKernelsRun(input)) return RemapOnDevice(input, input.sizes(), remaps);
  return One(RemapEachDim(input, source));
}

absl::StatusOr<OpResult> RepeatEager(const OpDef& op, const OpArgs& args) {
  const Tensor& input = args.tensor(0);
  DT_RUN_THROUGH_HOST_IF_NEEDED(op, args, input);
  const Dims& repeats = args.ints(1);
  const int64_t rank = static_cast<int64_t>(repeats.size());
  if (rank < input.ndim()) {
    return Error(ErrorKind::kValue,
                 absl::StrFormat("repeat(): %d repeats for a tensor of %d dims (shape %s): give at least one per dim",
                                 rank, input.ndim(), input.ShapeString()));
  }
  Dims sizes(rank - input.ndim(), 1), strides(rank - input.ndim(), 0);
  sizes.insert(sizes.end(), input.sizes().begin(), input.sizes().end());
  strides.insert(strides.end(), input.strides().begin(), input.strides().end());
  const Tensor padded = input.AsStrided(sizes, strides, input.offset());
  std::vector<std::vector<int64_t>> source(rank);
  std::vector<DomainRemap> remaps(rank, DomainRemap{1, 0, 0});
  Dims out_sizes;
  for (int64_t d = 0; d < rank; ++d) {
    if (repeats[d] < 0) return Error(ErrorKind::kValue, absl::StrFormat("repeat(): negative repeat %d", repeats[d]));
    for (int64_t i = 0; i < repeats[d] * sizes[d]; ++i) source[d].push_back(i % sizes[d]);
    out_sizes.push_back(repeats[d] * sizes[d]);
    remaps[d].modulus = sizes[d];
  }
  if (IndexKernelsRun(input)) return RemapOnDevice(padded, out_sizes, remaps);
  return One(RemapEachDim(padded, source));
}

// ---- tril / triu: the last two dims, other elements zeroed ----

absl::StatusOr<OpResult> TriangleEager(const OpDef& op, const OpArgs& args) {
  const Tensor& input = args.tensor(0);
  if (input.ndim() < 2) {
    return Error(ErrorKind::kValue, absl::StrFormat("%s(): input must have at least 2 dims, got shape %s", op.name(),
                                                    input.ShapeString()));
  }
  DT_RUN_THROUGH_HOST_IF_NEEDED(op, args, input);
  const bool lower = op.name() == "tril";
  const int64_t diagonal = args.int_(1);
  Tensor out = Tensor::Empty(input.sizes(), input.dtype(), input.device());
  if (out.is_meta() || out.numel() == 0) return One(out);
  if (IndexKernelsRun(input)) {
    DT_RETURN_IF_ERROR(BandOnDevice(out, DomainOperand{input, input.strides()}, lower ? INT64_MIN : diagonal,
                                    lower ? diagonal : INT64_MAX));
    return One(out);
  }
  DT_RETURN_IF_ERROR(CopyInto(out, input));
  const int64_t rows = out.size(out.ndim() - 2), cols = out.size(out.ndim() - 1);
  DT_DISPATCH_ALL(out.dtype(), [&] {
    scalar_t* data = out.data_as<scalar_t>();
    for (int64_t m = 0; m < out.numel() / (rows * cols); ++m) {
      for (int64_t i = 0; i < rows; ++i) {
        for (int64_t j = 0; j < cols; ++j) {
          if (lower ? j - i > diagonal : j - i < diagonal) data[(m * rows + i) * cols + j] = scalar_t(0);
        }
      }
    }
  });
  return One(out);
}

absl::StatusOr<OpResult> UnbindEager(const OpDef&, const OpArgs& args) {
  const Tensor& input = args.tensor(0);
  if (input.ndim() == 0) return Error(ErrorKind::kIndex, "unbind(): a 0-d tensor has no dim to unbind");
  DT_ASSIGN_OR_RETURN(int64_t dim, NormalizeDim(args.int_(1), input.ndim()));
  Dims sizes = input.sizes(), strides = input.strides();
  sizes.erase(sizes.begin() + dim);
  strides.erase(strides.begin() + dim);
  OpResult out;
  for (int64_t i = 0; i < input.size(dim); ++i) {
    out.push_back(input.AsStrided(sizes, strides, input.offset() + i * input.stride(dim)));
  }
  return out;
}

absl::StatusOr<OpResult> EyeEager(const OpDef& op, const OpArgs& args) {
  const int64_t n = args.int_(0), m = args.is_none(1) ? n : args.int_(1);
  if (n < 0 || m < 0) return Error(ErrorKind::kValue, absl::StrFormat("eye(): sizes must be non-negative, got %d, %d", n, m));
  const DType dtype = args.dtype(2).value_or(DefaultFloat());
  const Device device = args.device(3).value_or(Device::Cpu());
  Tensor t = Tensor::Empty({n, m}, dtype, device);
  if (t.is_meta()) return One(t);
  DT_RUN_THROUGH_HOST_IF_NEEDED(op, args, t);
  if (IndexKernelsRun(t)) {  // ones on the diagonal of a zero band
    const Tensor one = ScalarTensor(Scalar::Int(1), dtype, device);
    DT_RETURN_IF_ERROR(BandOnDevice(t, DomainOperand{one, Dims{0, 0}}, 0, 0));
    return One(t);
  }
  DT_RETURN_IF_ERROR(Fill(t, Scalar::Int(0)));
  DT_DISPATCH_ALL(dtype, [&] {
    for (int64_t i = 0; i < std::min(n, m); ++i) t.data_as<scalar_t>()[i * m + i] = scalar_t(1);
  });
  return One(t);
}

}  // namespace

void RegisterDataOps(OpRegistry& registry) {
  constexpr uint32_t kBoth = kMethod | kFunction;
  // fill and zero are only bound as Tensor.fill_ / Tensor.zero_ (and dt.fill), as in PyTorch.
  registry.Add("fill(Tensor input, Operand value) -> Tensor", OpKind::kData,
               kFunction | kInplaceVariant | kCudaNative, &FillEager);
  registry.Add("zero(Tensor input) -> Tensor", OpKind::kData, kInplaceVariant | kCudaNative, &FillEager);
  registry.Add("copy(Tensor input, Tensor src) -> Tensor", OpKind::kData, kInplaceVariant | kCudaNative, &CopyEager);
  for (const char* name : {"tril", "triu"}) {
    registry.Add(absl::StrFormat("%s(Tensor input, int diagonal=0) -> Tensor", name), OpKind::kData,
                 kBoth | kInplaceVariant | kCudaNative, &TriangleEager);
  }
  // kCudaNative: CUDA inputs run device kernels in the definitions themselves.
  registry.Add("flip(Tensor input, int[] dims) -> Tensor", OpKind::kData, kBoth | kCudaNative, &FlipEager);
  registry.Add("roll(Tensor input, int[] shifts, int[]? dims=None) -> Tensor", OpKind::kData, kBoth | kCudaNative,
               &RollEager);
  registry.Add("repeat(Tensor input, int... repeats) -> Tensor", OpKind::kData, kMethod | kCudaNative, &RepeatEager);
  registry.Add("unbind(Tensor input, int dim=0) -> Tensor[]", OpKind::kView, kBoth, &UnbindEager);
  registry.Add("eye(int n, int? m=None, *, DType? dtype=None, Device? device=None) -> Tensor", OpKind::kCreation,
               kFunction | kCudaNative, &EyeEager);
}

}  // namespace dt
