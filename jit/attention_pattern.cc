#include "jit/attention_pattern.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "runtime/cuda_attention.h"
#include "runtime/errors.h"

namespace dt::jit {
namespace {

// How each value is read: by how many node arguments, whether it is returned or written.
struct Uses {
  std::vector<int> readers;
  std::vector<bool> pinned;  // a graph output, or written in place

  // Whether only one node reads `v` and nothing else can see it.
  bool Private(ValueId v) const { return readers[v] == 1 && !pinned[v]; }
};

Uses CountUses(const Graph& g) {
  Uses u{std::vector<int>(g.num_values(), 0), std::vector<bool>(g.num_values(), false)};
  for (const Node& n : g.nodes()) {
    for (const GraphArg& a : n.args) {
      if (auto* v = std::get_if<ValueId>(&a.content)) ++u.readers[*v];
      if (auto* vs = std::get_if<std::vector<ValueId>>(&a.content)) {
        for (ValueId v : *vs) ++u.readers[v];
      }
    }
    if (n.inplace && !n.args.empty()) {
      if (auto* v = std::get_if<ValueId>(&n.args[0].content)) u.pinned[*v] = true;
    }
  }
  for (ValueId v : g.outputs()) u.pinned[v] = true;
  return u;
}

std::optional<ValueId> ValueArg(const Node& n, size_t i) {
  if (i >= n.args.size()) return std::nullopt;
  if (auto* v = std::get_if<ValueId>(&n.args[i].content)) return *v;
  return std::nullopt;
}

std::optional<double> NumberArg(const Node& n, size_t i) {
  if (i >= n.args.size()) return std::nullopt;
  const auto* a = std::get_if<ArgValue>(&n.args[i].content);
  if (a == nullptr) return std::nullopt;
  if (const auto* s = std::get_if<Scalar>(a)) return s->ToDouble();
  return std::nullopt;
}

bool MinusInfinityArg(const Node& n, size_t i) {
  const std::optional<double> x = NumberArg(n, i);
  return x.has_value() && std::isinf(*x) && *x < 0;
}

const Node* Producer(const Graph& g, ValueId v) {
  const int p = g.value(v).producer;
  return p >= 0 ? &g.nodes()[p] : nullptr;
}

// The chain between the first matmul and the softmax (and dropout after it), as read backwards.
struct Match {
  ValueId q = -1, kt = -1, v = -1, mask = -1;
  ValueId keep = -1;       // dropout's bool keep mask, when the graph has one
  int dropout_node = -1;   // a dropout node whose draw the pass writes out (see FuseAttention)
  ValueId drawn_keep = -1;  // that draw's keep mask, a value of the new graph
  AttentionSpec spec;
};

bool MatchScores(const Graph& g, const Uses& u, ValueId scores, bool mask_seen, Match m, Match& out);

// A mask node reading the scores `chain` with `mask`; continues the match below it.
bool MatchBelowMask(const Graph& g, const Uses& u, std::optional<ValueId> chain, std::optional<ValueId> mask,
                    AttentionMask kind, Match m, Match& out) {
  if (!chain.has_value() || !mask.has_value()) return false;
  m.mask = *mask;
  m.spec.mask_kind = kind;
  return MatchScores(g, u, *chain, true, m, out);
}

bool MatchMask(const Graph& g, const Uses& u, const Node& n, const Match& m, Match& out) {
  const std::string& name = n.op->name();
  if (name == "where") {
    if (MinusInfinityArg(n, 2)) return MatchBelowMask(g, u, ValueArg(n, 1), ValueArg(n, 0), kAttentionKeepWhereTrue, m, out);
    if (MinusInfinityArg(n, 1)) return MatchBelowMask(g, u, ValueArg(n, 2), ValueArg(n, 0), kAttentionDropWhereTrue, m, out);
    return false;
  }
  if (name == "masked_fill") {
    return MinusInfinityArg(n, 2) &&
           MatchBelowMask(g, u, ValueArg(n, 0), ValueArg(n, 1), kAttentionDropWhereTrue, m, out);
  }
  if (name == "add") {
    // Either operand may be the scores.
    return MatchBelowMask(g, u, ValueArg(n, 0), ValueArg(n, 1), kAttentionAddMask, m, out) ||
           MatchBelowMask(g, u, ValueArg(n, 1), ValueArg(n, 0), kAttentionAddMask, m, out);
  }
  return false;
}

// `scores` (read by the next op of the chain) down to matmul(q, kT): scales by constants and at
// most one mask.
bool MatchScores(const Graph& g, const Uses& u, ValueId scores, bool mask_seen, Match m, Match& out) {
  if (!u.Private(scores)) return false;
  const Node* n = Producer(g, scores);
  if (n == nullptr || n->inplace || n->outputs.size() != 1) return false;
  const std::string& name = n->op->name();
  if (name == "matmul") {
    const std::optional<ValueId> q = ValueArg(*n, 0), kt = ValueArg(*n, 1);
    if (!q.has_value() || !kt.has_value()) return false;
    m.q = *q;
    m.kt = *kt;
    out = m;
    return true;
  }
  if (name == "mul" || name == "div") {
    const std::optional<ValueId> input = ValueArg(*n, 0);
    const std::optional<double> c = NumberArg(*n, 1);
    if (!input.has_value() || !c.has_value() || !std::isfinite(*c) || *c == 0.0) return false;
    (mask_seen ? m.spec.scale : m.spec.post_scale) *= name == "div" ? 1.0 / *c : *c;
    return MatchScores(g, u, *input, mask_seen, m, out);
  }
  return !mask_seen && MatchMask(g, u, *n, m, out);
}

int LastDim(const Graph& g, ValueId v) { return static_cast<int>(g.value(v).meta.ndim()) - 1; }

// A dropout node's probability when it drops (training, not in place, 0 < p < 1 constant).
std::optional<double> DropoutProbability(const Node& n) {
  if (n.op->name() != "dropout" || n.inplace) return std::nullopt;
  const std::optional<double> p = NumberArg(n, 1), training = NumberArg(n, 2), inplace = NumberArg(n, 3);
  if (!p.has_value() || !(*p > 0.0 && *p < 1.0) || training.value_or(0) == 0 || inplace.value_or(1) != 0) {
    return std::nullopt;
  }
  return p;
}

// Dropout of the weights: a dropout node (when `can_draw`), or its decomposition
// mul(mul(weights, keep), 1 / (1 - p)) with a bool keep (graph/ops_nn.cc). Returns the weights
// below it and sets `start`'s keep (or dropout_node) and keep_scale; nullopt when `dropped` is
// neither.
std::optional<ValueId> BelowDropout(const Graph& g, const Uses& u, ValueId dropped, bool can_draw, Match& start) {
  const Node* scaled = Producer(g, dropped);
  if (scaled == nullptr || scaled->inplace) return std::nullopt;
  if (const std::optional<double> p = DropoutProbability(*scaled); p.has_value() && can_draw) {
    start.dropout_node = g.value(dropped).producer;
    start.spec.keep_scale = 1.0 / (1.0 - *p);  // as dropout computes it
    return ValueArg(*scaled, 0);
  }
  if (scaled->op->name() != "mul") return std::nullopt;
  const std::optional<ValueId> kept = ValueArg(*scaled, 0);
  const std::optional<double> factor = NumberArg(*scaled, 1);
  if (!kept.has_value() || !factor.has_value() || !std::isfinite(*factor) || *factor <= 0 || !u.Private(*kept)) {
    return std::nullopt;
  }
  const Node* masked = Producer(g, *kept);
  if (masked == nullptr || masked->op->name() != "mul" || masked->inplace) return std::nullopt;
  for (size_t i : {0, 1}) {
    const std::optional<ValueId> weights = ValueArg(*masked, i), keep = ValueArg(*masked, 1 - i);
    if (!weights.has_value() || !keep.has_value() || g.value(*keep).meta.dtype() != DType::kBool ||
        g.value(*weights).meta.dtype() == DType::kBool) {
      continue;
    }
    start.keep = *keep;
    start.spec.keep_scale = *factor;
    return weights;
  }
  return std::nullopt;
}

// The whole chain ending at node `final` (matmul(weights, v)), or nullopt.
std::optional<Match> MatchAttention(const Graph& g, const Uses& u, const Node& final, bool can_draw) {
  if (final.op->name() != "matmul" || final.inplace) return std::nullopt;
  std::optional<ValueId> weights = ValueArg(final, 0);
  const std::optional<ValueId> v = ValueArg(final, 1);
  if (!weights.has_value() || !v.has_value() || !u.Private(*weights)) return std::nullopt;
  Match start;
  if (std::optional<ValueId> undropped = BelowDropout(g, u, *weights, can_draw, start)) weights = undropped;
  if (!u.Private(*weights)) return std::nullopt;
  const Node* softmax = Producer(g, *weights);
  if (softmax == nullptr || softmax->op->name() != "softmax" || softmax->inplace) return std::nullopt;
  const std::optional<double> dim = NumberArg(*softmax, 1);
  const auto* dtype = std::get_if<ArgValue>(&softmax->args[2].content);
  if (!dim.has_value() || (*dim != -1 && *dim != LastDim(g, *weights)) || dtype == nullptr ||
      !std::holds_alternative<None>(*dtype)) {
    return std::nullopt;
  }
  Match m;
  const std::optional<ValueId> scores = ValueArg(*softmax, 0);
  if (!scores.has_value() || !MatchScores(g, u, *scores, false, start, m)) return std::nullopt;
  if (m.spec.mask_kind != kAttentionNoMask && m.spec.mask_kind != kAttentionAddMask && m.spec.post_scale <= 0) {
    return std::nullopt;  // a negative factor after -inf gives +inf
  }
  if (m.spec.mask_kind == kAttentionNoMask) {  // no mask: every factor scales the product
    m.spec.scale *= m.spec.post_scale;
    m.spec.post_scale = 1.0;
  }
  m.v = *v;
  return m;
}

// Whether `t`'s transpose(-2, -1) node reads `k` (kT is a view of k).
std::optional<ValueId> TransposedFrom(const Graph& g, ValueId kt) {
  const Node* n = Producer(g, kt);
  if (n == nullptr || n->op->name() != "transpose") return std::nullopt;
  const std::optional<ValueId> k = ValueArg(*n, 0);
  const std::optional<double> d0 = NumberArg(*n, 1), d1 = NumberArg(*n, 2);
  if (!k.has_value() || !d0.has_value() || !d1.has_value()) return std::nullopt;
  const int rank = static_cast<int>(g.value(*k).meta.ndim());
  auto norm = [&](double d) { return d < 0 ? static_cast<int>(d) + rank : static_cast<int>(d); };
  const int a = norm(*d0), b = norm(*d1);
  if (std::min(a, b) != rank - 2 || std::max(a, b) != rank - 1) return std::nullopt;
  return *k;
}

// Dropout node `n` written out as dropout's decomposition (graph/ops_nn.cc) makes it: rand of
// the input's shape, dtype and `device`, kept where >= p, then input * keep * 1 / (1 - p). So a
// fused attention node can read the keep mask while the draw stays where dropout made it among
// the graph's random nodes (the same numbers as eager). Maps n's output to the product, which is
// dead once the fused node replaces its reader. Returns the keep mask's value.
absl::StatusOr<ValueId> EmitDropout(const Graph& g, const Node& n, Device device, std::vector<ValueId>& map,
                                    Graph& out) {
  const OpDef& rand = *OpRegistry::Get().Find("rand");
  const OpDef& ge = *OpRegistry::Get().Find("ge");
  const OpDef& mul = *OpRegistry::Get().Find("mul");
  const ValueId input = *ValueArg(n, 0);
  const Tensor& weights = g.value(input).meta;
  const Dims sizes(weights.sizes().begin(), weights.sizes().end());
  const double p = *DropoutProbability(n);
  std::vector<GraphArg> draw_args{GraphArg{ArgValue(sizes)}, GraphArg{ArgValue(weights.dtype())},
                                  GraphArg{ArgValue(device)}};
  DT_ASSIGN_OR_RETURN(OpResult u, CallOp(rand, OpArgs({sizes, weights.dtype(), Device::Meta()})));
  const ValueId drawn = out.AddNode(&rand, std::move(draw_args), {u.at(0)}, false, n.location)[0];
  DT_ASSIGN_OR_RETURN(OpResult keep, CallOp(ge, OpArgs({u.at(0), Scalar::Float(p)})));
  const ValueId kept_at =
      out.AddNode(&ge, {GraphArg::Value(drawn), GraphArg{ArgValue(Scalar::Float(p))}}, {keep.at(0)}, false,
                  n.location)[0];
  DT_ASSIGN_OR_RETURN(OpResult kept, CallOp(mul, OpArgs({weights, keep.at(0)})));
  const ValueId product = out.AddNode(&mul, {GraphArg::Value(map[input]), GraphArg::Value(kept_at)}, {kept.at(0)},
                                      false, n.location)[0];
  const ArgValue scale = Scalar::Float(1.0 / (1.0 - p));
  DT_ASSIGN_OR_RETURN(OpResult scaled, CallOp(mul, OpArgs({kept.at(0), scale})));
  map[n.outputs[0]] =
      out.AddNode(&mul, {GraphArg::Value(product), GraphArg{scale}}, {scaled.at(0)}, false, n.location)[0];
  return kept_at;
}

// Adds the fused node (and kT's transpose when kT is not a transpose of k, and dropout's draw) to
// `out`; nullopt when the kernel does not take the operands or the result would differ in shape
// or dtype.
absl::StatusOr<std::optional<ValueId>> AddFused(const Graph& g, const Match& m, const Node& final,
                                                const std::vector<ValueId>& map, Graph& out) {
  const OpDef* transpose = OpRegistry::Get().Find("transpose");
  const OpDef* fused = OpRegistry::Get().Find("_fused_attention");
  const std::optional<ValueId> k_value = TransposedFrom(g, m.kt);
  Tensor k_meta;
  if (k_value.has_value()) {
    k_meta = g.value(*k_value).meta;
  } else {
    DT_ASSIGN_OR_RETURN(OpResult t, CallOp(*transpose, OpArgs({g.value(m.kt).meta, Scalar::Int(-2), Scalar::Int(-1)})));
    k_meta = t.at(0);
  }
  const Tensor& q_meta = g.value(m.q).meta;
  const Tensor* mask_meta = m.mask >= 0 ? &g.value(m.mask).meta : nullptr;
  const Tensor* keep_meta = m.keep >= 0         ? &g.value(m.keep).meta
                            : m.drawn_keep >= 0 ? &out.value(m.drawn_keep).meta
                                                : nullptr;
  if (!AttentionKernelMisfit(q_meta, k_meta, g.value(m.v).meta, mask_meta, keep_meta, m.spec).empty()) {
    return std::nullopt;
  }
  const ArgValue mask_arg = mask_meta != nullptr ? ArgValue(*mask_meta) : ArgValue(None{});
  const ArgValue keep_arg = keep_meta != nullptr ? ArgValue(*keep_meta) : ArgValue(None{});
  std::vector<ArgValue> metas{q_meta, k_meta, g.value(m.v).meta, mask_arg, Scalar::Float(m.spec.scale),
                              Scalar::Int(m.spec.mask_kind), Scalar::Float(m.spec.post_scale), Scalar::Bool(false),
                              keep_arg, Scalar::Float(m.spec.keep_scale)};
  DT_ASSIGN_OR_RETURN(OpResult result, CallOp(*fused, OpArgs(metas)));
  const Tensor& expected = g.value(final.outputs[0]).meta;
  if (result.at(0).sizes() != expected.sizes() || result.at(0).dtype() != expected.dtype()) return std::nullopt;

  ValueId k = k_value.has_value() ? map[*k_value] : -1;
  if (!k_value.has_value()) {
    k = out.AddNode(transpose, {GraphArg::Value(map[m.kt]), GraphArg{ArgValue(Scalar::Int(-2))},
                                GraphArg{ArgValue(Scalar::Int(-1))}},
                    {k_meta}, false, final.location)[0];
  }
  std::vector<GraphArg> args{GraphArg::Value(map[m.q]), GraphArg::Value(k), GraphArg::Value(map[m.v])};
  args.push_back(m.mask >= 0 ? GraphArg::Value(map[m.mask]) : GraphArg{ArgValue(None{})});
  for (size_t i = 4; i < 8; ++i) args.push_back(GraphArg{metas[i]});
  args.push_back(m.keep >= 0         ? GraphArg::Value(map[m.keep])
                 : m.drawn_keep >= 0 ? GraphArg::Value(m.drawn_keep)
                                     : GraphArg{ArgValue(None{})});
  args.push_back(GraphArg{metas[9]});
  return out.AddNode(fused, std::move(args), {result.at(0)}, false, final.location)[0];
}

}  // namespace

absl::StatusOr<Graph> FuseAttention(const Graph& graph, std::optional<Device> device, int* fused) {
  if (fused != nullptr) *fused = 0;
  const Uses uses = CountUses(graph);
  // A dropout node's draw is written out with a baked shape on the graph's device.
  const bool can_draw = device.has_value() && !graph.HasSymbolicInputSizes();
  absl::flat_hash_map<int, Match> matches;
  absl::flat_hash_map<int, int> final_of_dropout;  // dropout node -> the final node of its match
  for (size_t i = 0; i < graph.nodes().size(); ++i) {
    std::optional<Match> m = MatchAttention(graph, uses, graph.nodes()[i], can_draw);
    if (!m.has_value()) continue;
    if (m->dropout_node >= 0) final_of_dropout[m->dropout_node] = static_cast<int>(i);
    matches.emplace(i, *m);
  }
  if (matches.empty()) return graph;
  Graph out;
  std::vector<ValueId> map(graph.num_values(), -1);
  for (size_t i = 0; i < graph.inputs().size(); ++i) {
    map[graph.inputs()[i]] = out.AddInput(graph.value(graph.inputs()[i]).meta, graph.input_sources()[i]);
  }
  int count = 0;
  for (size_t i = 0; i < graph.nodes().size(); ++i) {
    const Node& node = graph.nodes()[i];
    if (auto it = final_of_dropout.find(i); it != final_of_dropout.end()) {
      DT_ASSIGN_OR_RETURN(matches[it->second].drawn_keep, EmitDropout(graph, node, *device, map, out));
      continue;
    }
    if (auto it = matches.find(i); it != matches.end()) {
      DT_ASSIGN_OR_RETURN(std::optional<ValueId> id, AddFused(graph, it->second, node, map, out));
      if (id.has_value()) {
        map[node.outputs[0]] = *id;
        ++count;
        continue;
      }
    }
    CopyNode(graph, node, map, out);
  }
  std::vector<ValueId> outputs;
  for (ValueId v : graph.outputs()) outputs.push_back(map[v]);
  out.SetOutputs(std::move(outputs));
  out.EliminateDeadCode();
  if (fused != nullptr) *fused = count;
  return out;
}

std::vector<std::string> FusedAttentionSources(const Graph& graph) {
  std::vector<std::string> sources;
  for (const Node& n : graph.nodes()) {
    if (n.op->name() != "_fused_attention") continue;
    const std::optional<ValueId> q = ValueArg(n, 0), k = ValueArg(n, 1), v = ValueArg(n, 2);
    const std::optional<ValueId> mask = ValueArg(n, 3), keep = ValueArg(n, 8);
    const std::optional<double> scale = NumberArg(n, 4), kind = NumberArg(n, 5), post = NumberArg(n, 6);
    const std::optional<double> causal = NumberArg(n, 7);
    if (!q || !k || !v || !scale || !kind || !post || !causal) continue;
    const AttentionSpec spec{.mask_kind = static_cast<AttentionMask>(*kind), .scale = *scale, .post_scale = *post,
                             .causal = *causal != 0};
    const Tensor& qm = graph.value(*q).meta;
    const Tensor& vm = graph.value(*v).meta;
    if (!AttentionKernelMisfit(qm, graph.value(*k).meta, vm, mask ? &graph.value(*mask).meta : nullptr,
                               keep ? &graph.value(*keep).meta : nullptr, spec)
             .empty()) {
      continue;
    }
    std::string source =
        AttentionKernelSource(qm.dtype(), static_cast<int>(qm.size(qm.ndim() - 1)),
                              static_cast<int>(vm.size(vm.ndim() - 1)), spec.mask_kind, spec.causal, keep.has_value());
    if (std::find(sources.begin(), sources.end(), source) == sources.end()) sources.push_back(std::move(source));
  }
  return sources;
}

}  // namespace dt::jit
