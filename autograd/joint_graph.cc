#include "autograd/joint_graph.h"

#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "autograd/partition.h"
#include "graph/decompose.h"
#include "graph/graph_recorder.h"
#include "runtime/errors.h"

namespace dt {
namespace {

absl::Status NotWhole(absl::string_view why) {
  return Error(ErrorKind::kNotImplemented, absl::StrCat("the backward of this graph cannot be compiled: ", why));
}

std::vector<ValueId> TensorArgs(const Node& node) {
  std::vector<ValueId> ids;
  for (const GraphArg& a : node.args) {
    if (const auto* v = std::get_if<ValueId>(&a.content)) ids.push_back(*v);
    if (const auto* vs = std::get_if<std::vector<ValueId>>(&a.content)) ids.insert(ids.end(), vs->begin(), vs->end());
  }
  return ids;
}

// Turns the Call()s of derivative formulas, run on meta tensors, into nodes of the backward
// graph. A forward value a formula reads becomes a backward input the first time it is read
// (it is saved); everything else must have been made by a recorded call.
//
// Inline (AppendBackward), the formulas record into the forward graph itself, after its nodes,
// and a forward value they read is that value.
class BackwardRecorder final : public GraphRecorder {
 public:
  BackwardRecorder(const Graph& forward, Graph& backward, Device device, bool inline_into_forward)
      : GraphRecorder(backward, SourceLocation(), device), forward_(forward), inline_(inline_into_forward) {}

  const std::vector<ValueId>& saved() const { return saved_; }

 protected:
  absl::StatusOr<ValueId> Unknown(const Tensor& meta) override {
    for (size_t v = 0; v < forward_.num_values(); ++v) {
      if (!SameMetaTensor(forward_.value(static_cast<ValueId>(v)).meta, meta)) continue;
      if (inline_) return static_cast<ValueId>(v);
      const ValueId id = out().AddInput(meta, absl::StrCat("saved[", saved_.size(), "]"));
      saved_.push_back(static_cast<ValueId>(v));
      Know(meta, id);
      return id;
    }
    return Error(ErrorKind::kRuntime, "a derivative formula made a tensor outside Call()");
  }

 private:
  const Graph& forward_;
  const bool inline_;
  std::vector<ValueId> saved_;  // forward values, in backward-input order after the gradients
};

// While alive, Call() records into `recorder`.
class Recording {
 public:
  explicit Recording(CallRecorder* recorder) : outer_(SetCallRecorder(recorder)) {}
  ~Recording() { SetCallRecorder(outer_); }
  Recording(const Recording&) = delete;
  Recording& operator=(const Recording&) = delete;

 private:
  CallRecorder* outer_;
};

// The engine's per-edge work: a gradient computed at the broadcast shape summed back to the
// argument's shape and cast to its dtype.
absl::StatusOr<Tensor> FitTo(Tensor g, const Tensor& arg) {
  if (g.sizes() != arg.sizes()) {
    const int64_t lead = g.ndim() - arg.ndim();
    if (lead < 0) return NotWhole("a formula returned a gradient with fewer dims than its argument");
    Dims dims;
    for (int64_t d = 0; d < g.ndim(); ++d) {
      if (d < lead || (arg.size(d - lead) == 1 && g.size(d) != 1)) dims.push_back(d);
    }
    if (!dims.empty()) {
      DT_ASSIGN_OR_RETURN(g, Call("sum", {g, dims, Scalar::Bool(true), None{}}));
    }
    DT_ASSIGN_OR_RETURN(g, Call("reshape", {g, arg.sizes()}));
  }
  if (g.dtype() != arg.dtype()) {
    DT_ASSIGN_OR_RETURN(g, Call("_to", {g, arg.dtype()}));
  }
  return g;
}

class JointBuilder {
 public:
  JointBuilder(const Graph& forward, Device device)
      : forward_(forward), requires_grad_(forward.num_values(), false), grad_of_(forward.num_values()),
        recorder_(forward, joint_.backward, device, /*inline_into_forward=*/false) {}
  // Records into `graph`, of which `forward` is a copy (so reading it stays valid while nodes
  // are appended).
  JointBuilder(const Graph& forward, Graph& graph, Device device)
      : forward_(forward), requires_grad_(forward.num_values(), false), grad_of_(forward.num_values()),
        recorder_(forward, graph, device, /*inline_into_forward=*/true) {}

  absl::StatusOr<JointGraph> Build(const std::vector<bool>& input_requires_grad) {
    for (size_t i = 0; i < forward_.inputs().size(); ++i) {
      requires_grad_[forward_.inputs()[i]] = input_requires_grad[i];
      if (input_requires_grad[i]) joint_.inputs_requiring_grad.push_back(static_cast<int>(i));
    }
    DT_RETURN_IF_ERROR(PropagateRequiresGrad());
    DT_RETURN_IF_ERROR(SeedOutputGradients());
    if (joint_.differentiable_outputs.empty()) return Finish();  // nothing to differentiate
    const auto& nodes = forward_.nodes();
    for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) DT_RETURN_IF_ERROR(Differentiate(*it));
    DT_RETURN_IF_ERROR(SetBackwardOutputs());
    return Finish();
  }

