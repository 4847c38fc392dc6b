#include "jit/capture_copies.h"

#include <algorithm>

#include "graph/op_registry.h"
#include "runtime/errors.h"

namespace dt::jit {
namespace {

// Per value, the value whose storage it shares: a view's base, followed back to a non-view.
std::vector<ValueId> StorageRoots(const Graph& g) {
  std::vector<ValueId> root(g.num_values());
  for (size_t v = 0; v < root.size(); ++v) root[v] = static_cast<ValueId>(v);
  for (const Node& n : g.nodes()) {
    if (n.op->kind != OpKind::kView || n.args.empty()) continue;
    const auto* base = std::get_if<ValueId>(&n.args[0].content);
    if (base == nullptr) continue;
    for (ValueId out : n.outputs) root[out] = root[*base];
  }
  return root;
}

void ForEachValueArg(const Node& n, const auto& visit) {
  for (const GraphArg& a : n.args) {
    if (auto* v = std::get_if<ValueId>(&a.content)) visit(*v);
    if (auto* vs = std::get_if<std::vector<ValueId>>(&a.content)) {
      for (ValueId v : *vs) visit(v);
    }
  }
}

}  // namespace

CaptureCopies FindCaptureCopies(const Program& program) {
  const Graph& g = program.graph;
  const std::vector<ValueId> root = StorageRoots(g);
  std::vector<int> input_of(g.num_values(), -1);
  for (size_t i = 0; i < g.inputs().size(); ++i) input_of[g.inputs()[i]] = static_cast<int>(i);
  std::vector<bool> library_output(g.num_values(), false), read_by_library(g.inputs().size(), false),
      unsafe(g.inputs().size(), false);
  for (const Step& step : program.steps) {
    if (step.kind != Step::Kind::kNode) continue;
    const Node& n = g.nodes()[step.index];
    if (n.op->kind == OpKind::kView) continue;
    for (ValueId out : n.outputs) library_output[out] = true;
    ForEachValueArg(n, [&](ValueId v) {
      if (input_of[root[v]] >= 0) read_by_library[input_of[root[v]]] = true;
    });
  }
  for (const Node& n : g.nodes()) {
    if (!n.inplace || n.args.empty()) continue;
    const auto* written = std::get_if<ValueId>(&n.args[0].content);
    if (written != nullptr && input_of[root[*written]] >= 0) unsafe[input_of[root[*written]]] = true;
  }
  // Returned values grouped by the storage they share: a copy would part aliases.
  std::vector<std::vector<ValueId>> returned_by_root(g.num_values());
  for (ValueId v : g.outputs()) {
    std::vector<ValueId>& group = returned_by_root[root[v]];
    if (std::find(group.begin(), group.end(), v) == group.end()) group.push_back(v);
    if (input_of[root[v]] >= 0) unsafe[input_of[root[v]]] = true;
  }
  CaptureCopies copies;
  for (size_t r = 0; r < returned_by_root.size(); ++r) {
    if (library_output[r] && returned_by_root[r].size() == 1) copies.outputs.push_back(returned_by_root[r][0]);
  }
  copies.stageable_inputs.resize(g.inputs().size());
  for (size_t i = 0; i < g.inputs().size(); ++i) copies.stageable_inputs[i] = read_by_library[i] && !unsafe[i];
  return copies;
}

absl::StatusOr<Graph> WithCaptureCopies(const Graph& graph, const std::vector<ValueId>& outputs,
                                        const std::vector<int>& staged_inputs) {
  const OpDef* clone = OpRegistry::Get().Find("clone");
  auto add_clone = [&](Graph& out, ValueId of, const SourceLocation& location) -> absl::StatusOr<ValueId> {
    DT_ASSIGN_OR_RETURN(OpResult meta, CallOp(*clone, OpArgs({ArgValue(out.value(of).meta)})));
    return out.AddNode(clone, {GraphArg::Value(of)}, {meta.at(0)}, false, location)[0];
  };
  Graph out;
  std::vector<ValueId> map(graph.num_values(), -1);
  for (size_t i = 0; i < graph.inputs().size(); ++i) {
    const ValueId v = graph.inputs()[i];
    map[v] = out.AddInput(graph.value(v).meta, graph.input_sources()[i]);
  }
  const std::vector<ValueId> unstaged = map;
  for (int i : staged_inputs) {
    const ValueId v = graph.inputs().at(i);
    DT_ASSIGN_OR_RETURN(map[v], add_clone(out, map[v], SourceLocation{}));
  }
  std::vector<SourceLocation> made_at(graph.num_values());
  for (const Node& node : graph.nodes()) {
    std::vector<GraphArg> args;
    for (const GraphArg& a : node.args) args.push_back(RemapValues(a, map));
    std::vector<Tensor> metas;
    for (ValueId v : node.outputs) metas.push_back(graph.value(v).meta);
    std::vector<ValueId> ids = out.AddNode(node.op, std::move(args), metas, node.inplace, node.location);
    for (size_t i = 0; i < ids.size(); ++i) {
      map[node.outputs[i]] = ids[i];
      made_at[node.outputs[i]] = node.location;
    }
  }
  std::vector<ValueId> returned(graph.num_values(), -1);
  for (ValueId v : outputs) {
    DT_ASSIGN_OR_RETURN(returned[v], add_clone(out, map[v], made_at[v]));
  }
  std::vector<ValueId> out_ids;
  for (ValueId v : graph.outputs()) {
    // A staged input itself stays the caller's tensor (FindCaptureCopies never stages a returned one).
    const bool is_input = std::find(graph.inputs().begin(), graph.inputs().end(), v) != graph.inputs().end();
    out_ids.push_back(returned[v] >= 0 ? returned[v] : is_input ? unstaged[v] : map[v]);
  }
  out.SetOutputs(std::move(out_ids));
  return out;
}

}  // namespace dt::jit
