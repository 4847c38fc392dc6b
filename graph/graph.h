// graph/graph.h: the captured computation: SSA values produced by registry ops.
//
// A Graph has inputs (tensors fetched from the frame at run time), nodes (one registry op each,
// with its arguments in schema order: tensor arguments refer to values, everything else is a
// constant), and outputs. Values carry dtype, shape and device (a meta tensor). In-place nodes
// (`x.add_(y)`, `x[i] = v`) write into their first argument's storage when the graph runs, which is
// how a traced function's mutations of its inputs reach the caller.
//
//   Graph g;
//   ValueId x = g.AddInput(meta_x, "L['x']");
//   ValueId y = *g.AddNode(*OpRegistry::Get().Find("exp"), {GraphArg::Value(x)}, ...);
//   g.SetOutputs({y});
//   std::string code = g.ToString();
#ifndef DYNTRACE_GRAPH_GRAPH_H_
#define DYNTRACE_GRAPH_GRAPH_H_

#include <string>
#include <variant>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "graph/op_registry.h"

namespace dt {

using ValueId = int;

// One argument of a node, in schema order.
// A Python number only known when the graph runs (a loop counter carried across a graph
// break): RunEager's `scalars[slot]`.
struct ScalarRef {
  int slot;
};

// A shape some of whose sizes are only known when the graph runs (symbolic sizes: `x.view(s0,
// 4)` where s0 is `x.size(0)`): size i is scalars[slots[i]] where slots[i] >= 0, else sizes[i].
struct DimsRef {
  Dims sizes;
  std::vector<int> slots;
};

struct GraphArg {
  // A tensor value, a list of tensor values (cat/stack), a non-tensor constant, a runtime
  // Python number, or a shape holding some.
  std::variant<ValueId, std::vector<ValueId>, ArgValue, ScalarRef, DimsRef> content;
  static GraphArg Value(ValueId v) { return GraphArg{v}; }
  // Whether the argument's value is only known when the graph runs (a ScalarRef or DimsRef).
  bool ReadsNumbers() const {
    return std::holds_alternative<ScalarRef>(content) || std::holds_alternative<DimsRef>(content);
  }
};

// `a` with every value v it names replaced by map[v] (copying a graph node into another graph).
GraphArg RemapValues(const GraphArg& a, const std::vector<ValueId>& map);

class Graph;
struct Node;
// Appends `node` of `from` to `to` with every value it names renamed through `map`, and maps
// its results to the new node's (rewriting a graph node by node).
void CopyNode(const Graph& from, const Node& node, std::vector<ValueId>& map, Graph& to);

// A copy of `graph` whose nodes `rewrite` may replace. For each node, in order, it gets the map
// from `graph`'s values to the copy's (so far) and the copy; it appends the node's replacement
// and maps each of the node's outputs, returning true, or returns false to have the node copied
// as it is. Inputs and outputs are kept (graph/decompose, jit/reduction_split).
using NodeRewrite = absl::FunctionRef<absl::StatusOr<bool>(const Node& node, std::vector<ValueId>& map, Graph& out)>;
[[nodiscard]] absl::StatusOr<Graph> RewriteNodes(const Graph& graph, NodeRewrite rewrite);

// A DimsRef's sizes for one run. REQUIRES: every slot indexes `scalars`.
Dims ResolveDims(const DimsRef& dims, const std::vector<Scalar>& scalars);

struct SourceLocation {
  int line = -1;
  int offset = -1;
  std::string instruction;  // "BINARY_OP +"
};

struct Node {
  const OpDef* op;
  std::vector<GraphArg> args;
  std::vector<ValueId> outputs;
  bool inplace = false;  // writes its result into args[0]
  SourceLocation location;
};

struct GraphValue {
  Tensor meta;        // dtype, shape, strides, device (no data)
  int producer = -1;  // node index, or -1 for inputs
  int input_index = -1;
};

class Graph {
 public:
  ValueId AddInput(const Tensor& meta, std::string source);
  // Appends a node; `output_metas` are the results of running the op on meta tensors.
  std::vector<ValueId> AddNode(const OpDef* op, std::vector<GraphArg> args,
                               const std::vector<Tensor>& output_metas, bool inplace,
                               SourceLocation location);
  void SetOutputs(std::vector<ValueId> outputs) { outputs_ = std::move(outputs); }
  // For printing: what run-time number `slot` is ("L['x'].size(0)"), and which input sizes are
  // symbolic (input `input`'s size `dim` is run-time number `slot`).
  void NameScalar(int slot, std::string expression);
  void MarkSymbolicInputSize(int input, int dim, int slot);
  // Whether some input size is a run-time number (the graph serves several shapes).
  bool HasSymbolicInputSizes() const;
  // Drops the nodes from `num_nodes` on (a trace rolling back to the start of an instruction).
  void Truncate(size_t num_nodes) {
    if (num_nodes < nodes_.size()) nodes_.resize(num_nodes);
  }

