#include "jit/reduction_split.h"

#include <algorithm>
#include <optional>
#include <vector>

#include "graph/graph_recorder.h"
#include "graph/op_registry.h"
#include "graph/reduction.h"
#include "runtime/errors.h"

namespace dt::jit {
namespace {

struct Split {
  Dims trailing;  // the reduced dims' trailing block, folded first into float64
  Dims rest;      // the other reduced dims, folded from those partial sums
  Dims all;       // both, for squeezing them away without keepdim
  bool keepdim = false;
};

// The split of sum node `n`, when its reduced dims take the input's last dim but are not all of
// its trailing dims (a contiguous input, so the last dim is the innermost in memory).
std::optional<Split> SplitOf(const Graph& g, const Node& n) {
  if (n.op->name() != "sum" || n.inplace || n.args.size() != 4) return std::nullopt;
  const ValueId* input = std::get_if<ValueId>(&n.args[0].content);
  const ArgValue* dims_arg = std::get_if<ArgValue>(&n.args[1].content);
  const ArgValue* keep_arg = std::get_if<ArgValue>(&n.args[2].content);
  if (input == nullptr || dims_arg == nullptr || keep_arg == nullptr) return std::nullopt;
  const Dims* dims = std::get_if<Dims>(dims_arg);
  const Scalar* keep = std::get_if<Scalar>(keep_arg);
  const Tensor& in = g.value(*input).meta;
  // float32, whose eager sum accumulates in float64: the order of those additions hides below
  // the final rounding (for a float64 input it would show in the last bit).
  const bool wide_accumulator = in.dtype() == DType::kFloat32;
  if (dims == nullptr || keep == nullptr || !wide_accumulator || !in.is_contiguous()) return std::nullopt;
  absl::StatusOr<Dims> normal = NormalizeReductionDims(*dims, in.ndim());
  if (!normal.ok() || normal->empty()) return std::nullopt;
  Dims reduced = *normal;
  std::sort(reduced.begin(), reduced.end());
  const int64_t last = in.ndim() - 1;
  if (reduced.back() != last) return std::nullopt;
  Split s;
  s.keepdim = keep->ToBool();
  s.all = reduced;
  int64_t expected = last;
  for (auto it = reduced.rbegin(); it != reduced.rend(); ++it) {
    if (*it == expected && s.rest.empty()) {
      s.trailing.insert(s.trailing.begin(), *it);
      --expected;
    } else {
      s.rest.insert(s.rest.begin(), *it);
    }
  }
  if (s.rest.empty()) return std::nullopt;  // already a row reduction
  return s;
}

// The rewrite, as registry calls on `n`'s meta input (under a recorder). Nothing in it depends
// on the sizes: a graph serves every size its guards allow.
absl::StatusOr<Tensor> SplitCalls(const Graph& g, const Node& n, const Split& s) {
  const Tensor& in = g.value(std::get<ValueId>(n.args[0].content)).meta;
  const Tensor& out = g.value(n.outputs[0]).meta;
  DT_ASSIGN_OR_RETURN(Tensor partial, Call("sum", {in, s.trailing, Scalar::Bool(true), DType::kFloat64}));
  DT_ASSIGN_OR_RETURN(Tensor total, Call("sum", {partial, s.rest, Scalar::Bool(true), DType::kFloat64}));
  DT_ASSIGN_OR_RETURN(Tensor result, Call("_to", {total, out.dtype()}));
  if (s.keepdim) return result;
  return Call("squeeze", {result, s.all});
}

}  // namespace

absl::StatusOr<Graph> SplitStridedReductions(const Graph& graph, int* split) {
  if (split != nullptr) *split = 0;
  return RewriteNodes(graph, [&](const Node& node, std::vector<ValueId>& map, Graph& out) -> absl::StatusOr<bool> {
    const std::optional<Split> s = SplitOf(graph, node);
    if (!s.has_value()) return false;
    GraphRecorder recorder(out, node.location, std::nullopt);
    const ValueId input = std::get<ValueId>(node.args[0].content);
    recorder.Know(graph.value(input).meta, map[input]);
    CallRecorder* outer = SetCallRecorder(&recorder);
    absl::StatusOr<Tensor> result = SplitCalls(graph, node, *s);
    SetCallRecorder(outer);
    DT_RETURN_IF_ERROR(result.status());
    DT_ASSIGN_OR_RETURN(map[node.outputs[0]], recorder.Find(*result));
    if (split != nullptr) ++*split;
    return true;
  });
}

}  // namespace dt::jit
