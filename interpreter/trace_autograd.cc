// interpreter/trace_autograd.cc: autograd inside traces.
//
// A trace whose inputs autograd follows ends in a joint forward/backward split
// (autograd/joint_graph.h), so the compiled frame returns tensors with a backward of their own
// instead of running eagerly. A trace that calls backward() itself (a whole training step:
// forward, loss.backward(), the optimizer's update) instead appends the gradients to its own
// graph (AppendBackward) and accumulates them into the leaves' .grad, which the trace follows
// like an attribute and stores after the graph, as the eager engine would.
#include <Python.h>

#include <cstdlib>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "graph/graph_recorder.h"
#include "interpreter/py_types.h"
#include "interpreter/tracer_internal.h"
#include "runtime/autograd_meta.h"

namespace dt::interpreter::trace {

absl::Status Tracer::SplitForAutograd(TraceResult& r) {
  GuardGradSlotsDistinct();
  if (grad_inputs_.empty()) return absl::OkStatus();
  if (backward_at_node_.has_value()) {
    const std::vector<ValueId>& outputs = graph_->outputs();
    for (size_t k = 0; k < outputs.size(); ++k) {
      const ValueId v = outputs[k];
      if (!grad_values_.contains(v) || graph_->value(v).producer < 0) continue;
      if (v >= backward_first_value_) {
        return Unsupported("a tensor that requires grad, computed after backward() in the same compiled function, "
                           "leaves it (its backward would need a second graph)");
      }
      r.freed_graph_outputs.push_back(static_cast<int>(k));
    }
    return absl::OkStatus();
  }
  std::vector<bool> requires_grad;
  std::optional<Device> device;
  for (ValueId v : graph_->inputs()) {
    const bool follows = grad_inputs_.contains(v);
    requires_grad.push_back(follows);
    if (follows && !device.has_value()) device = value_device_.at(v);
  }
  // DYNTRACE_PARTITIONER=save-all keeps every value the formulas read (to measure the min cut).
  const char* partitioner = std::getenv("DYNTRACE_PARTITIONER");
  const bool min_cut = partitioner == nullptr || std::string_view(partitioner) != "save-all";
  absl::StatusOr<JointGraph> built = BuildJointGraph(*graph_, requires_grad, *device, min_cut);
  if (!built.ok()) return Unsupported(absl::StrCat("compiled autograd: ", built.status().message()));
  JointGraph joint = *std::move(built);
  if (joint.differentiable_outputs.empty()) return absl::OkStatus();  // no output depends on them
  // Graphs serve any sizes their guards allow, but the backward graph is built for these (its
  // formulas sum and reshape to them): the entry serves exactly these sizes.
  for (size_t i = 0; i < graph_->inputs().size(); ++i) {
    const Tensor& meta = graph_->value(graph_->inputs()[i]).meta;
    for (int64_t d = 0; d < meta.ndim(); ++d) {
      guards_.Add(LeafGuard::TensorSize(input_sources_[i], d, meta.size(d), Here()));
    }
  }
  r.graph = joint.forward;
  r.joint = std::make_shared<const JointGraph>(std::move(joint));
  return absl::OkStatus();
}

namespace {

bool ReadsAnyOf(const std::vector<GraphArg>& args, const absl::flat_hash_set<ValueId>& values) {
  for (const GraphArg& a : args) {
    if (const ValueId* v = std::get_if<ValueId>(&a.content); v != nullptr && values.contains(*v)) return true;
    if (const auto* vs = std::get_if<std::vector<ValueId>>(&a.content)) {
      for (ValueId v : *vs) {
        if (values.contains(v)) return true;
      }
    }
  }
  return false;
}

}  // namespace

bool Tracer::ReadsGradValue(const std::vector<GraphArg>& args) const { return ReadsAnyOf(args, grad_values_); }

bool Tracer::ExpandsForAutograd(const OpDef& op, const std::vector<GraphArg>& args) {
  if (op.kind != OpKind::kComposite || op.derivative.fn != nullptr || !ReadsGradValue(args)) return false;
  for (const GraphArg& a : args) {
    if (a.ReadsNumbers()) return false;  // a body is recorded for fixed numbers
  }
  return TracedGradMode();
}

namespace {

// Records a composite's body call by call, nested composites without a formula through their
// own bodies (graph/decompose.cc does the same for a finished graph).
class BodyRecorder final : public GraphRecorder {
 public:
  using GraphRecorder::GraphRecorder;
  absl::StatusOr<OpResult> Record(const OpDef& op, const OpArgs& args) override {
    // A composite that writes its arguments (batch norm's running statistics) is one node: on
    // meta tensors its body would compute the new values and never write them.
    if (op.kind == OpKind::kComposite && op.derivative.fn == nullptr && !op.has(kWritesArguments)) {
      return CallOp(op, args);
    }
    return GraphRecorder::Record(op, args);
  }
};

}  // namespace

// nullopt: a result is not a tensor the body made with Call(), and the op is
// recorded as one node after all; the body's nodes are dropped again (Truncate, as a rollback
// does; their values stay unused).
absl::StatusOr<std::optional<std::vector<Sym>>> Tracer::EmitBody(const OpDef& op, const OpArgs& args,
                                                                  const std::vector<GraphArg>& graph_args,
                                                                  Device device) {
  const size_t first_new = graph_->nodes().size();
  BodyRecorder recorder(*graph_, HereLocation(), device);
  recorder.KeepDifferentiableWhole();
  for (size_t i = 0; i < graph_args.size(); ++i) {
    if (const ValueId* v = std::get_if<ValueId>(&graph_args[i].content)) recorder.Know(args.tensor(i), *v);
    if (const auto* vs = std::get_if<std::vector<ValueId>>(&graph_args[i].content)) {
      const auto& metas = std::get<std::vector<Tensor>>(args[i]);
      for (size_t j = 0; j < vs->size(); ++j) recorder.Know(metas[j], (*vs)[j]);
    }
  }
  CallRecorder* outer = SetCallRecorder(&recorder);
  absl::StatusOr<OpResult> results = CallOp(op, args);
  SetCallRecorder(outer);
  if (!results.ok()) {
    graph_->Truncate(first_new);
    return Raises(absl::StrCat("the traced code raises: ", results.status().message()));
  }
  std::vector<ValueId> ids;
  for (const Tensor& meta : *results) {
    absl::StatusOr<ValueId> id = recorder.Find(meta);
    if (!id.ok() || graph_->value(*id).producer < static_cast<int>(first_new)) {
      graph_->Truncate(first_new);
      return std::nullopt;
    }
    ids.push_back(*id);
  }
  touched_tensors_ = true;
  for (size_t n = first_new; n < graph_->nodes().size(); ++n) {
    const Node& node = graph_->nodes()[n];
    const bool follows = node.op->kind != OpKind::kCreation && ReadsGradValue(node.args);
    for (ValueId out : node.outputs) {
      value_device_[out] = device;
      if (follows && IsFloating(graph_->value(out).meta.dtype())) grad_values_.insert(out);
    }
  }
  std::vector<Sym> syms;
  for (size_t i = 0; i < ids.size(); ++i) {
    Sym s = MakeSym(SymKind::kTensor);
    s->value = ids[i];
    s->meta = (*results)[i];
    syms.push_back(s);
  }
  return syms;
}

// Inside a trace that ran backward(), autograd is followed value by value, so a detached value
// is one it no longer follows. Before that, the whole graph is split for autograd afterwards
// (SplitForAutograd), which has no notion of a value cut off from its history.
bool Tracer::CanDetach(const Sym& tensor) const {
  return !grad_values_.contains(tensor->value) || backward_at_node_.has_value();
}

// `x.detach()`: the same data, which autograd does not follow. A value it never followed is
// given back as it is (its sizes may be symbolic); after backward() (sizes fixed), a view.
absl::StatusOr<Sym> Tracer::Detach(const Sym& tensor) {
  if (!grad_values_.contains(tensor->value)) return tensor;
  if (!CanDetach(tensor)) return Unsupported("Tensor.detach of a value autograd follows, before backward()");
  const Dims sizes(tensor->meta.sizes().begin(), tensor->meta.sizes().end());
  DT_ASSIGN_OR_RETURN(std::vector<Sym> outs, Emit(OpRegistry::Get().Find("view"), {tensor->meta, sizes},
                                                  {GraphArg::Value(tensor->value), GraphArg{ArgValue(sizes)}}, false));
  grad_values_.erase(outs[0]->value);
  return outs[0];
}

// Whether a derivative formula would read `v` when backward runs: the output of an op whose
// formula uses its outputs, or an operand of one, autograd follows, whose formula uses its inputs
// (a composite recorded whole counts as reading everything).
bool Tracer::AutogradSaves(ValueId v) const {
  const auto& nodes = graph_->nodes();
  const int producer = graph_->value(v).producer;
  if (producer >= 0 && ReadsGradValue(nodes[producer].args) && nodes[producer].op->derivative.uses_outputs) return true;
  for (const Node& n : nodes) {
    if (!ReadsGradValue(n.args)) continue;
    bool reads_v = false;
    for (const GraphArg& a : n.args) {
      if (const auto* id = std::get_if<ValueId>(&a.content)) reads_v = reads_v || *id == v;
      if (const auto* ids = std::get_if<std::vector<ValueId>>(&a.content)) {
        for (ValueId id : *ids) reads_v = reads_v || id == v;
      }
    }
    if (reads_v && (n.op->derivative.fn == nullptr || n.op->derivative.uses_inputs)) return true;
  }
  return false;
}

// An in-place change to a value autograd follows is rewritten as the op out of place, the
// tensor's Sym rebound to the result (as AOTAutograd functionalises): the joint graph then never
// sees a write, and formulas read the value as it was when their op ran, as eagerly. Only for a
// tensor the graph made whose storage no other value shares (no view can see the change), before
// backward(), and not one a formula saves (eagerly backward() would raise: the frame runs eagerly
// and raises the same).
bool Tracer::Functionalizes(const Sym& target) const {
  const ValueId v = target->value;
  if (!grad_values_.contains(v) || backward_at_node_.has_value() || graph_->value(v).producer < 0) return false;
  const Tensor& meta = graph_->value(v).meta;
  for (size_t other = 0; other < graph_->num_values(); ++other) {
    if (static_cast<ValueId>(other) != v && graph_->value(static_cast<ValueId>(other)).meta.SharesStorageWith(meta)) {
      return false;
    }
  }
  return !AutogradSaves(v);
}

absl::StatusOr<Sym> Tracer::EmitInPlace(const OpDef* op, std::vector<ArgValue> metas, std::vector<GraphArg> graph_args,
                                        const Sym& target) {
  if (TracedGradMode() && Functionalizes(target)) {
    // The out-of-place result must be what the write would leave: the target's sizes and dtype.
    absl::StatusOr<OpResult> probe = CallOp(*op, OpArgs(metas));
    const Tensor& t = target->meta;
    if (probe.ok() && probe->size() == 1 && probe->at(0).sizes() == t.sizes() && probe->at(0).dtype() == t.dtype()) {
      DT_ASSIGN_OR_RETURN(std::vector<Sym> outs, Emit(op, std::move(metas), std::move(graph_args), false));
      Mutating(target);
      target->value = outs[0]->value;
      target->meta = outs[0]->meta;
      return target;
    }
  }
  DT_RETURN_IF_ERROR(Emit(op, std::move(metas), std::move(graph_args), true).status());
  return target;
}

// The results of an op follow autograd when it runs with grad mode on and reads a value that
// does. After backward(), changing such a value in place is refused (eagerly it is an error for
// a leaf, and for others it would need the graph split again).
absl::Status Tracer::NoteGradResults(const OpDef& op, const std::vector<GraphArg>& args, const std::vector<Sym>& results,
                                     bool inplace) {
  if (!untracked_grad_inputs_.empty() && op.kind != OpKind::kCreation && ReadsAnyOf(args, untracked_grad_inputs_) &&
      TracedGradMode()) {
    return Unsupported(absl::StrCat(op.name(), " with grad mode on reads a tensor that requires grad, first read "
                                    "while grad mode was off (autograd would have to follow it from there)"));
  }
  if (grad_values_.empty() || op.kind == OpKind::kCreation) return absl::OkStatus();
  if (!ReadsGradValue(args) || !TracedGradMode()) return absl::OkStatus();
  if (inplace && backward_at_node_.has_value()) {
    return Unsupported(absl::StrCat(op.name(), "_ with grad mode on changes a tensor that requires grad, after "
                                    "backward() in the same compiled function"));
  }
  for (const Sym& r : results) {
    if (IsFloating(r->meta.dtype())) grad_values_.insert(r->value);
  }
  return absl::OkStatus();
}

// The real leaf tensor behind a graph input `tensor` (borrowed), for .grad: other tensors'
// gradients are not stored by autograd.
absl::StatusOr<PyObject*> Tracer::LeafInputObject(const Sym& tensor, absl::string_view what) {
  auto it = input_objects_.find(tensor->value);
  if (tensor->source == nullptr || it == input_objects_.end() || graph_->value(tensor->value).producer >= 0) {
    return Unsupported(absl::StrCat(what, " of a tensor the compiled code computed"));
  }
  PyObject* real = it->second.get();
  if (!IsLeaf(py::Unwrap(real))) return Unsupported(absl::StrCat(what, " of a tensor that is not a leaf"));
  // A later call passing a non-leaf there would need its history followed.
  auto is_leaf = std::make_shared<const LeafGuard::RelationFn>(
      [source = tensor->source](const guards::FrameInputs& frame) -> std::optional<bool> {
        PyObject* value = source->Resolve(frame);
        return value != nullptr && py::IsTensor(value) && IsLeaf(py::Unwrap(value));
      });
  guards_.Add(LeafGuard::Relation(tensor->source, absl::StrCat(tensor->source->ToString(), ".is_leaf"), true,
                                  std::move(is_leaf), Here()));
  return real;
}

// The Sym that holds the .grad of the leaf input `tensor` stands for: one per real tensor,
// however many names the trace reached it by (a parameter read through its module, then through
// the optimizer's param groups), with guards that those names stay one object.
absl::StatusOr<Sym> Tracer::GradSlot(const Sym& tensor, absl::string_view what) {
  DT_ASSIGN_OR_RETURN(PyObject* real, LeafInputObject(tensor, what));
  auto [it, fresh] = grad_slots_.try_emplace(real, tensor);
  if (fresh) {
    grad_slot_order_.push_back(tensor);
  } else if (it->second != tensor) {
    guards_.Add(LeafGuard::Same(tensor->source, it->second->source, Here()));
  }
  return it->second;
}

// One guard that the tensors whose .grad the trace follows are still distinct objects (two of
// them becoming one would need one slot).
void Tracer::GuardGradSlotsDistinct() {
  if (grad_slot_order_.size() < 2) return;
  std::vector<SourceRef> sources;
  for (const Sym& s : grad_slot_order_) sources.push_back(s->source);
  auto distinct = std::make_shared<const LeafGuard::RelationFn>(
      [sources](const guards::FrameInputs& frame) -> std::optional<bool> {
        absl::flat_hash_set<PyObject*> seen;
        for (const SourceRef& source : sources) {
          PyObject* value = source->Resolve(frame);
          if (value == nullptr || !seen.insert(value).second) return false;
        }
        return true;
      });
  guards_.Add(LeafGuard::Relation(sources[0], absl::StrCat("the ", sources.size(), " tensors whose .grad is used are distinct"),
                                  true, std::move(distinct), Here()));
}

// `t.grad`: what the trace stored, else the real leaf's (None, guarded, or a tensor input).
absl::StatusOr<Sym> Tracer::GradOf(const Sym& named) {
  DT_ASSIGN_OR_RETURN(const Sym tensor, GradSlot(named, "Tensor.grad"));
  for (size_t i = 0; i < tensor->keys.size(); ++i) {
    if (PyUnicode_CompareWithASCIIString(tensor->keys[i].get(), "grad") == 0) return tensor->items[i];
  }
  PyObject* real = input_objects_.at(tensor->value).get();
  PyRef grad = PyRef::Steal(PyObject_GetAttrString(real, "grad"));
  if (!grad) {
    PyErr_Clear();
    return Unsupported("Tensor.grad could not be read");
  }
  const SourceRef source = guards::AttrSource(tensor->source, "grad");
  if (grad.get() == Py_None) {
    guards_.Add(LeafGuard::Identity(source, Py_None, Here()));
    return ConstSym(std::move(grad));
  }
  if (!py::IsTensor(grad.get())) return Unsupported("Tensor.grad that is not a tensor");
  return TensorInput(grad.get(), source);
}

// `t.grad = value` on a leaf input: followed on its Sym, stored after the graph.
absl::Status Tracer::StoreGrad(const Sym& named, const Sym& value) {
  DT_ASSIGN_OR_RETURN(const Sym tensor, GradSlot(named, "assigning Tensor.grad"));
  const bool none = value->kind == SymKind::kConst && value->obj.get() == Py_None;
  if (!none && (value->kind != SymKind::kTensor || value->meta.sizes() != tensor->meta.sizes() ||
                value->meta.dtype() != tensor->meta.dtype())) {
    return Unsupported("assigning Tensor.grad a value other than None or a tensor of the same shape and dtype");
  }
  static PyObject* const grad_name = PyUnicode_InternFromString("grad");
  Mutating(tensor);
  if (tensor->keys.empty()) stored_objects_.push_back(tensor);
  for (size_t i = 0; i < tensor->keys.size(); ++i) {
    if (PyUnicode_Compare(tensor->keys[i].get(), grad_name) == 0) {
      tensor->items[i] = value;
      return absl::OkStatus();
    }
  }
  tensor->keys.push_back(PyRef::Borrow(grad_name));
  tensor->items.push_back(value);
  return absl::OkStatus();
}

namespace {

bool IsNone(const Sym& s) { return s == nullptr || (s->kind == SymKind::kConst && s->obj.get() == Py_None); }

}  // namespace

// `root.backward(gradient=None, retain_graph=None, create_graph=False, inputs=None)`.
absl::StatusOr<Sym> Tracer::TraceBackward(const Sym& root, const std::vector<Sym>& args, const Kwargs& kwargs) {
  Sym gradient = args.empty() ? nullptr : args[0];
  if (args.size() > 2) return Unsupported("backward() with create_graph or inputs given by position");
  for (const auto& [name, value] : kwargs) {
    if (name == "gradient") gradient = value;
    else if (name == "retain_graph") continue;  // one backward per trace: nothing to retain for
    else if ((name == "create_graph" || name == "inputs") && IsNone(value)) continue;
    else if (name == "create_graph" && value->kind == SymKind::kConst && value->obj.get() == Py_False) continue;
    else return Unsupported(absl::StrCat("backward(", name, "=...) inside compiled code"));
  }
  if (backward_at_node_.has_value()) return Unsupported("a second backward() in one compiled function");
  if (!grad_values_.contains(root->value)) {
    return Raises("the traced code raises: element 0 of tensors does not require grad and does not have a grad_fn");
  }
  Sym seed;
  if (IsNone(gradient)) {
    if (root->meta.numel() != 1) return Raises("the traced code raises: grad can be implicitly created only for scalar outputs");
    DT_ASSIGN_OR_RETURN(seed, EmitNamed("full_like", {root, ConstSym(PyRef::Steal(PyLong_FromLong(1)))}));
  } else if (gradient->kind != SymKind::kTensor || gradient->meta.sizes() != root->meta.sizes()) {
    return Unsupported("backward(gradient) of another shape, or not a tensor");
  } else {
    seed = gradient;
  }
  // The gradient formulas are written for these sizes (as the joint split's are).
  for (size_t i = 0; i < graph_->inputs().size(); ++i) {
    const Tensor& meta = graph_->value(graph_->inputs()[i]).meta;
    for (int64_t d = 0; d < meta.ndim(); ++d) {
      guards_.Add(LeafGuard::TensorSize(input_sources_[i], d, meta.size(d), Here()));
    }
  }
  const size_t first_node = graph_->nodes().size();
  backward_first_value_ = static_cast<ValueId>(graph_->num_values());
  std::vector<bool> requires_grad(graph_->num_values(), false);
  for (ValueId v : grad_values_) requires_grad[v] = true;
  absl::StatusOr<std::vector<std::optional<ValueId>>> grads =
      AppendBackward(*graph_, root->value, seed->value, requires_grad, value_device_.at(root->value));
  if (!grads.ok()) return Unsupported(absl::StrCat("backward() inside compiled code: ", grads.status().message()));
  absl::flat_hash_map<ValueId, Sym> input_syms;
  for (const auto& [key, sym] : inputs_by_source_) input_syms[sym->value] = sym;
  for (size_t i = 0; i < grads->size(); ++i) {
    if (!(*grads)[i].has_value()) continue;
    const ValueId input = graph_->inputs()[i];
    auto it = input_syms.find(input);
    if (it == input_syms.end()) return Unsupported("backward() inside compiled code: an input without a source");
    Sym g = MakeSym(SymKind::kTensor);
    g->value = *(*grads)[i];
    g->meta = graph_->value(g->value).meta;
    value_device_[g->value] = value_device_.at(input);
    // The eager engine's accumulation (autograd/node.h AccumulateGradient): a copy when .grad is
    // unset, else a new tensor holding the sum. The copy protects tensors the gradient may
    // share storage with; a contiguous gradient whose storage only this backward made and no
    // other gradient shares is stored as it is (the copy would have the same layout and values).
    DT_ASSIGN_OR_RETURN(Sym held, GradOf(it->second));
    Sym accumulated;
    if (IsNone(held) && OwnsItsStorage(g->value, *grads)) {
      accumulated = g;
    } else if (IsNone(held)) {
      DT_ASSIGN_OR_RETURN(accumulated, EmitNamed("clone", {g}));
    } else {
      DT_ASSIGN_OR_RETURN(accumulated, EmitNamed("add", {held, g}));
    }
    DT_RETURN_IF_ERROR(StoreGrad(it->second, accumulated));
  }
  backward_at_node_ = first_node;
  return ConstSym(PyRef::Borrow(Py_None));
}

bool Tracer::OwnsItsStorage(ValueId gradient, const std::vector<std::optional<ValueId>>& gradients) const {
  const Tensor& meta = graph_->value(gradient).meta;
  if (!meta.is_contiguous()) return false;
  for (ValueId v = 0; v < backward_first_value_; ++v) {
    if (graph_->value(v).meta.SharesStorageWith(meta)) return false;
  }
  int uses = 0;  // add() hands one gradient to both operands: two leaves, one value
  for (const std::optional<ValueId>& other : gradients) {
    if (!other.has_value()) continue;
    if (*other == gradient) ++uses;
    else if (graph_->value(*other).meta.SharesStorageWith(meta)) return false;
  }
  return uses == 1;
}

}  // namespace dt::interpreter::trace
