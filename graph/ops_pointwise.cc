// The pointwise ops: one line each in the tables below. Each line names the op, its element
// function in runtime/scalar_math.h, its dtype rule and its properties; the eager loops, the
// Python bindings and the code generators all derive from that line.
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "graph/cuda_eager.h"
#include "graph/op_registry.h"
#include "graph/pointwise.h"
#include "runtime/copy.h"
#include "runtime/cuda_index_kernels.h"
#include "runtime/cuda_tensor.h"
#include "runtime/errors.h"
#include "runtime/pointwise_loops.h"
#include "runtime/scalar_math.h"

namespace dt {
namespace {

constexpr uint32_t kBound = kMethod | kFunction | kInplaceVariant;

// X(name, scalar function, dtype rule, properties)
#define DT_UNARY_POINTWISE_OPS(X)                                  \
  X(neg, neg, kPromote, kBound | kRejectsBool)                     \
  X(abs, abs_, kPromote, kBound | kRejectsBool)                    \
  X(exp, exp_, kIntToFloat, kBound | kCostlyElement)                                \
  X(exp2, exp2_, kIntToFloat, kBound | kCostlyElement)                              \
  X(log, log_, kIntToFloat, kBound | kCostlyElement)                                \
  X(log2, log2_, kIntToFloat, kBound | kCostlyElement)                              \
  X(log1p, log1p_, kIntToFloat, kBound | kCostlyElement)                            \
  X(expm1, expm1_, kIntToFloat, kBound | kCostlyElement)                            \
  X(sqrt, sqrt_, kIntToFloat, kBound)                              \
  X(rsqrt, rsqrt, kIntToFloat, kBound)                             \
  X(sin, sin_, kIntToFloat, kBound | kCostlyElement)                                \
  X(cos, cos_, kIntToFloat, kBound | kCostlyElement)                                \
  X(tan, tan_, kIntToFloat, kBound | kCostlyElement)                                \
  X(tanh, tanh_, kIntToFloat, kBound | kNNFunctional | kCostlyElement) \
  X(sigmoid, sigmoid, kIntToFloat, kBound | kNNFunctional | kCostlyElement) \
  X(relu, relu, kPromote, kBound | kRejectsBool | kNNFunctional) \
  X(_gelu_erf, gelu, kIntToFloat, kNoProperty | kCostlyElement)                     \
  X(_gelu_tanh, gelu_tanh, kIntToFloat, kNoProperty | kCostlyElement)               \
  X(silu, silu, kIntToFloat, kBound | kNNFunctional | kCostlyElement) \
  X(erf, erf_, kIntToFloat, kBound | kCostlyElement)                                \
  X(floor, floor_, kPromote, kBound | kRejectsBool)                \
  X(ceil, ceil_, kPromote, kBound | kRejectsBool)                  \
  X(round, round_, kPromote, kBound | kRejectsBool)                \
  X(trunc, trunc_, kPromote, kBound | kRejectsBool)                \
  X(sign, sign, kPromote, kBound)                                  \
  X(reciprocal, reciprocal, kIntToFloat, kBound)                   \
  X(square, square, kPromote, kBound | kRejectsBool)               \
  X(logical_not, logical_not, kToBool, kBound)                     \
  X(isnan, isnan_, kToBool, kBound)                                \
  X(isinf, isinf_, kToBool, kBound)                                \
  X(isfinite, isfinite_, kToBool, kBound)

#define DT_BINARY_POINTWISE_OPS(X)                                                   \
  X(add, add, kPromote, kBound | kCommutative)                                       \
  X(sub, sub, kPromote, kBound | kRejectsBool)                                       \
  X(mul, mul, kPromote, kBound | kCommutative)                                       \
  X(div, div, kIntToFloat, kBound)                                                   \
  X(floor_divide, floor_divide, kPromote, kBound | kRejectsBool | kIntegerDivision | kCudaNative)  \
  X(remainder, remainder, kPromote, kBound | kRejectsBool | kIntegerDivision | kCudaNative)        \
  X(pow, pow_, kPromote, kBound | kRejectsBool | kIntegerPower | kCostlyElement | kCudaNative)      \
  X(maximum, maximum, kPromote, kMethod | kFunction | kCommutative)                  \
  X(minimum, minimum, kPromote, kMethod | kFunction | kCommutative)                  \
  X(atan2, atan2_, kIntToFloat, kBound | kCostlyElement)                                              \
  X(eq, eq, kToBool, kBound | kCommutative)                                          \
  X(ne, ne, kToBool, kBound | kCommutative)                                          \
  X(lt, lt, kToBool, kBound)                                                         \
  X(le, le, kToBool, kBound)                                                         \
  X(gt, gt, kToBool, kBound)                                                         \
  X(ge, ge, kToBool, kBound)                                                         \
  X(logical_and, logical_and, kToBool, kBound | kCommutative)                        \
  X(logical_or, logical_or, kToBool, kBound | kCommutative)                          \
  X(logical_xor, logical_xor, kToBool, kBound | kCommutative)                        \
  X(_gelu_erf_backward, gelu_backward, kIntToFloat, kNoProperty | kCostlyElement)                     \
  X(_silu_backward, silu_backward, kIntToFloat, kNoProperty | kCostlyElement)                         \
  X(_sigmoid_backward, sigmoid_backward, kIntToFloat, kNoProperty)                   \
  X(_tanh_backward, tanh_backward, kIntToFloat, kNoProperty)

#define DT_DEFINE_ELEMENT_FN(name, fn, rule, props)                   \
  struct ElementFn_##name {                                           \
    template <typename... C>                                          \
    static auto Apply(C... x) { return scalar::fn(x...); }            \
  };
DT_UNARY_POINTWISE_OPS(DT_DEFINE_ELEMENT_FN)
DT_BINARY_POINTWISE_OPS(DT_DEFINE_ELEMENT_FN)
DT_DEFINE_ELEMENT_FN(where, where, kPromote, 0)
#undef DT_DEFINE_ELEMENT_FN

template <typename Fn, int Arity, DTypeRule Rule, bool AllowBool>
std::array<InnerLoop, kNumDTypes> MakeLoops() {
  std::array<InnerLoop, kNumDTypes> loops{};
  auto put = [&]<typename S>() {
    using O = std::conditional_t<Rule == DTypeRule::kToBool, bool, S>;
    InnerLoop loop;
    if constexpr (Arity == 1) loop = &UnaryPointwiseLoop<S, O, Fn>;
    else if constexpr (Arity == 2) loop = &BinaryPointwiseLoop<S, O, Fn>;
    else loop = &WherePointwiseLoop<S, O, Fn>;
    loops[static_cast<int>(DTypeOf<S>::value)] = loop;
  };
  if constexpr (Rule != DTypeRule::kIntToFloat) {
    if constexpr (AllowBool) put.template operator()<bool>();
    put.template operator()<uint8_t>();
    put.template operator()<int8_t>();
    put.template operator()<int16_t>();
    put.template operator()<int32_t>();
    put.template operator()<int64_t>();
  }
  put.template operator()<Half>();
  put.template operator()<BFloat16>();
  put.template operator()<float>();
  put.template operator()<double>();
  return loops;
}

// Whether `op(args)` runs the checked integer kernel (runtime/cuda_index_kernels.h): integer
// division or power in an integer compute dtype, on a device where those kernels run (CUDA, or
// the CPU under tests/index_kernels_test.cc's runner). The kernel checks the divisors itself.
bool ChecksOnDevice(const OpDef& op, const OpArgs& args) {
  if (!op.has(kIntegerDivision) && !op.has(kIntegerPower)) return false;
  absl::StatusOr<PointwiseSignature> sig = InferPointwise(op, args);
  return sig.ok() && !IsFloating(sig->compute_dtype) && IndexKernelsRun(sig->device, sig->compute_dtype);
}

// The ops flagged kCudaNative here are the integer ones that check their operands: on CUDA only
// their checked kernel runs in RunPointwise; other dtypes go to the device-op runner, as every
// pointwise op's do.
absl::StatusOr<OpResult> PointwiseEager(const OpDef& op, const OpArgs& args) {
  std::optional<OpArgs> moved;
  if (op.has(kCudaNative)) {
    DT_ASSIGN_OR_RETURN(std::optional<Device> cuda, CudaDeviceToRunOn(op, args, moved));
    const OpArgs& on_device = moved.has_value() ? *moved : args;
    if (cuda.has_value() && !ChecksOnDevice(op, on_device)) return CallOpOnCuda(op, on_device, *cuda);
  }
  DT_ASSIGN_OR_RETURN(Tensor result, RunPointwise(op, moved.has_value() ? *moved : args, nullptr));
  return OpResult{std::move(result)};
}

// Calls `pred` on every element of `t` (as int64) and reports whether any satisfied it.
template <typename Pred>
bool AnyElement(const Tensor& t, Pred pred) {
  if (t.is_meta()) return false;
  Tensor flat = Contiguous(CastTo(t, DType::kInt64));
  const int64_t* data = flat.data_as<int64_t>();
  for (int64_t i = 0; i < flat.numel(); ++i) {
    if (pred(data[i])) return true;
  }
  return false;
}

// Whether integer `op` raises for one of `divisors` (its second operand: a zero divisor, a
// negative exponent).
bool AnyBadOperand(const OpDef& op, const Tensor& divisors) {
  if (op.has(kIntegerDivision)) return AnyElement(divisors, [](int64_t v) { return v == 0; });
  if (op.has(kIntegerPower)) return AnyElement(divisors, [](int64_t v) { return v < 0; });
  return false;
}

// What integer operands of a checked op raise: ZeroDivisionError for a zero divisor, ValueError
// for a negative exponent.
absl::Status BadIntegerOperand(const OpDef& op) {
  if (op.has(kIntegerPower)) return Error(ErrorKind::kValue, "pow: integers to negative integer powers are not allowed");
  return Error(ErrorKind::kZeroDivision, absl::StrFormat("%s: integer division by zero", op.name()));
}

absl::StatusOr<DeviceIntegerOp> IntegerOpOf(const OpDef& op) {
  if (op.pointwise.scalar_fn == "floor_divide") return DeviceIntegerOp::kFloorDivide;
  if (op.pointwise.scalar_fn == "remainder") return DeviceIntegerOp::kRemainder;
  if (op.pointwise.scalar_fn == "pow_") return DeviceIntegerOp::kPower;
  return absl::InternalError(absl::StrCat(op.name(), " has no checked integer kernel"));
}

// The checked integer kernel into `result`, raising as the CPU path does for a bad operand.
absl::Status RunChecked(const OpDef& op, const PointwiseSignature& sig, absl::Span<const Tensor> operands,
                        const Tensor& result) {
  DT_ASSIGN_OR_RETURN(DeviceIntegerOp kind, IntegerOpOf(op));
  DT_ASSIGN_OR_RETURN(Dims x_strides, BroadcastStrides(operands[0], sig.shape));
  DT_ASSIGN_OR_RETURN(Dims y_strides, BroadcastStrides(operands[1], sig.shape));
  DT_ASSIGN_OR_RETURN(bool valid, IntegerOpOnDevice(kind, result, DomainOperand{operands[0], x_strides},
                                                    DomainOperand{operands[1], y_strides}));
  return valid ? absl::OkStatus() : BadIntegerOperand(op);
}

// The op's CPU loop over the broadcast operands into `result`.
absl::Status RunLoops(const OpDef& op, const PointwiseSignature& sig, absl::Span<const Tensor> operands,
                      const Tensor& result) {
  const int arity = op.pointwise.arity;
  char* bases[kMaxLoopOperands];
  Dims strides[kMaxLoopOperands];
  bases[0] = static_cast<char*>(result.data());
  strides[0] = result.strides();
  for (int64_t& s : strides[0]) s *= result.itemsize();
  for (int i = 0; i < arity; ++i) {
    // Inputs that alias the output are fine: each element is read before it is written.
    bases[i + 1] = static_cast<char*>(operands[i].data());
    DT_ASSIGN_OR_RETURN(strides[i + 1], BroadcastByteStrides(operands[i], sig.shape));
  }
  StridedLoop loop(sig.shape, absl::MakeSpan(bases, arity + 1), absl::MakeSpan(strides, arity + 1));
  loop.Run(op.pointwise.loops[static_cast<int>(sig.compute_dtype)], /*parallel=*/true);
  return absl::OkStatus();
}

int OperandStart(const OpDef& op) { return op.pointwise.arity == 3 ? 1 : 0; }

}  // namespace