  // Inline: the gradients of `root` (seeded with value `seed`) with respect to every forward
  // input that requires grad, appended to the graph; `requires_grad` flags every forward value
  // autograd follows (the tracer knows which nodes ran with grad mode on).
  absl::StatusOr<std::vector<std::optional<ValueId>>> BuildInline(ValueId root, ValueId seed,
                                                                  const std::vector<bool>& requires_grad) {
    if (forward_.HasSymbolicInputSizes()) return NotWhole("its sizes change between calls");
    for (const Node& node : forward_.nodes()) DT_RETURN_IF_ERROR(CheckDifferentiable(node));
    requires_grad_ = requires_grad;
    requires_grad_.resize(forward_.num_values(), false);
    DT_RETURN_IF_ERROR(CheckWrites());
    const Tensor seed_meta = forward_.value(seed).meta;
    recorder_.Know(seed_meta, seed);
    grad_of_[root] = seed_meta;
    const auto& nodes = forward_.nodes();
    for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) DT_RETURN_IF_ERROR(Differentiate(*it));
    std::vector<std::optional<ValueId>> grads;
    for (ValueId input : forward_.inputs()) {
      grads.emplace_back();
      if (!requires_grad_[input] || !grad_of_[input].has_value()) continue;
      DT_ASSIGN_OR_RETURN(grads.back(), recorder_.Find(*grad_of_[input]));
    }
    return grads;
  }

 private:
  absl::Status CheckDifferentiable(const Node& node) {
    // The backward graph is built for the traced values of run-time numbers and shapes.
    for (const GraphArg& a : node.args) {
      if (a.ReadsNumbers()) return NotWhole(absl::StrCat(node.op->name(), " reads a run-time number"));
    }
    return absl::OkStatus();
  }

  static bool WritesInPlace(const Node& node) {
    return node.inplace || node.op->has(kEagerUpdate) || node.op->has(kWritesArguments);
  }

  // The tensors `node` may write: an in-place op's self, every tensor operand of an op that
  // writes its arguments (all of them: which ones it writes is the op's business).
  static std::vector<ValueId> WrittenBy(const Node& node) {
    const auto* self = std::get_if<ValueId>(&node.args[0].content);
    if (node.inplace && self != nullptr) return {*self};
    return TensorArgs(node);
  }

  // Formulas read values as they are when backward runs, so a write may not touch anything a
  // node autograd follows reads or makes (eagerly, a version check would catch that). Writes
  // to bookkeeping no such node sees (batch norm's running statistics and batch count, a
  // step counter) are fine: they happen in the forward graph, after the graph's reads, as
  // eagerly. Needs requires_grad_ filled in.
  absl::Status CheckWrites() {
    const auto& nodes = forward_.nodes();
    for (const Node& writer : nodes) {
      if (!WritesInPlace(writer) || WritesOnlyAFreshBuffer(writer)) continue;
      std::vector<ValueId> written;
      for (ValueId v : WrittenBy(writer)) {
        if (writer.inplace && requires_grad_[v]) {
          return NotWhole(absl::StrCat(writer.op->name(), " changes a tensor autograd follows in place"));
        }
        if (!requires_grad_[v]) written.push_back(v);  // the others are read (batch statistics)
      }
      for (const Node& reader : nodes) {
        if (&reader == &writer || !FollowedByAutograd(reader)) continue;
        std::vector<ValueId> touched = TensorArgs(reader);
        touched.insert(touched.end(), reader.outputs.begin(), reader.outputs.end());
        for (ValueId w : written) {
          for (ValueId t : touched) {
            if (forward_.value(w).meta.SharesStorageWith(forward_.value(t).meta)) {
              return NotWhole(absl::StrCat(writer.op->name(), " changes a tensor in place that ", reader.op->name(),
                                           "'s derivative may read"));
            }
          }
        }
      }
    }
    return absl::OkStatus();
  }

  // `_setitem(zeros, ...)` in a composite's body: the written tensor was made for this write
  // and nothing else reads it, so its value before the write is never seen.
  bool WritesOnlyAFreshBuffer(const Node& writer) const {
    if (writer.inplace) return false;
    const auto* target = std::get_if<ValueId>(&writer.args[0].content);
    if (target == nullptr) return false;
    const int producer = forward_.value(*target).producer;
    if (producer < 0 || forward_.nodes()[producer].op->kind != OpKind::kCreation) return false;
    for (const Node& n : forward_.nodes()) {
      if (&n == &writer) continue;
      for (ValueId v : TensorArgs(n)) {
        if (forward_.value(v).meta.SharesStorageWith(forward_.value(*target).meta) &&
            forward_.value(v).producer != &writer - &forward_.nodes()[0]) {
          return false;
        }
      }
    }
    return true;
  }

