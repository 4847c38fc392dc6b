#include "graph/decompose.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "graph/graph_recorder.h"
#include "runtime/errors.h"

namespace dt {
namespace {

bool Expandable(const Node& node, ExpandComposites which) {
  // An op that writes its arguments stays whole: on meta tensors its body computes, never writes.
  if (node.op->kind != OpKind::kComposite || node.inplace || node.op->has(kWritesArguments)) return false;
  const bool wanted = which == ExpandComposites::kDecomposable ? node.op->has(kDecomposable)
                                                               : node.op->derivative.fn == nullptr;
  if (!wanted) return false;
  for (const GraphArg& a : node.args) {
    if (a.ReadsNumbers()) return false;
  }
  return true;
}

std::vector<ArgValue> MetaArgs(const Graph& graph, const Node& node) {
  std::vector<ArgValue> values;
  for (const GraphArg& a : node.args) {
    if (auto* v = std::get_if<ValueId>(&a.content)) {
      values.push_back(graph.value(*v).meta);
    } else if (auto* vs = std::get_if<std::vector<ValueId>>(&a.content)) {
      std::vector<Tensor> ts;
      for (ValueId v : *vs) ts.push_back(graph.value(v).meta);
      values.push_back(std::move(ts));
    } else {
      values.push_back(std::get<ArgValue>(a.content));
    }
  }
  return values;
}

// A view op that had to copy (reshape of a transposed tensor): its result does not share the
// input's storage.
bool CopyingView(const Graph& graph, const Node& node) {
  if (node.op->kind != OpKind::kView || node.inplace || node.outputs.size() != 1 || node.args.empty()) return false;
  for (size_t i = 1; i < node.args.size(); ++i) {
    if (!std::holds_alternative<ArgValue>(node.args[i].content)) return false;
  }
  const auto* input = std::get_if<ValueId>(&node.args[0].content);
  return input != nullptr &&
         graph.value(node.outputs[0]).meta.storage() != graph.value(*input).meta.storage();
}

// `out` gets contiguous(input) and then the view op on that, which now views: the copy becomes
// a node the code generators turn into a kernel (a same-dtype cast), where the view alone would
// copy eagerly, between kernels, every run.
absl::StatusOr<ValueId> ExpandCopyingView(const Graph& graph, const Node& node, const std::vector<ValueId>& map,
                                          Graph& out) {
  const ValueId input = std::get<ValueId>(node.args[0].content);
  const Tensor& in_meta = graph.value(input).meta;
  const Tensor dense = Tensor::Empty(in_meta.sizes(), in_meta.dtype(), Device::Meta());
  const ValueId copied = out.AddNode(OpRegistry::Get().Find("contiguous"), {GraphArg::Value(map[input])}, {dense},
                                     false, node.location)[0];
  std::vector<GraphArg> args{GraphArg::Value(copied)};
  std::vector<ArgValue> metas{dense};
  for (size_t i = 1; i < node.args.size(); ++i) {
    args.push_back(RemapValues(node.args[i], map));
    metas.push_back(std::get<ArgValue>(node.args[i].content));
  }
  DT_ASSIGN_OR_RETURN(OpResult viewed, CallOp(*node.op, OpArgs(std::move(metas))));
  return out.AddNode(node.op, std::move(args), viewed, false, node.location)[0];
}

}  // namespace

absl::StatusOr<Graph> Decompose(const Graph& graph, ExpandComposites which, std::optional<Device> device) {
  return RewriteNodes(graph, [&](const Node& node, std::vector<ValueId>& map, Graph& out) -> absl::StatusOr<bool> {
    if (CopyingView(graph, node)) {
      DT_ASSIGN_OR_RETURN(map[node.outputs[0]], ExpandCopyingView(graph, node, map, out));
      return true;
    }
    if (!Expandable(node, which)) return false;
    // Recorded into a scratch graph first, so a failed expansion leaves `out` untouched.
    Graph scratch = out;
    GraphRecorder recorder(scratch, node.location, device);
    if (which == ExpandComposites::kWithoutDerivative) recorder.KeepDifferentiableWhole();
    for (const GraphArg& a : node.args) {
      if (auto* v = std::get_if<ValueId>(&a.content)) recorder.Know(graph.value(*v).meta, map[*v]);
      if (auto* vs = std::get_if<std::vector<ValueId>>(&a.content)) {
        for (ValueId v : *vs) recorder.Know(graph.value(v).meta, map[v]);
      }
    }
    CallRecorder* outer = SetCallRecorder(&recorder);
    absl::StatusOr<OpResult> result = CallOp(*node.op, OpArgs(MetaArgs(graph, node)));
    SetCallRecorder(outer);
    bool mapped = result.ok() && result->size() == node.outputs.size();
    std::vector<ValueId> ids;
    for (size_t i = 0; mapped && i < result->size(); ++i) {
      absl::StatusOr<ValueId> id = recorder.Find((*result)[i]);
      mapped = id.ok() && scratch.value(*id).meta.dtype() == graph.value(node.outputs[i]).meta.dtype();
      if (mapped) ids.push_back(*id);
    }
    if (!mapped) return false;
    out = std::move(scratch);
    for (size_t i = 0; i < ids.size(); ++i) map[node.outputs[i]] = ids[i];
    return true;
  });
}

}  // namespace dt