  const std::vector<Node>& nodes() const { return nodes_; }
  const std::vector<ValueId>& inputs() const { return inputs_; }
  const std::vector<std::string>& input_sources() const { return input_sources_; }
  const std::vector<ValueId>& outputs() const { return outputs_; }
  const GraphValue& value(ValueId v) const { return values_[v]; }
  size_t num_values() const { return values_.size(); }

  // Removes nodes whose results are never used, unless they mutate a tensor, draw random
  // numbers or may raise on their operands' values. Returns how many were removed.
  int EliminateDeadCode();

  // Makes each later node that repeats an earlier one (the same op on the same values and
  // constants) use the earlier node's results instead, so that dead-code elimination drops it.
  // A layer norm's statistics, recomputed for its backward by the partitioner and again by a
  // composite's body, are computed once. Leaves alone: nodes that write, draw random numbers or
  // may raise; graph outputs (each returned tensor stays its own object); values whose storage
  // something writes (their contents differ over time); and it forgets every earlier node at
  // a write. Returns how many nodes now repeat an earlier one.
  int MergeCommonSubexpressions();

  // Whether node `n` may raise on its operands' values (an out-of-range index, an integer zero
  // divisor or negative exponent), which a trace cannot see on meta tensors. On CUDA such a
  // node checks on the device and reads its verdict back, so no CUDA graph can hold it.
  bool MayRaiseOnValues(const Node& n) const;

  // Python-like code: one line per node, with the source line that produced it.
  std::string ToString(absl::string_view name = "graph") const;
  std::string NodeStatement(const Node& n, const std::vector<std::string>& outputs) const;
  // The same graph as a Graphviz digraph (graph_dot.cc): one box per node (op, non-tensor
  // arguments, result dtype/shape, source line), one edge per value use labelled with the value,
  // inputs as ellipses naming where they come from, outputs gathered into a "return" node.
  std::string ToDot(absl::string_view name = "graph") const;

  // Runs the graph op by op through the eager runtime. REQUIRES: inputs match inputs() in order.
  // `scalars` supplies the ScalarRef arguments.
  [[nodiscard]] absl::StatusOr<std::vector<Tensor>> RunEager(const std::vector<Tensor>& inputs,
                                                             const std::vector<Scalar>& scalars = {}) const;
  // Runs node `index` eagerly, reading and writing `env` (one tensor per value). `on_meta`: a
  // creation op makes a meta tensor wherever its device argument points, so a shape-only run
  // of the graph (jit/shape_plans.h) allocates nothing and leaves the random generator alone.
  [[nodiscard]] absl::Status RunNode(size_t index, std::vector<Tensor>& env,
                                     const std::vector<Scalar>& scalars, bool on_meta = false) const;

 private:
  std::vector<GraphValue> values_;
  std::vector<Node> nodes_;
  std::vector<ValueId> inputs_;
  std::vector<std::string> input_sources_;
  std::vector<ValueId> outputs_;
  std::vector<std::string> scalar_names_;
  std::vector<std::vector<int>> symbolic_input_sizes_;  // per input, per dim: slot or -1
};

// "f32[?, 4]"-style type of a value for printing.
std::string DescribeMeta(const Tensor& meta);

}  // namespace dt

#endif  // DYNTRACE_GRAPH_GRAPH_H_