absl::StatusOr<PointwiseSignature> InferPointwise(const OpDef& op, const OpArgs& args) {
  const int arity = op.pointwise.arity;
  ResultTypeState types;
  std::optional<Dims> shape;
  std::optional<Device> device;
  bool device_from_dimensioned = false;
  for (int i = 0; i < arity; ++i) {
    if (args.is_tensor(i)) {
      const Tensor& t = args.tensor(i);
      if (shape.has_value()) {
        auto broadcast = BroadcastShapes(*shape, t.sizes());
        if (!broadcast.ok()) {
          return Error(ErrorKind::kShape, absl::StrCat(op.name(), ": ", broadcast.status().message()));
        }
        shape = *broadcast;
      } else {
        shape = t.sizes();
      }
      // 0-d tensors may join operands on another device, as in PyTorch; dimensioned ones decide.
      if (!device.has_value() || (t.ndim() > 0 && !device_from_dimensioned)) {
        device = t.device();
        device_from_dimensioned = t.ndim() > 0;
      } else if (t.ndim() > 0 && t.device() != *device) {
        return Error(ErrorKind::kValue,
                     absl::StrFormat("%s: expected all tensors on one device, got %s and %s",
                                     op.name(), device->ToString(), t.device().ToString()));
      }
      if (i >= OperandStart(op)) types.AddTensor(t.dtype(), t.ndim() == 0);
    } else if (i >= OperandStart(op)) {
      types.AddWrappedNumber(args.scalar(i).NaturalDType());
    }
  }
  if (!shape.has_value()) {
    return Error(ErrorKind::kType, absl::StrCat(op.name(), ": expected at least one tensor operand"));
  }
  if (arity == 3) {
    if (!args.is_tensor(0) || args.tensor(0).dtype() != DType::kBool) {
      return Error(ErrorKind::kType,
                   absl::StrCat("where: the condition must be a bool tensor, got ",
                                args.is_tensor(0) ? DTypeName(args.tensor(0).dtype())
                                                  : absl::string_view("a Python number")));
    }
  }
  DType promoted = types.Result();
  DType compute = promoted;
  if (op.pointwise.dtype_rule == DTypeRule::kIntToFloat && !IsFloating(promoted)) {
    compute = DefaultFloat();
  }
  if (op.pointwise.loops[static_cast<int>(compute)] == nullptr) {
    return Error(ErrorKind::kType, absl::StrFormat("%s is not supported for %s tensors", op.name(),
                                                   DTypeName(compute)));
  }
  const DType result = op.pointwise.dtype_rule == DTypeRule::kToBool ? DType::kBool : compute;
  return PointwiseSignature{compute, result, *shape, *device};
}

