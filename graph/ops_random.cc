// Random ops of torch: randint, randperm, multinomial, bernoulli, normal, Tensor.uniform_. All
// draw from the runtime's one generator (runtime/random.h) through rand/randn/rand_like, so the
// same seed gives the same numbers eagerly and in compiled graphs, and a trace (on meta
// tensors) draws nothing.
#include <cmath>

#include "absl/strings/str_format.h"
#include "graph/nn_common.h"
#include "graph/op_registry.h"
#include "runtime/errors.h"

namespace dt {
namespace {

// floor(low + u * (high - low)) with u uniform in [0, 1) drawn in float64: exact for ranges
// below 2**53.
absl::StatusOr<OpResult> RandintEager(const OpDef& op, const OpArgs& args) {
  const bool has_low = op.name() == "randint.low";
  const size_t base = has_low ? 1 : 0;
  const int64_t low = has_low ? args.int_(0) : 0, high = args.int_(base);
  if (low >= high) {
    return Error(ErrorKind::kRuntime, absl::StrFormat("random_ expects 'from' to be less than 'to', but got "
                                                      "from=%d >= to=%d", low, high));
  }
  const DType dtype = args.dtype(base + 2).value_or(DType::kInt64);
  const Device device = args.device(base + 3).value_or(Device::Cpu());
  DT_ASSIGN_OR_RETURN(Tensor u, Call("rand", {args.ints(base + 1), DType::kFloat64, device}));
  DT_ASSIGN_OR_RETURN(Tensor spread, Call("mul", {u, Scalar::Int(high - low)}));
  DT_ASSIGN_OR_RETURN(Tensor shifted, Call("add", {spread, Scalar::Int(low)}));
  DT_ASSIGN_OR_RETURN(Tensor f, Call("floor", {shifted}));
  DT_ASSIGN_OR_RETURN(Tensor y, Call("_to", {f, dtype}));
  return OneResult(y);
}

// The order of n uniform draws: a uniformly random permutation.
absl::StatusOr<OpResult> RandpermEager(const OpDef&, const OpArgs& args) {
  const int64_t n = args.int_(0);
  if (n < 0) return Error(ErrorKind::kRuntime, absl::StrFormat("randperm(): n must be non-negative, got %d", n));
  const Device device = args.device(2).value_or(Device::Cpu());
  DT_ASSIGN_OR_RETURN(Tensor u, Call("rand", {Dims{n}, DType::kFloat64, device}));
  DT_ASSIGN_OR_RETURN(Tensor order, Call("argsort", {u}));
  DT_ASSIGN_OR_RETURN(Tensor y, Call("_to", {order, args.dtype(1).value_or(DType::kInt64)}));
  return OneResult(y);
}

// PyTorch's checks of a multinomial distribution, on CPU values (a trace's meta tensors and
// device tensors are not read).
absl::Status CheckDistribution(const Tensor& probs, int64_t samples, bool replacement) {
  if (probs.ndim() < 1 || probs.ndim() > 2) {
    return Error(ErrorKind::kRuntime, absl::StrFormat("multinomial(): prob_dist must be 1 or 2 dim, got %s",
                                                      probs.ShapeString()));
  }
  DT_RETURN_IF_ERROR(RequireFloatingInput(probs, "multinomial"));
  const int64_t n = probs.size(probs.ndim() - 1);
  if (samples <= 0) return Error(ErrorKind::kRuntime, "multinomial(): cannot sample n_sample <= 0 samples");
  if (!replacement && samples > n) {
    return Error(ErrorKind::kRuntime, absl::StrFormat("multinomial(): cannot sample n_sample > prob_dist.size(-1) "
                                                      "samples without replacement (%d > %d)", samples, n));
  }
  if (probs.is_meta() || probs.device().type != DeviceType::kCpu) return absl::OkStatus();
  DT_ASSIGN_OR_RETURN(Tensor rows, Call("_to", {probs, DType::kFloat64}));
  DT_ASSIGN_OR_RETURN(rows, Call("contiguous", {rows}));
  const double* p = rows.data_as<double>();
  for (int64_t r = 0; r < rows.numel() / std::max<int64_t>(n, 1); ++r) {
    double total = 0;
    int64_t positive = 0;
    for (int64_t j = 0; j < n; ++j) {
      const double v = p[r * n + j];
      if (!(v >= 0) || std::isinf(v)) {
        return Error(ErrorKind::kRuntime, "multinomial(): probability tensor contains either inf, nan or element < 0");
      }
      total += v;
      positive += v > 0;
    }
    if (total <= 0) return Error(ErrorKind::kRuntime, "multinomial(): invalid multinomial distribution (sum of probabilities <= 0)");
    if (!replacement && positive < samples) {
      return Error(ErrorKind::kRuntime, "multinomial(): invalid multinomial distribution (with replacement=False, not "
                                        "enough non-negative category to sample)");
    }
  }
  return absl::OkStatus();
}

// With replacement: the category whose cumulative-weight interval holds u * total.
absl::StatusOr<Tensor> SampleWithReplacement(const Tensor& probs, int64_t samples) {
  const int64_t dim = probs.ndim() - 1;
  DT_ASSIGN_OR_RETURN(Tensor cdf, Call("cumsum", {probs, Scalar::Int(dim), DType::kFloat64}));
  DT_ASSIGN_OR_RETURN(Tensor total, Call("narrow", {cdf, Scalar::Int(dim), Scalar::Int(probs.size(dim) - 1), Scalar::Int(1)}));
  Dims shape(probs.sizes().begin(), probs.sizes().end());
  shape.back() = samples;
  DT_ASSIGN_OR_RETURN(Tensor u, Call("rand", {shape, DType::kFloat64, probs.device()}));
  DT_ASSIGN_OR_RETURN(u, Call("mul", {u, total}));
  DT_ASSIGN_OR_RETURN(Tensor points, Call("unsqueeze", {u, Scalar::Int(-1)}));
  DT_ASSIGN_OR_RETURN(Tensor edges, Call("unsqueeze", {cdf, Scalar::Int(-2)}));
  DT_ASSIGN_OR_RETURN(Tensor below, Call("le", {edges, points}));
  DT_ASSIGN_OR_RETURN(Tensor index, Call("sum", {below, Dims{-1}}));
  return Call("clamp_max", {index, Scalar::Int(probs.size(dim) - 1)});
}

// Without replacement: the k largest of log(u) / w (exponential races; weight 0 never wins).
absl::StatusOr<OpResult> MultinomialEager(const OpDef&, const OpArgs& args) {
  const Tensor& probs = args.tensor(0);
  const int64_t samples = args.int_(1);
  const bool replacement = args.bool_(2);
  DT_RETURN_IF_ERROR(CheckDistribution(probs, samples, replacement));
  if (replacement) {
    DT_ASSIGN_OR_RETURN(Tensor y, SampleWithReplacement(probs, samples));
    return OneResult(y);
  }
  DT_ASSIGN_OR_RETURN(Tensor u, Call("rand_like", {probs, DType::kFloat64}));
  DT_ASSIGN_OR_RETURN(Tensor log_u, Call("log", {u}));
  DT_ASSIGN_OR_RETURN(Tensor keys, Call("div", {log_u, probs}));
  const OpDef* topk = OpRegistry::Get().Find("topk");
  DT_ASSIGN_OR_RETURN(OpResult both, CallOp(*topk, OpArgs({keys, Scalar::Int(samples), Scalar::Int(-1),
                                                           Scalar::Bool(true), Scalar::Bool(true)})));
  return OneResult(both.at(1));
}

absl::StatusOr<OpResult> BernoulliEager(const OpDef& op, const OpArgs& args) {
  const Tensor& x = args.tensor(0);
  DT_RETURN_IF_ERROR(RequireFloatingInput(x, "bernoulli"));
  ArgValue p = x;
  if (op.name() == "bernoulli.p") {
    const double v = args.float_(1);
    if (!(v >= 0 && v <= 1)) {
      return Error(ErrorKind::kRuntime, absl::StrFormat("bernoulli_ expects p to be in [0, 1], but got p=%g", v));
    }
    p = args.scalar(1);
  }
  DT_ASSIGN_OR_RETURN(Tensor u, Call("rand_like", {x}));
  DT_ASSIGN_OR_RETURN(Tensor hit, Call("lt", {u, p}));
  DT_ASSIGN_OR_RETURN(Tensor y, Call("_to", {hit, x.dtype()}));
  return OneResult(y);
}

// mean + std * z, z standard normal of the broadcast shape.
absl::StatusOr<OpResult> NormalEager(const OpDef& op, const OpArgs& args) {
  if (op.name() == "normal.float") {
    const Device device = args.device(4).value_or(Device::Cpu());
    DT_ASSIGN_OR_RETURN(Tensor z, Call("randn", {args.ints(2), args.dtype(3).value_or(DefaultFloat()), device}));
    DT_ASSIGN_OR_RETURN(Tensor scaled, Call("mul", {z, args.scalar(1)}));
    DT_ASSIGN_OR_RETURN(Tensor y, Call("add", {scaled, args.scalar(0)}));
    return OneResult(y);
  }
  const Tensor& mean = args.tensor(0);
  DT_RETURN_IF_ERROR(RequireFloatingInput(mean, "normal"));
  Tensor shaped = mean;
  if (args.is_tensor(1)) {
    DT_ASSIGN_OR_RETURN(Tensor zeros, Call("mul", {args.tensor(1), Scalar::Int(0)}));
    DT_ASSIGN_OR_RETURN(shaped, Call("add", {mean, zeros}));
  }
  DT_ASSIGN_OR_RETURN(Tensor z, Call("randn_like", {shaped}));
  DT_ASSIGN_OR_RETURN(Tensor scaled, Call("mul", {z, args[1]}));
  DT_ASSIGN_OR_RETURN(Tensor y, Call("add", {scaled, mean}));
  return OneResult(y);
}

absl::StatusOr<OpResult> UniformEager(const OpDef&, const OpArgs& args) {
  const Tensor& x = args.tensor(0);
  DT_RETURN_IF_ERROR(RequireFloatingInput(x, "uniform_"));
  const double from = args.float_(1), to = args.float_(2);
  if (!(from <= to)) {
    return Error(ErrorKind::kRuntime, absl::StrFormat("uniform_ expects to return a [from, to) range, but found "
                                                      "from=%g > to=%g", from, to));
  }
  DT_ASSIGN_OR_RETURN(Tensor u, Call("rand_like", {x}));
  DT_ASSIGN_OR_RETURN(Tensor spread, Call("mul", {u, Scalar::Float(to - from)}));
  DT_ASSIGN_OR_RETURN(Tensor y, Call("add", {spread, Scalar::Float(from)}));
  return OneResult(y);
}

}  // namespace

void RegisterRandomOps(OpRegistry& registry) {
  constexpr uint32_t kDraws = kFunction | kRandom;
  registry.Add("randint(int high, int[] size, *, DType? dtype=None, Device? device=None) -> Tensor",
               OpKind::kCreation, kDraws, &RandintEager);
  registry.Add("randint.low(int low, int high, int[] size, *, DType? dtype=None, Device? device=None) -> Tensor",
               OpKind::kCreation, kDraws, &RandintEager);
  registry.Add("randperm(int n, *, DType? dtype=None, Device? device=None) -> Tensor", OpKind::kCreation, kDraws,
               &RandpermEager);
  registry.Add("multinomial(Tensor input, int num_samples, bool replacement=False) -> Tensor", OpKind::kComposite,
               kDraws | kMethod, &MultinomialEager);
  registry.Add("bernoulli(Tensor input) -> Tensor", OpKind::kComposite, kDraws | kMethod | kDecomposable,
               &BernoulliEager);
  registry.Add("bernoulli.p(Tensor input, float p) -> Tensor", OpKind::kComposite, kDraws | kMethod | kDecomposable,
               &BernoulliEager);
  registry.Add("normal(Tensor mean, Operand std=1.0) -> Tensor", OpKind::kComposite, kDraws | kDecomposable,
               &NormalEager);
  registry.Add("normal.float(float mean, float std, int[] size, *, DType? dtype=None, Device? device=None) -> Tensor",
               OpKind::kCreation, kDraws, &NormalEager);
  // Bound as Tensor.uniform_ only (torch has no out-of-place uniform).
  registry.Add("uniform(Tensor input, float from=0, float to=1) -> Tensor", OpKind::kComposite,
               kInplaceVariant | kRandom | kDecomposable, &UniformEager);
}

}  // namespace dt