  bool FollowedByAutograd(const Node& node) const {
    for (ValueId v : TensorArgs(node)) {
      if (requires_grad_[v]) return true;
    }
    return false;
  }

  absl::Status PropagateRequiresGrad() {
    if (forward_.HasSymbolicInputSizes()) return NotWhole("its sizes change between calls");
    for (const Node& node : forward_.nodes()) {
      DT_RETURN_IF_ERROR(CheckDifferentiable(node));
      bool any = false;
      for (ValueId v : TensorArgs(node)) any = any || requires_grad_[v];
      if (!any || node.op->kind == OpKind::kCreation) continue;
      for (ValueId out : node.outputs) requires_grad_[out] = IsFloating(forward_.value(out).meta.dtype());
    }
    return CheckWrites();
  }

  bool IsInput(ValueId v) const { return forward_.value(v).producer < 0; }

  absl::Status SeedOutputGradients() {
    const std::vector<ValueId>& outputs = forward_.outputs();
    for (size_t k = 0; k < outputs.size(); ++k) {
      const ValueId v = outputs[k];
      if (!requires_grad_[v] || IsInput(v) || grad_of_[v].has_value()) continue;
      const Tensor& meta = forward_.value(v).meta;
      for (ValueId input : forward_.inputs()) {
        if (forward_.value(input).meta.SharesStorageWith(meta)) {
          return NotWhole(absl::StrCat("output ", k, " is a view of an input"));
        }
      }
      for (int other : joint_.differentiable_outputs) {
        if (forward_.value(outputs[other]).meta.SharesStorageWith(meta)) {
          return NotWhole(absl::StrCat("outputs ", other, " and ", k, " share memory"));
        }
      }
      const Tensor dense = Tensor::Empty(meta.sizes(), meta.dtype(), Device::Meta());
      const ValueId g = joint_.backward.AddInput(dense, absl::StrCat("grad[", k, "]"));
      recorder_.Know(dense, g);
      grad_of_[v] = dense;
      joint_.differentiable_outputs.push_back(static_cast<int>(k));
    }
    return absl::OkStatus();
  }

  // The gradient flowing into `v`, zeros where none did (formulas never see undefined ones).
  absl::StatusOr<Tensor> GradientOf(ValueId v) {
    if (grad_of_[v].has_value()) return *grad_of_[v];
    const Tensor& meta = forward_.value(v).meta;
    Recording on(&recorder_);
    return Call("full", {meta.sizes(), Scalar::Int(0), meta.dtype(), Device::Meta()});
  }

  OpArgs MetaArgs(const Node& node) const {
    std::vector<ArgValue> values;
    for (const GraphArg& a : node.args) {
      if (const auto* v = std::get_if<ValueId>(&a.content)) {
        values.push_back(forward_.value(*v).meta);
      } else if (const auto* vs = std::get_if<std::vector<ValueId>>(&a.content)) {
        std::vector<Tensor> metas;
        for (ValueId id : *vs) metas.push_back(forward_.value(id).meta);
        values.push_back(std::move(metas));
      } else {
        values.push_back(std::get<ArgValue>(a.content));
      }
    }
    return OpArgs(std::move(values));
  }

  absl::Status Differentiate(const Node& node) {
    bool flows = false;
    for (ValueId out : node.outputs) flows = flows || grad_of_[out].has_value();
    if (!flows) return absl::OkStatus();
    std::vector<bool> wanted(node.args.size(), false);
    for (size_t i = 0; i < node.args.size(); ++i) {
      if (const auto* v = std::get_if<ValueId>(&node.args[i].content)) wanted[i] = requires_grad_[*v];
      if (const auto* vs = std::get_if<std::vector<ValueId>>(&node.args[i].content)) {
        for (ValueId id : *vs) wanted[i] = wanted[i] || requires_grad_[id];
      }
    }
    if (node.op->derivative.fn == nullptr) {
      return NotWhole(absl::StrFormat("the derivative of %s is not implemented", node.op->name()));
    }
    std::vector<Tensor> grads;
    for (ValueId out : node.outputs) {
      DT_ASSIGN_OR_RETURN(Tensor g, GradientOf(out));
      grads.push_back(std::move(g));
    }
    const OpArgs args = MetaArgs(node);
    std::vector<Tensor> outputs;
    for (ValueId out : node.outputs) outputs.push_back(forward_.value(out).meta);
    const GradContext context{*node.op, args, outputs, grads, wanted};
    Recording on(&recorder_);
    DT_ASSIGN_OR_RETURN(ArgGrads arg_grads, node.op->derivative.fn(context));
    for (size_t i = 0; i < node.args.size(); ++i) {
      if (!wanted[i] || i >= arg_grads.size()) continue;
      if (const auto* v = std::get_if<ValueId>(&node.args[i].content)) {
        if (const Tensor* g = std::get_if<Tensor>(&arg_grads[i])) DT_RETURN_IF_ERROR(Accumulate(*v, *g));
      } else if (const auto* vs = std::get_if<std::vector<ValueId>>(&node.args[i].content)) {
        const auto* gs = std::get_if<std::vector<Tensor>>(&arg_grads[i]);
        for (size_t j = 0; gs != nullptr && j < vs->size() && j < gs->size(); ++j) {
          DT_RETURN_IF_ERROR(Accumulate((*vs)[j], (*gs)[j]));
        }
      }
    }
    return absl::OkStatus();
  }

