#include "autograd/partition.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <queue>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/errors.h"

namespace dt {
namespace {

constexpr int64_t kInfinite = std::numeric_limits<int64_t>::max() / 4;

// Dinic's maximum flow; afterwards OnSourceSide() is a minimum cut's source side.
class FlowNetwork {
 public:
  explicit FlowNetwork(int nodes) : adjacent_(nodes), level_(nodes), next_edge_(nodes) {}

  void AddEdge(int from, int to, int64_t capacity) {
    adjacent_[from].push_back(static_cast<int>(edges_.size()));
    edges_.push_back({to, capacity});
    adjacent_[to].push_back(static_cast<int>(edges_.size()));
    edges_.push_back({from, 0});
  }

  // After the flow, the minimum cut chosen is the one closest to the sink: a node is on the sink
  // side only if it still reaches the sink through edges with room left. Minimum cuts often tie
  // (saving a matmul's output or the residual sum computed from it costs the same bytes); the
  // cut nearest the sink saves what backward reads and recomputes the least.
  void MaxFlow(int source, int sink) {
    while (Levels(source, sink)) {
      std::fill(next_edge_.begin(), next_edge_.end(), 0);
      while (Push(source, sink, kInfinite) > 0) {
      }
    }
    MarkSinkSide(sink);
  }

  bool OnSourceSide(int node) const { return !sink_side_[node]; }

 private:
  struct Edge {
    int to;
    int64_t capacity;
  };

  bool Levels(int source, int sink) {
    std::fill(level_.begin(), level_.end(), -1);
    std::queue<int> queue;
    level_[source] = 0;
    queue.push(source);
    while (!queue.empty()) {
      const int node = queue.front();
      queue.pop();
      for (int e : adjacent_[node]) {
        if (edges_[e].capacity > 0 && level_[edges_[e].to] < 0) {
          level_[edges_[e].to] = level_[node] + 1;
          queue.push(edges_[e].to);
        }
      }
    }
    return level_[sink] >= 0;
  }

  // Walks residual edges backwards from the sink: edge e runs from edges_[e ^ 1].to to
  // edges_[e].to, so for each edge leaving a sink-side node, its pair is the edge arriving.
  void MarkSinkSide(int sink) {
    sink_side_.assign(adjacent_.size(), false);
    std::queue<int> queue;
    sink_side_[sink] = true;
    queue.push(sink);
    while (!queue.empty()) {
      const int node = queue.front();
      queue.pop();
      for (int e : adjacent_[node]) {
        const int from = edges_[e].to;
        if (edges_[e ^ 1].capacity > 0 && !sink_side_[from]) {
          sink_side_[from] = true;
          queue.push(from);
        }
      }
    }
  }

  int64_t Push(int node, int sink, int64_t limit) {
    if (node == sink) return limit;
    for (int& i = next_edge_[node]; i < static_cast<int>(adjacent_[node].size()); ++i) {
      const int e = adjacent_[node][i];
      Edge& edge = edges_[e];
      if (edge.capacity <= 0 || level_[edge.to] != level_[node] + 1) continue;
      const int64_t pushed = Push(edge.to, sink, std::min(limit, edge.capacity));
      if (pushed > 0) {
        edge.capacity -= pushed;
        edges_[e ^ 1].capacity += pushed;
        return pushed;
      }
    }
    return 0;
  }