absl::StatusOr<Tensor> RunPointwise(const OpDef& op, const OpArgs& args, const Tensor* out) {
  const bool checks_on_device = ChecksOnDevice(op, args);
  if (out != nullptr && out->device().type == DeviceType::kCuda && !checks_on_device) {
    return RunPointwiseIntoOnCuda(op, args, *out);
  }
  DT_ASSIGN_OR_RETURN(PointwiseSignature sig, InferPointwise(op, args));
  const int arity = op.pointwise.arity;
  // Operands in the compute dtype; Python numbers become 0-d tensors, on the device for the
  // checked kernel (with a 0-d CPU tensor, which PyTorch lets join a CUDA operand).
  absl::InlinedVector<Tensor, 3> operands;
  for (int i = 0; i < arity; ++i) {
    const DType want = i < OperandStart(op) ? DType::kBool : sig.compute_dtype;
    if (!args.is_tensor(i)) {
      operands.push_back(ScalarTensor(args.scalar(i), want, checks_on_device ? sig.device : Device::Cpu()));
      continue;
    }
    Tensor t = CastTo(args.tensor(i), want);
    if (checks_on_device && t.device() != sig.device) {
      DT_ASSIGN_OR_RETURN(t, UploadKeepingLayout(t, sig.device));
    }
    operands.push_back(std::move(t));
  }
  // Divisors (exponents) on the host are checked here, and so is a Python number given to the
  // checked kernel, which checks those on the device as it goes.
  if ((op.has(kIntegerDivision) || op.has(kIntegerPower)) && !IsFloating(sig.compute_dtype)) {
    if (!checks_on_device && AnyBadOperand(op, operands[1])) return BadIntegerOperand(op);
    if (checks_on_device && !args.is_tensor(1) &&
        AnyBadOperand(op, ScalarTensor(args.scalar(1), sig.compute_dtype, Device::Cpu()))) {
      return BadIntegerOperand(op);
    }
  }
  Tensor result;
  if (out != nullptr) {
    if (Dims(out->sizes()) != sig.shape) {
      return Error(ErrorKind::kShape,
                   absl::StrFormat("%s_: output with shape %s doesn't match the broadcast shape %s",
                                   op.name(), out->ShapeString(), DimsToString(sig.shape)));
    }
    if (!CanCast(sig.result_dtype, out->dtype())) {
      return Error(ErrorKind::kType,
                   absl::StrFormat("%s_: result type %s can't be cast to the desired output type %s",
                                   op.name(), DTypeScalarName(sig.result_dtype),
                                   DTypeScalarName(out->dtype())));
    }
    if (HasInternalOverlap(*out)) {
      return Error(ErrorKind::kValue,
                   absl::StrFormat("%s_: the written-to tensor (shape %s) has elements that share "
                                   "memory (an expanded view); clone() it first",
                                   op.name(), out->ShapeString()));
    }
    // The checked kernel writes a fresh tensor: a refused division leaves `out` as it was.
    result = out->dtype() == sig.result_dtype && !checks_on_device ? *out : Tensor();
  }
  if (!result.defined()) {
    // Keep the memory order of a full-shape operand (so transposed inputs give transposed
    // results), else lay the result out contiguously.
    const Tensor* like = nullptr;
    for (const Tensor& t : operands) {
      if (Dims(t.sizes()) == sig.shape && t.ndim() > 0) {
        like = &t;
        break;
      }
    }
    Device device = sig.device;
    result = like != nullptr && like->device() == device
                 ? Tensor::EmptyLike(*like, sig.result_dtype)
                 : Tensor::Empty(sig.shape, sig.result_dtype, device);
  }
  if (!result.is_meta()) {
    DT_RETURN_IF_ERROR(checks_on_device ? RunChecked(op, sig, operands, result) : RunLoops(op, sig, operands, result));
  }
  if (out != nullptr && !result.SharesStorageWith(*out)) {
    DT_RETURN_IF_ERROR(CopyInto(*out, result));
    return *out;
  }
  return result;
}

