// graph/nn_common.h: helpers shared by the neural-network composites (ops_losses.cc, ops_nn.cc,
// ops_conv.cc): reading an argument by its schema name, PyTorch's loss `reduction=` (with the
// legacy size_average/reduce pair), and the checks those ops share.
//
//   DT_ASSIGN_OR_RETURN(LossReduction r, ReductionArg(op, args));
//   DT_ASSIGN_OR_RETURN(Tensor loss, Reduce(elementwise, r));
#ifndef DYNTRACE_GRAPH_NN_COMMON_H_
#define DYNTRACE_GRAPH_NN_COMMON_H_

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "graph/op_registry.h"

namespace dt {

inline OpResult OneResult(Tensor t) { return OpResult{std::move(t)}; }

// The argument named `name` in `op`'s schema. REQUIRES: the schema has that parameter.
const ArgValue& NamedArg(const OpDef& op, const OpArgs& args, absl::string_view name);
bool NamedIsNone(const OpDef& op, const OpArgs& args, absl::string_view name);

enum class LossReduction : uint8_t { kNone, kMean, kSum };

// `reduction=` ('none', 'mean', 'sum'; a ValueError otherwise), overridden as PyTorch does when
// the deprecated `size_average=` or `reduce=` is given.
[[nodiscard]] absl::StatusOr<LossReduction> ReductionArg(const OpDef& op, const OpArgs& args);

// The elementwise loss reduced: itself, its mean (divided by the count when it runs, so a
// recorded body serves every size) or its sum.
[[nodiscard]] absl::StatusOr<Tensor> Reduce(const Tensor& loss, LossReduction reduction);

// A TypeError naming `op` unless `t` is floating (as PyTorch's "not implemented for 'Long'").
[[nodiscard]] absl::Status RequireFloatingInput(const Tensor& t, absl::string_view op);

// `t` (1-d, size C) viewed to broadcast along dim `dim` of a rank-`ndim` tensor: trailing unit
// dims added one by one, so no size is baked into the view.
[[nodiscard]] absl::StatusOr<Tensor> AlongDim(const Tensor& t, int64_t dim, int64_t ndim);

// The p-norm of `x` over `dims` (all dims when empty): max/min of |x| for p = +/-inf, the count
// of nonzeros for 0, sqrt of the sum of squares for 2, (sum |x|^p)^(1/p) otherwise.
[[nodiscard]] absl::StatusOr<Tensor> VectorNorm(const Tensor& x, double p, const ArgValue& dims,
                                                bool keepdim);

}  // namespace dt

#endif  // DYNTRACE_GRAPH_NN_COMMON_H_