  std::vector<Edge> edges_;
  std::vector<std::vector<int>> adjacent_;
  std::vector<int> level_;
  std::vector<int> next_edge_;
  std::vector<bool> sink_side_;
};

int64_t Bytes(const Tensor& meta) { return meta.numel() * ItemSize(meta.dtype()); }

// Cheap to run again (arithmetic, comparisons, selects, casts, views: no transcendental
// element function), and the same result every time (the backward graph runs without the
// forward's run-time numbers, so a node reading one stays in the forward graph).
bool Recomputable(const Node& node, bool costly_too = false) {
  if (node.op->has(kRandom) || (node.op->has(kCostlyElement) && !costly_too)) return false;
  for (const GraphArg& a : node.args) {
    if (a.ReadsNumbers()) return false;
  }
  const OpKind kind = node.op->kind;
  return kind == OpKind::kPointwise || kind == OpKind::kView || kind == OpKind::kCreation;
}

void AppendValues(const GraphArg& a, std::vector<ValueId>& ids) {
  if (const auto* v = std::get_if<ValueId>(&a.content)) ids.push_back(*v);
  if (const auto* vs = std::get_if<std::vector<ValueId>>(&a.content)) ids.insert(ids.end(), vs->begin(), vs->end());
}

std::vector<ValueId> TensorArgs(const Node& node) {
  std::vector<ValueId> ids;
  for (const GraphArg& a : node.args) AppendValues(a, ids);
  return ids;
}

GraphArg Remap(const GraphArg& a, const std::vector<ValueId>& map) {
  if (const auto* v = std::get_if<ValueId>(&a.content)) return GraphArg::Value(map[*v]);
  if (const auto* vs = std::get_if<std::vector<ValueId>>(&a.content)) {
    std::vector<ValueId> ids;
    for (ValueId v : *vs) ids.push_back(map[v]);
    return GraphArg{std::move(ids)};
  }
  return a;
}

// Copies `node` of `from` into `into`, its arguments through `map`; records its outputs there.
absl::Status CopyNode(const Graph& from, const Node& node, Graph& into, std::vector<ValueId>& map) {
  std::vector<GraphArg> args;
  std::vector<ValueId> reads;
  for (const GraphArg& a : node.args) {
    AppendValues(a, reads);
    args.push_back(Remap(a, map));
  }
  for (ValueId v : reads) {
    if (map[v] < 0) return absl::InternalError(absl::StrCat("partition: ", node.op->name(), " reads an unmapped value"));
  }
  std::vector<Tensor> metas;
  for (ValueId v : node.outputs) metas.push_back(from.value(v).meta);
  const std::vector<ValueId> ids = into.AddNode(node.op, std::move(args), metas, false, node.location);
  for (size_t i = 0; i < ids.size(); ++i) map[node.outputs[i]] = ids[i];
  return absl::OkStatus();
}

// The forward values the backward graph reads, by its input order after the gradients.
std::vector<ValueId> SavedForwardValues(const JointGraph& joint) {
  std::vector<ValueId> values;
  for (const SavedValue& s : joint.saved) {
    values.push_back(s.is_input ? joint.forward->inputs()[s.index] : joint.forward->outputs()[s.index]);
  }
  return values;
}

// The minimum cut: per forward value, whether backward reads it saved (true) or recomputes it.
struct Cut {
  std::vector<bool> saved;
  std::vector<bool> recomputed;
};

Cut MinimumCut(const Graph& forward, const std::vector<ValueId>& needed) {
  const int values = static_cast<int>(forward.num_values());
  const int source = 2 * values;
  const int sink = source + 1;
  FlowNetwork network(2 * values + 2);
  auto in = [](ValueId v) { return 2 * v; };
  auto out = [](ValueId v) { return 2 * v + 1; };
  for (ValueId v : forward.inputs()) {
    network.AddEdge(source, in(v), kInfinite);
    network.AddEdge(in(v), out(v), 0);
  }
  for (const Node& node : forward.nodes()) {
    for (ValueId o : node.outputs) {
      network.AddEdge(in(o), out(o), Bytes(forward.value(o).meta));
      if (!Recomputable(node)) network.AddEdge(source, in(o), kInfinite);
      for (ValueId a : TensorArgs(node)) network.AddEdge(out(a), in(o), kInfinite);
    }
  }
  for (ValueId v : needed) network.AddEdge(out(v), sink, kInfinite);
  network.MaxFlow(source, sink);
  // Walk back from what backward reads: a value whose producing side stayed with the source is
  // saved (its in->out edge is cut); any other is recomputed from its arguments.
  Cut cut{std::vector<bool>(values, false), std::vector<bool>(values, false)};
  std::vector<ValueId> stack(needed.begin(), needed.end());
  while (!stack.empty()) {
    const ValueId v = stack.back();
    stack.pop_back();
    if (cut.saved[v] || cut.recomputed[v]) continue;
    if (network.OnSourceSide(in(v))) {
      cut.saved[v] = true;
      continue;
    }
    cut.recomputed[v] = true;
    const int producer = forward.value(v).producer;
    for (ValueId a : TensorArgs(forward.nodes()[producer])) stack.push_back(a);
  }
  return cut;
}

// Whether backward has value `v` without saving it: a forward input, a saved value, a value
// already recomputed, or one cheap nodes recompute from those (at most `depth` deep); the cheap
// values that takes are marked recomputed.
bool Available(const Graph& forward, ValueId v, int depth, Cut& cut) {
  if (forward.value(v).producer < 0 || cut.saved[v] || cut.recomputed[v]) return true;
  const Node& node = forward.nodes()[forward.value(v).producer];
  if (depth == 0 || !Recomputable(node)) return false;
  for (ValueId a : TensorArgs(node)) {
    if (!Available(forward, a, depth - 1, cut)) return false;
  }
  cut.recomputed[v] = true;
  return true;
}

// The cut leaves transcendental element functions out (a chain of them recomputed could cost
// more than it saves), but one whose operands backward has anyway is recomputed instead of
// saved: one pass of exp or erf over a tensor costs far less than keeping it alive between
// the passes. GELU's output is recomputed from its saved input, softmax's exp from the saved
// scores and maximum. In value order, so a chain of them resolves front to back.
void RecomputeCostlyFromOperands(const Graph& forward, Cut& cut) {
  constexpr int kCheapDepth = 4;
  for (ValueId v = 0; v < static_cast<ValueId>(forward.num_values()); ++v) {
    if (!cut.saved[v] || forward.value(v).producer < 0) continue;
    const Node& node = forward.nodes()[forward.value(v).producer];
    if (!node.op->has(kCostlyElement) || !Recomputable(node, /*costly_too=*/true) || node.outputs.size() != 1) continue;
    Cut trial = cut;
    trial.saved[v] = false;
    bool operands_available = true;
    for (ValueId a : TensorArgs(node)) operands_available = operands_available && Available(forward, a, kCheapDepth, trial);
    if (!operands_available) continue;
    trial.recomputed[v] = true;
    cut = std::move(trial);
  }
}

}  // namespace

absl::Status Partition(JointGraph& joint) {
  const Graph& forward = *joint.forward;
  const Graph& backward = joint.backward;
  const std::vector<ValueId> needed = SavedForwardValues(joint);
  Cut cut = MinimumCut(forward, needed);
  RecomputeCostlyFromOperands(forward, cut);
  const size_t num_grads = joint.differentiable_outputs.size();

  Graph rebuilt;
  for (size_t i = 0; i < num_grads; ++i) {
    rebuilt.AddInput(backward.value(backward.inputs()[i]).meta, backward.input_sources()[i]);
  }
  std::vector<ValueId> forward_map(forward.num_values(), -1);
  std::vector<SavedValue> saved;
  std::vector<ValueId> forward_outputs(forward.outputs().begin(),
                                       forward.outputs().begin() + joint.num_user_outputs);
  int64_t saved_bytes = 0;
  for (ValueId v = 0; v < static_cast<ValueId>(forward.num_values()); ++v) {
    if (!cut.saved[v]) continue;
    forward_map[v] = rebuilt.AddInput(forward.value(v).meta, absl::StrCat("saved[", saved.size(), "]"));
    if (forward.value(v).producer < 0) {
      saved.push_back(SavedValue{true, forward.value(v).input_index});
    } else {
      saved.push_back(SavedValue{false, static_cast<int>(forward_outputs.size())});
      forward_outputs.push_back(v);
      saved_bytes += Bytes(forward.value(v).meta);
    }
  }
  int recomputed_nodes = 0;
  for (const Node& node : forward.nodes()) {
    bool wanted = false;
    for (ValueId o : node.outputs) wanted = wanted || cut.recomputed[o];
    if (!wanted) continue;
    DT_RETURN_IF_ERROR(CopyNode(forward, node, rebuilt, forward_map));
    ++recomputed_nodes;
  }
  std::vector<ValueId> backward_map(backward.num_values(), -1);
  for (size_t i = 0; i < backward.inputs().size(); ++i) {
    const ValueId from = backward.inputs()[i];
    backward_map[from] = i < num_grads ? rebuilt.inputs()[i] : forward_map[needed[i - num_grads]];
    if (backward_map[from] < 0) return absl::InternalError("partition: a saved value is neither kept nor recomputed");
  }
  for (const Node& node : backward.nodes()) DT_RETURN_IF_ERROR(CopyNode(backward, node, rebuilt, backward_map));
  std::vector<ValueId> outputs;
  for (ValueId v : backward.outputs()) outputs.push_back(backward_map[v]);
  rebuilt.SetOutputs(std::move(outputs));
  rebuilt.EliminateDeadCode();

  auto new_forward = std::make_shared<Graph>(forward);
  new_forward->SetOutputs(std::move(forward_outputs));
  joint.forward = std::move(new_forward);
  joint.backward = std::move(rebuilt);
  joint.saved = std::move(saved);
  joint.saved_bytes = saved_bytes;
  joint.recomputed_nodes = recomputed_nodes;
  return absl::OkStatus();
}

}  // namespace dt
