// Optimizer updates as multi-tensor ops: _fused_sgd_ and _fused_adam_ update every parameter of
// a param group (and its state) in place, in one call and one loop per tensor, instead of the
// dozen ops per parameter that the update rules written with tensor ops would take.
//
// The rules are PyTorch's (torch.optim.SGD, Adam, AdamW), element by element:
//   SGD   g = ±grad (+ wd * p); buf = g on its first step, else momentum * buf + (1 - dampening) * g;
//         g = g + momentum * buf (nesterov) or buf; p -= lr * g
//   Adam  step += 1; g = ±grad; AdamW: p *= 1 - lr * wd, Adam: g += wd * p;
//         m += (1 - beta1) * (g - m); v = beta2 * v + (1 - beta2) * g * g; amsgrad: vmax = max(vmax, v)
//         p -= lr / (1 - beta1^step) * m / (sqrt(v or vmax) / sqrt(1 - beta2^step) + eps)
// Arithmetic is in the tensors' own type (double for float64, float for float32 and float16, whose
// values are read and rounded back per element, as PyTorch's CPU kernels compute half in float).
//
// They write their arguments, so each bumps the version of every storage it changes (autograd's
// check that saved tensors were not modified sees it). They have no derivative: dyntrace.optim
// calls them under no_grad, and autograd refuses them otherwise (kEagerUpdate, which also
// makes a trace break before them and run them eagerly). They run on contiguous CPU tensors only;
// dyntrace.optim takes its per-tensor path (registry ops, which stay on the device) for anything
// else.
#include <cmath>
#include <vector>

#include "absl/strings/str_format.h"
#include "graph/op_registry.h"
#include "runtime/errors.h"
#include "runtime/half.h"