  // Adds a formula's gradient for forward value `v` (under an active Recording).
  absl::Status Accumulate(ValueId v, const Tensor& g) {
    if (!g.defined() || !requires_grad_[v]) return absl::OkStatus();
    DT_ASSIGN_OR_RETURN(Tensor fitted, FitTo(g, forward_.value(v).meta));
    if (grad_of_[v].has_value()) {
      DT_ASSIGN_OR_RETURN(fitted, Call("add", {*grad_of_[v], fitted}));
    }
    grad_of_[v] = fitted;
    return absl::OkStatus();
  }

  absl::Status SetBackwardOutputs() {
    std::vector<ValueId> outputs;
    for (int position : joint_.inputs_requiring_grad) {
      const ValueId v = forward_.inputs()[position];
      if (!grad_of_[v].has_value()) continue;  // none flows: the input's edge gets no gradient
      DT_ASSIGN_OR_RETURN(ValueId id, recorder_.Find(*grad_of_[v]));
      outputs.push_back(id);
      joint_.grad_inputs.push_back(position);
    }
    joint_.backward.SetOutputs(std::move(outputs));
    return absl::OkStatus();
  }

  absl::StatusOr<JointGraph> Finish() {
    auto forward = std::make_shared<Graph>(forward_);
    std::vector<ValueId> outputs = forward_.outputs();
    joint_.num_user_outputs = static_cast<int>(outputs.size());
    for (ValueId v : recorder_.saved()) {
      const Tensor& meta = forward_.value(v).meta;
      if (IsInput(v)) {
        joint_.saved.push_back(SavedValue{true, forward_.value(v).input_index});
        continue;
      }
      joint_.saved.push_back(SavedValue{false, static_cast<int>(outputs.size())});
      outputs.push_back(v);
      joint_.save_everything_bytes += meta.numel() * ItemSize(meta.dtype());
    }
    joint_.saved_bytes = joint_.save_everything_bytes;
    forward->SetOutputs(std::move(outputs));
    joint_.forward = std::move(forward);
    return std::move(joint_);
  }

  const Graph& forward_;
  std::vector<bool> requires_grad_;
  std::vector<std::optional<Tensor>> grad_of_;  // meta tensors the recorder knows
  JointGraph joint_;
  BackwardRecorder recorder_;
};

}  // namespace

absl::StatusOr<JointGraph> BuildJointGraph(const Graph& traced, const std::vector<bool>& input_requires_grad,
                                           Device device, bool min_cut) {
  if (input_requires_grad.size() != traced.inputs().size()) {
    return absl::InternalError("BuildJointGraph: one requires_grad flag per input expected");
  }
  // Composites without a formula are differentiated through their bodies, as eagerly; nested
  // ones appear as nodes of the expansion, so expand until none is left.
  Graph expanded = traced;
  for (int round = 0; round < 8; ++round) {
    DT_ASSIGN_OR_RETURN(Graph next, Decompose(expanded, ExpandComposites::kWithoutDerivative, device));
    const bool changed = next.nodes().size() != expanded.nodes().size();
    expanded = std::move(next);
    if (!changed) break;
  }
  JointBuilder builder(expanded, device);
  DT_ASSIGN_OR_RETURN(JointGraph joint, builder.Build(input_requires_grad));
  if (joint.differentiable_outputs.empty()) return joint;
  joint.backward.EliminateDeadCode();
  if (min_cut) DT_RETURN_IF_ERROR(Partition(joint));
  return joint;
}

absl::StatusOr<std::vector<std::optional<ValueId>>> AppendBackward(Graph& graph, ValueId root, ValueId seed,
                                                                   const std::vector<bool>& requires_grad,
                                                                   Device device) {
  const Graph forward = graph;  // read while the formulas' nodes are appended to `graph`
  JointBuilder builder(forward, graph, device);
  return builder.BuildInline(root, seed, requires_grad);
}

}  // namespace dt
