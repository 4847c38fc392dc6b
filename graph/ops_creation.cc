// Creation ops: zeros/ones/empty/full, arange/linspace, rand/randn and their *_like forms.
// dtype defaults follow PyTorch: float32 unless the values say otherwise (full, arange).
#include <cmath>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "graph/cuda_eager.h"
#include "graph/op_registry.h"
#include "runtime/copy.h"
#include "runtime/cuda_driver.h"
#include "runtime/cuda_index_kernels.h"
#include "runtime/cuda_tensor.h"
#include "runtime/errors.h"
#include "runtime/random.h"

namespace dt {
namespace {

absl::StatusOr<Device> CheckDevice(std::optional<Device> device) {
  Device d = device.value_or(Device::Cpu());
  DT_RETURN_IF_ERROR(CheckDeviceUsable(d));
  return d;
}

absl::Status CheckSizes(const Dims& sizes, absl::string_view op) {
  for (int64_t s : sizes) {
    if (s < 0) {
      return Error(ErrorKind::kValue, absl::StrFormat("%s: trying to create tensor with negative "
                                                      "dimension %d: %s",
                                                      op, s, DimsToString(sizes)));
    }
  }
  return absl::OkStatus();
}

enum class FillKind { kZeros, kOnes, kEmpty, kRand, kRandn };

FillKind KindFromName(absl::string_view name) {
  if (absl::StartsWith(name, "zeros")) return FillKind::kZeros;
  if (absl::StartsWith(name, "ones")) return FillKind::kOnes;
  if (absl::StartsWith(name, "empty")) return FillKind::kEmpty;
  if (absl::StartsWith(name, "randn")) return FillKind::kRandn;
  return FillKind::kRand;
}

// Random values are generated on the host (one stream shared with the CPU, so a seed gives the
// same numbers on every device) and reach a CUDA device as one upload, counted as a host op.
absl::StatusOr<Tensor> MoveTo(const Tensor& host, Device device, absl::string_view op) {
  if (device.type != DeviceType::kCuda) return host;
  CountCudaHostOp(op);
  return UploadKeepingLayout(host, device);
}

absl::StatusOr<Tensor> Make(FillKind kind, const Dims& sizes, DType dtype, Device device,
                            absl::string_view op) {
  DT_RETURN_IF_ERROR(CheckSizes(sizes, op));
  const bool random = kind == FillKind::kRand || kind == FillKind::kRandn;
  if (random && !IsFloating(dtype)) {
    return Error(ErrorKind::kType, absl::StrFormat("%s: expected a floating dtype, got %s", op,
                                                   DTypeName(dtype)));
  }
  if (random && device.type == DeviceType::kCuda) {
    // The device's own generator (Philox counters); without its kernels, drawn here and copied.
    if (!IndexKernelsRun(device, dtype)) {
      DT_ASSIGN_OR_RETURN(Tensor host, Make(kind, sizes, dtype, Device::Cpu(), op));
      return MoveTo(host, device, op);
    }
    Tensor t = Tensor::Empty(sizes, dtype, device);
    DT_RETURN_IF_ERROR(RandomOnDevice(t, kind == FillKind::kRandn));
    return t;
  }
  Tensor t = Tensor::Empty(sizes, dtype, device);
  switch (kind) {
    case FillKind::kZeros: DT_RETURN_IF_ERROR(Fill(t, Scalar::Int(0))); break;
    case FillKind::kOnes: DT_RETURN_IF_ERROR(Fill(t, Scalar::Int(1))); break;
    case FillKind::kEmpty: break;
    case FillKind::kRand: FillUniform(t); break;
    case FillKind::kRandn: FillNormal(t); break;
  }
  return t;
}

absl::StatusOr<OpResult> FilledEager(const OpDef& op, const OpArgs& args) {
  DT_ASSIGN_OR_RETURN(Device device, CheckDevice(args.device(2)));
  DT_ASSIGN_OR_RETURN(Tensor t, Make(KindFromName(op.name()), args.ints(0),
                                     args.dtype(1).value_or(DefaultFloat()), device, op.name()));
  return OpResult{t};
}

absl::StatusOr<OpResult> FilledLikeEager(const OpDef& op, const OpArgs& args) {
  const Tensor& like = args.tensor(0);
  DT_ASSIGN_OR_RETURN(Device device, CheckDevice(args.device(2).value_or(like.device())));
  DT_ASSIGN_OR_RETURN(Tensor t, Make(KindFromName(op.name()), like.sizes(),
                                     args.dtype(1).value_or(like.dtype()), device, op.name()));
  return OpResult{t};
}

absl::StatusOr<OpResult> FullEager(const OpDef&, const OpArgs& args) {
  DT_ASSIGN_OR_RETURN(Device device, CheckDevice(args.device(3)));
  const Scalar value = args.scalar(1);
  DType natural = value.NaturalDType();
  if (natural == DType::kFloat64) natural = DefaultFloat();
  DT_ASSIGN_OR_RETURN(Tensor t, Make(FillKind::kEmpty, args.ints(0),
                                     args.dtype(2).value_or(natural), device, "full"));
  DT_RETURN_IF_ERROR(Fill(t, value));
  return OpResult{t};
}

absl::StatusOr<OpResult> FullLikeEager(const OpDef&, const OpArgs& args) {
  const Tensor& like = args.tensor(0);
  DT_ASSIGN_OR_RETURN(Device device, CheckDevice(args.device(3).value_or(like.device())));
  DT_ASSIGN_OR_RETURN(Tensor t, Make(FillKind::kEmpty, like.sizes(),
                                     args.dtype(2).value_or(like.dtype()), device, "full_like"));
  DT_RETURN_IF_ERROR(Fill(t, args.scalar(1)));
  return OpResult{t};
}

// Writes start + i * step into a contiguous 1-d tensor, computed in double (float dtypes) or
// int64 (integer dtypes) like PyTorch.
void FillRange(const Tensor& t, Scalar start, Scalar step) {
  if (t.is_meta()) return;
  DT_DISPATCH_ALL(t.dtype(), [&] {
    scalar_t* data = t.data_as<scalar_t>();
    for (int64_t i = 0; i < t.numel(); ++i) {
      if constexpr (std::is_integral_v<scalar_t>) {
        data[i] = static_cast<scalar_t>(start.ToInt() + i * step.ToInt());
      } else {
        data[i] = scalar_t(static_cast<ComputeType<scalar_t>>(start.ToDouble() + i * step.ToDouble()));
      }
    }
  });
}

absl::StatusOr<OpResult> ArangeEager(const OpDef& op, const OpArgs& args) {
  DT_ASSIGN_OR_RETURN(Device device, CheckDevice(args.device(4)));
  Scalar start = args.scalar(0);
  Scalar end;
  if (args.is_none(1)) {
    end = start;
    start = Scalar::Int(0);
  } else {
    end = args.scalar(1);
  }
  const Scalar step = args.scalar(2);
  const bool any_float = start.is_float() || end.is_float() || step.is_float();
  const DType dtype = args.dtype(3).value_or(any_float ? DefaultFloat() : DType::kInt64);
  if (step.ToDouble() == 0) return Error(ErrorKind::kValue, "arange: step must be nonzero");
  const double span = (end.ToDouble() - start.ToDouble()) / step.ToDouble();
  if (!std::isfinite(span)) {
    return Error(ErrorKind::kValue, "arange: unsupported range: bounds must be finite");
  }
  if (span < 0 && std::ceil(span) < 0) {
    return Error(ErrorKind::kValue,
                 absl::StrFormat("arange: upper bound (%s) and lower bound (%s) inconsistent with "
                                 "step sign (%s)",
                                 end.ToString(), start.ToString(), step.ToString()));
  }
  int64_t n = any_float ? static_cast<int64_t>(std::ceil(span))
                        : (end.ToInt() - start.ToInt() + step.ToInt() + (step.ToInt() > 0 ? -1 : 1)) /
                              step.ToInt();
  if (n < 0) n = 0;
  Tensor t = Tensor::Empty({n}, dtype, device);
  DT_RUN_THROUGH_HOST_IF_NEEDED(op, args, t);
  if (IndexKernelsRun(t)) {
    DT_RETURN_IF_ERROR(ArangeOnDevice(t, start, step));
  } else {
    FillRange(t, start, step);
  }
  return OpResult{t};
}

absl::StatusOr<OpResult> LinspaceEager(const OpDef& op, const OpArgs& args) {
  DT_ASSIGN_OR_RETURN(Device device, CheckDevice(args.device(4)));
  const int64_t steps = args.int_(2);
  if (steps < 0) return Error(ErrorKind::kValue, "linspace: number of steps must be non-negative");
  const DType dtype = args.dtype(3).value_or(DefaultFloat());
  const double start = args.float_(0), end = args.float_(1);
  Tensor t = Tensor::Empty({steps}, dtype, device);
  DT_RUN_THROUGH_HOST_IF_NEEDED(op, args, t);
  if (t.is_meta()) return OpResult{t};
  const double step = steps > 1 ? (end - start) / static_cast<double>(steps - 1) : 0.0;
  if (IndexKernelsRun(t)) {
    DT_RETURN_IF_ERROR(LinspaceOnDevice(t, start, end, step));
    return OpResult{t};
  }
  const int64_t half = steps / 2;
  DT_DISPATCH_ALL(dtype, [&] {
    scalar_t* data = t.data_as<scalar_t>();
    for (int64_t i = 0; i < steps; ++i) {
      // Fill from both ends, as PyTorch does, so the last element is exactly `end`.
      // A single step is `start`, as in PyTorch and numpy.
      const double v = steps == 1 ? start : i < half ? start + step * i : end - step * (steps - 1 - i);
      // Integers through int64: a value outside a narrower dtype wraps, here and on a CUDA
      // device alike (converting such a double directly is undefined, and CUDA saturates).
      if constexpr (std::is_same_v<scalar_t, bool>) data[i] = v != 0;
      else if constexpr (std::is_integral_v<scalar_t>) data[i] = static_cast<scalar_t>(static_cast<int64_t>(v));
      else data[i] = scalar_t(static_cast<ComputeType<scalar_t>>(v));
    }
  });
  return OpResult{t};
}

// A tensor the traced code built from constants (`dyntrace.tensor([1., 2.])`): each run gets its
// own copy, as each call of the original code would.
absl::StatusOr<OpResult> TensorConstantEager(const OpDef&, const OpArgs& args) {
  const Tensor& value = args.tensor(0);
  if (value.is_meta()) return OpResult{value};
  return OpResult{Clone(value)};
}

}  // namespace

// Every creation op is device-safe in its own eager definition (fills copy on the device,
// ranges run device kernels, random values are generated on the host and uploaded), so all are
// kCudaNative.
void RegisterCreationOps(OpRegistry& registry) {
  for (const char* name : {"zeros", "ones", "empty", "rand", "randn"}) {
    registry.Add(absl::StrCat(name, "(int... size, *, DType? dtype=None, Device? device=None) -> Tensor"),
                 OpKind::kCreation,
                 kFunction | kCudaNative | (absl::StartsWith(name, "rand") ? kRandom : kNoProperty), &FilledEager);
    registry.Add(absl::StrCat(name, "_like(Tensor input, *, DType? dtype=None, Device? device=None) "
                                    "-> Tensor"),
                 OpKind::kCreation,
                 kFunction | kCudaNative | (absl::StartsWith(name, "rand") ? kRandom : kNoProperty),
                 &FilledLikeEager);
  }
  registry.Add("full(int[] size, Scalar fill_value, *, DType? dtype=None, Device? device=None) -> Tensor",
               OpKind::kCreation, kFunction | kCudaNative, &FullEager);
  registry.Add("full_like(Tensor input, Scalar fill_value, *, DType? dtype=None, Device? device=None) "
               "-> Tensor",
               OpKind::kCreation, kFunction | kCudaNative, &FullLikeEager);
  registry.Add("arange(Scalar start, Scalar? end=None, Scalar step=1, *, DType? dtype=None, "
               "Device? device=None) -> Tensor",
               OpKind::kCreation, kFunction | kCudaNative, &ArangeEager);
  registry.Add("_tensor_constant(Tensor value) -> Tensor", OpKind::kCreation, kCudaNative,
               &TensorConstantEager);
  registry.Add("linspace(Scalar start, Scalar end, int steps, *, DType? dtype=None, "
               "Device? device=None) -> Tensor",
               OpKind::kCreation, kFunction | kCudaNative, &LinspaceEager);
}

}  // namespace dt