namespace dt {
namespace {

// float16 and bfloat16 are computed in float; the others in their own type.
template <typename T> struct Compute { using type = T; };
template <> struct Compute<Half> { using type = float; };
template <> struct Compute<BFloat16> { using type = float; };

// Every tensor of every list must be a contiguous CPU tensor of its param's size and of one dtype
// (the loops are instantiated once per call, for params[0]'s).
absl::Status CheckLists(const OpDef& op, const std::vector<const std::vector<Tensor>*>& lists,
                        const std::vector<const char*>& names) {
  const std::vector<Tensor>& params = *lists[0];
  for (size_t l = 0; l < lists.size(); ++l) {
    if (lists[l]->size() != params.size()) {
      return Error(ErrorKind::kValue, absl::StrFormat("%s(): %s has %d tensors for %d params", op.name(), names[l],
                                                      lists[l]->size(), params.size()));
    }
    for (size_t i = 0; i < params.size(); ++i) {
      const Tensor& t = (*lists[l])[i];
      if (!t.device().is_cpu() || !t.is_contiguous() || t.dtype() != params[0].dtype() ||
          t.sizes() != params[i].sizes()) {
        return Error(ErrorKind::kValue,
                     absl::StrFormat("%s(): %s[%d] must be a contiguous CPU tensor shaped like params[%d] and typed "
                                     "like params[0] (%s %s), got %s %s on %s%s",
                                     op.name(), names[l], i, i, DTypeName(params[0].dtype()),
                                     params[i].ShapeString(), DTypeName(t.dtype()), t.ShapeString(),
                                     t.device().ToString(), t.is_contiguous() ? "" : ", not contiguous"));
      }
    }
  }
  if (!params.empty() && !IsFloating(params[0].dtype())) {
    return Error(ErrorKind::kType, absl::StrFormat("%s(): params must be floating point, got %s", op.name(),
                                                   DTypeName(params[0].dtype())));
  }
  return absl::OkStatus();
}

void BumpVersions(const std::vector<Tensor>& tensors) {
  for (const Tensor& t : tensors) t.storage()->BumpVersion();
}

// ---- SGD ----

struct SgdOptions {
  double lr, momentum, dampening, weight_decay;
  bool nesterov, maximize;
};

template <typename T>
void SgdTensor(const SgdOptions& o, const Tensor& param, const Tensor& grad, const Tensor* buffer, bool fresh) {
  using C = typename Compute<T>::type;
  T* p = param.data_as<T>();
  const T* g = grad.data_as<T>();
  T* buf = buffer != nullptr ? buffer->data_as<T>() : nullptr;
  const C lr = C(o.lr), mom = C(o.momentum), keep = C(1 - o.dampening), wd = C(o.weight_decay);
  const int64_t n = param.numel();
  for (int64_t i = 0; i < n; ++i) {
    C d = o.maximize ? -C(g[i]) : C(g[i]);
    if (o.weight_decay != 0) d += wd * C(p[i]);
    if (buf != nullptr) {
      const C b = fresh ? d : mom * C(buf[i]) + keep * d;
      buf[i] = T(b);
      d = o.nesterov ? d + mom * C(buf[i]) : C(buf[i]);
    }
    p[i] = T(C(p[i]) - lr * d);
  }
}

template <typename T>
void SgdAll(const SgdOptions& o, const OpArgs& args, const std::vector<bool>& fresh) {
  const auto& params = args.tensors(0);
  const auto& grads = args.tensors(1);
  const auto& buffers = args.tensors(2);
  for (size_t i = 0; i < params.size(); ++i) {
    SgdTensor<T>(o, params[i], grads[i], buffers.empty() ? nullptr : &buffers[i], fresh[i]);
  }
}

absl::StatusOr<OpResult> FusedSgdEager(const OpDef& op, const OpArgs& args) {
  const SgdOptions o{args.float_(4), args.float_(5), args.float_(6), args.float_(7), args.bool_(8), args.bool_(9)};
  const auto& params = args.tensors(0);
  std::vector<const std::vector<Tensor>*> lists = {&params, &args.tensors(1)};
  std::vector<const char*> names = {"params", "grads"};
  if (o.momentum != 0) {
    lists.push_back(&args.tensors(2));
    names.push_back("momentum_buffers");
  } else if (!args.tensors(2).empty()) {
    return Error(ErrorKind::kValue,
                 absl::StrFormat("%s(): momentum_buffers must be empty when momentum is 0", op.name()));
  }
  DT_RETURN_IF_ERROR(CheckLists(op, lists, names));
  std::vector<bool> fresh(params.size(), false);
  for (int64_t i : args.ints(3)) {
    if (i < 0 || i >= static_cast<int64_t>(params.size())) {
      return Error(ErrorKind::kIndex, absl::StrFormat("%s(): fresh_buffers index %d out of range", op.name(), i));
    }
    fresh[i] = true;
  }
  if (params.empty()) return OpResult{};
  switch (params[0].dtype()) {
    case DType::kFloat16: SgdAll<Half>(o, args, fresh); break;
    case DType::kBFloat16: SgdAll<BFloat16>(o, args, fresh); break;
    case DType::kFloat32: SgdAll<float>(o, args, fresh); break;
    case DType::kFloat64: SgdAll<double>(o, args, fresh); break;
    case DType::kBool:
    case DType::kInt32:
    case DType::kInt64:
    case DType::kUInt8:
    case DType::kInt8:
    case DType::kInt16: return absl::InternalError("unreachable: CheckLists refuses integer params");
  }
  BumpVersions(params);
  if (o.momentum != 0) BumpVersions(args.tensors(2));
  return OpResult{};
}

// ---- Adam and AdamW ----

struct AdamOptions {
  double lr, beta1, beta2, weight_decay, eps;
  bool amsgrad, maximize, decoupled;
};

// One parameter's update, after its step was counted; `step` is the count after this update.
template <typename T>
void AdamTensor(const AdamOptions& o, double step, const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
                const Tensor& exp_avg_sq, const Tensor* max_exp_avg_sq) {
  using C = typename Compute<T>::type;
  T* p = param.data_as<T>();
  const T* g = grad.data_as<T>();
  T* m = exp_avg.data_as<T>();
  T* v = exp_avg_sq.data_as<T>();
  T* vmax = max_exp_avg_sq != nullptr ? max_exp_avg_sq->data_as<T>() : nullptr;
  // Scalars are computed in double, as PyTorch computes them in Python floats.
  const C step_size = C(o.lr / (1 - std::pow(o.beta1, step)));
  const C bias2_sqrt = C(std::sqrt(1 - std::pow(o.beta2, step)));
  const C decay = C(1 - o.lr * o.weight_decay), wd = C(o.weight_decay), eps = C(o.eps);
  const C w1 = C(1 - o.beta1), b2 = C(o.beta2), w2 = C(1 - o.beta2);
  const int64_t n = param.numel();
  for (int64_t i = 0; i < n; ++i) {
    C d = o.maximize ? -C(g[i]) : C(g[i]);
    C x = C(p[i]);
    if (o.weight_decay != 0) {
      if (o.decoupled) {
        x *= decay;
      } else {
        d += wd * x;
      }
    }
    const C mi = C(m[i]) + w1 * (d - C(m[i]));
    C vi = b2 * C(v[i]) + w2 * d * d;
    m[i] = T(mi);
    v[i] = T(vi);
    if (vmax != nullptr) {
      vi = std::max(C(vmax[i]), C(v[i]));
      vmax[i] = T(vi);
    }
    const C denom = std::sqrt(C(vmax != nullptr ? vmax[i] : v[i])) / bias2_sqrt + eps;
    p[i] = T(x - step_size * (C(m[i]) / denom));
  }
}

// Counts each parameter's step (0-d float tensors, PyTorch's state["step"]) and updates it.
template <typename T>
absl::Status AdamAll(const OpDef& op, const AdamOptions& o, const OpArgs& args) {
  const auto& params = args.tensors(0);
  const auto& max_sqs = args.tensors(4);
  const auto& steps = args.tensors(5);
  for (size_t i = 0; i < params.size(); ++i) {
    const Tensor& s = steps[i];
    if (!s.device().is_cpu() || s.numel() != 1 || !IsFloating(s.dtype()) ||
        s.dtype() == DType::kFloat16 || s.dtype() == DType::kBFloat16) {
      return Error(ErrorKind::kValue, absl::StrFormat("%s(): state_steps[%d] must be a one-element float32 or "
                                                      "float64 CPU tensor, got %s %s",
                                                      op.name(), i, DTypeName(s.dtype()), s.ShapeString()));
    }
    double step = 0;
    if (s.dtype() == DType::kFloat32) {
      step = *s.data_as<float>() += 1;
    } else {
      step = *s.data_as<double>() += 1;
    }
    s.storage()->BumpVersion();
    AdamTensor<T>(o, step, params[i], args.tensors(1)[i], args.tensors(2)[i], args.tensors(3)[i],
                  o.amsgrad ? &max_sqs[i] : nullptr);
  }
  return absl::OkStatus();
}

absl::StatusOr<OpResult> FusedAdamEager(const OpDef& op, const OpArgs& args) {
  const AdamOptions o{args.float_(6),  args.float_(7), args.float_(8), args.float_(9),
                      args.float_(10), args.bool_(11), args.bool_(12), args.bool_(13)};
  const auto& params = args.tensors(0);
  std::vector<const std::vector<Tensor>*> lists = {&params, &args.tensors(1), &args.tensors(2), &args.tensors(3)};
  std::vector<const char*> names = {"params", "grads", "exp_avgs", "exp_avg_sqs"};
  if (o.amsgrad) {
    lists.push_back(&args.tensors(4));
    names.push_back("max_exp_avg_sqs");
  } else if (!args.tensors(4).empty()) {
    return Error(ErrorKind::kValue, absl::StrFormat("%s(): max_exp_avg_sqs must be empty without amsgrad", op.name()));
  }
  DT_RETURN_IF_ERROR(CheckLists(op, lists, names));
  if (args.tensors(5).size() != params.size()) {
    return Error(ErrorKind::kValue, absl::StrFormat("%s(): state_steps has %d tensors for %d params", op.name(),
                                                    args.tensors(5).size(), params.size()));
  }
  if (params.empty()) return OpResult{};
  switch (params[0].dtype()) {
    case DType::kFloat16: DT_RETURN_IF_ERROR(AdamAll<Half>(op, o, args)); break;
    case DType::kBFloat16: DT_RETURN_IF_ERROR(AdamAll<BFloat16>(op, o, args)); break;
    case DType::kFloat32: DT_RETURN_IF_ERROR(AdamAll<float>(op, o, args)); break;
    case DType::kFloat64: DT_RETURN_IF_ERROR(AdamAll<double>(op, o, args)); break;
    case DType::kBool:
    case DType::kInt32:
    case DType::kInt64:
    case DType::kUInt8:
    case DType::kInt8:
    case DType::kInt16: return absl::InternalError("unreachable: CheckLists refuses integer params");
  }
  for (size_t l = 0; l < (o.amsgrad ? 5u : 4u); ++l) {
    if (l != 1) BumpVersions(args.tensors(l));
  }
  return OpResult{};
}

}  // namespace

void RegisterOptimOps(OpRegistry& registry) {
  // kCudaNative: CUDA tensors reach the eager definition, which refuses them (no host mirrors);
  // dyntrace.optim sends them down its per-tensor path instead.
  registry
      .Add("_fused_sgd_(Tensor[] params, Tensor[] grads, Tensor[] momentum_buffers, int[] fresh_buffers, "
           "float lr, float momentum, float dampening, float weight_decay, bool nesterov, bool maximize) -> Tensor[]",
           OpKind::kData, kFunction | kCudaNative | kEagerUpdate, &FusedSgdEager);
  registry.Mutable("_fused_sgd_").doc = "SGD's update of a param group, in place (dyntrace.optim.SGD)";
  registry
      .Add("_fused_adam_(Tensor[] params, Tensor[] grads, Tensor[] exp_avgs, Tensor[] exp_avg_sqs, "
           "Tensor[] max_exp_avg_sqs, Tensor[] state_steps, float lr, float beta1, float beta2, "
           "float weight_decay, float eps, bool amsgrad, bool maximize, bool decoupled_weight_decay) -> Tensor[]",
           OpKind::kData, kFunction | kCudaNative | kEagerUpdate, &FusedAdamEager);
  registry.Mutable("_fused_adam_").doc = "Adam's or AdamW's update of a param group, in place (dyntrace.optim)";
}

}  // namespace dt