void RegisterPointwiseOps(OpRegistry& registry) {
#define DT_REGISTER_UNARY(name, fn, rule, props)                                          \
  {                                                                                       \
    OpDef& op = registry.Add(#name "(Tensor input) -> Tensor", OpKind::kPointwise, props, \
                             &PointwiseEager);                                            \
    op.pointwise.arity = 1;                                                               \
    op.pointwise.dtype_rule = DTypeRule::rule;                                            \
    op.pointwise.scalar_fn = #fn;                                                         \
    op.pointwise.loops = MakeLoops<ElementFn_##name, 1, DTypeRule::rule,                  \
                                   ((props) & kRejectsBool) == 0>();                      \
  }
#define DT_REGISTER_BINARY(name, fn, rule, props)                                      \
  {                                                                                    \
    OpDef& op = registry.Add(#name "(Tensor input, Operand other) -> Tensor",          \
                             OpKind::kPointwise, props, &PointwiseEager);              \
    op.pointwise.arity = 2;                                                            \
    op.pointwise.dtype_rule = DTypeRule::rule;                                         \
    op.pointwise.scalar_fn = #fn;                                                      \
    op.pointwise.loops = MakeLoops<ElementFn_##name, 2, DTypeRule::rule,               \
                                   ((props) & kRejectsBool) == 0>();                   \
  }
  DT_UNARY_POINTWISE_OPS(DT_REGISTER_UNARY)
  DT_BINARY_POINTWISE_OPS(DT_REGISTER_BINARY)
#undef DT_REGISTER_UNARY
#undef DT_REGISTER_BINARY
  OpDef& where = registry.Add("where(Tensor condition, Operand input, Operand other) -> Tensor",
                              OpKind::kPointwise, kFunction, &PointwiseEager);
  where.pointwise.arity = 3;
  where.pointwise.dtype_rule = DTypeRule::kPromote;
  where.pointwise.scalar_fn = "where";
  where.pointwise.loops = MakeLoops<ElementFn_where, 3, DTypeRule::kPromote, true>();
}

}  // namespace dt
