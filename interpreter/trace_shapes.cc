// interpreter/trace_shapes.cc: sizes of intermediate tensors in terms of the inputs' sizes.
//
// When Python reads a size of a tensor the trace computed (`B, T, C = h.size()` after a layer
// norm), the size is written as the same expression of the inputs' sizes that the ops compute
// at run time, following each producer's shape rule (graph/op_registry.h): a symbolic input size
// stays symbolic, a static one is guarded exactly, and only the sizes the expression reads are
// guarded. An op without a rule returns null: the caller then guards every input size.
#include <Python.h>

#include "absl/strings/str_cat.h"
#include "graph/reduction.h"
#include "interpreter/tracer_internal.h"

namespace dt::interpreter::trace {
namespace {

std::optional<int64_t> IntArg(const Node& node, size_t i) {
  if (i >= node.args.size()) return std::nullopt;
  const auto* value = std::get_if<ArgValue>(&node.args[i].content);
  const auto* scalar = value ? std::get_if<Scalar>(value) : nullptr;
  if (scalar == nullptr || scalar->is_float()) return std::nullopt;
  return scalar->ToInt();
}

std::optional<int64_t> Normalized(std::optional<int64_t> dim, int64_t rank) {
  if (!dim) return std::nullopt;
  const int64_t d = *dim < 0 ? *dim + rank : *dim;
  if (d < 0 || d >= rank) return std::nullopt;
  return d;
}

// Two sizes that are the same at run time: one Sym, or the same constant.
bool SameSize(const Sym& a, const Sym& b) {
  if (a == b) return true;
  return a->kind == SymKind::kConst && b->kind == SymKind::kConst &&
         PyObject_RichCompareBool(a->obj.get(), b->obj.get(), Py_EQ) == 1;
}

Sym IntSym(int64_t v) { return ConstSym(py::PyRef::Steal(PyLong_FromLongLong(v))); }

}  // namespace

absl::StatusOr<Sym> Tracer::SymbolicSize(ValueId v, int64_t dim) {
  const GraphValue& value = graph_->value(v);
  if (value.producer < 0) {
    auto input = inputs_by_source_.find(graph_->input_sources()[value.input_index]);
    if (input == inputs_by_source_.end()) return Sym();
    return SizeOf(input->second, dim);
  }
  const Node& node = graph_->nodes()[value.producer];
  const int64_t rank = value.meta.ndim();
  if (node.inplace || dim < 0 || dim >= rank) return Sym();
  const OpDef& op = *node.op;
  if (op.kind == OpKind::kPointwise) return PointwiseSize(node, v, dim);
  if (op.kind == OpKind::kReduction) return ReducedSize(node, dim);
  const auto* first = node.args.empty() ? nullptr : std::get_if<ValueId>(&node.args[0].content);
  if (first == nullptr) return Sym();
  const int64_t in_rank = graph_->value(*first).meta.ndim();
  switch (op.shape_rule) {
    case ShapeRule::kUnknown: return Sym();
    case ShapeRule::kSameAsFirst: return SymbolicSize(*first, dim);
    case ShapeRule::kTranspose: {
      auto a = Normalized(IntArg(node, 1), in_rank), b = Normalized(IntArg(node, 2), in_rank);
      if (!a || !b) return Sym();
      return SymbolicSize(*first, dim == *a ? *b : dim == *b ? *a : dim);
    }
    case ShapeRule::kPermute: {
      const auto* order = std::get_if<ArgValue>(&node.args[1].content);
      const auto* dims = order ? std::get_if<Dims>(order) : nullptr;
      if (dims == nullptr || static_cast<int64_t>(dims->size()) != rank) return Sym();
      auto from = Normalized((*dims)[dim], in_rank);
      return from ? SymbolicSize(*first, *from) : Sym();
    }
    case ShapeRule::kUnsqueeze: {
      auto at = Normalized(IntArg(node, 1), rank);
      if (!at) return Sym();
      if (dim == *at) return IntSym(1);
      return SymbolicSize(*first, dim < *at ? dim : dim - 1);
    }
    case ShapeRule::kReshape: return ReshapedSize(node, dim);
    case ShapeRule::kMatmul: return MatmulSize(node, v, dim);
  }
  return Sym();
}

// Broadcasting: the operands present at this dim (right-aligned) whose size was the result's
// must have one symbolic size; those whose size was 1 must be 1 by construction (a constant 1),
// so the result's size is that one size on every run.
absl::StatusOr<Sym> Tracer::BroadcastSize(const std::vector<std::pair<ValueId, int64_t>>& operands, int64_t size) {
  Sym found;
  for (const auto& [in, d] : operands) {
    if (d < 0) continue;
    DT_ASSIGN_OR_RETURN(Sym s, SymbolicSize(in, d));
    if (s == nullptr) return Sym();
    const int64_t traced = graph_->value(in).meta.size(d);
    if (traced != size) {
      if (!SameSize(s, IntSym(1))) return Sym();  // a 1 that might not stay 1
      continue;
    }
    if (found != nullptr && !SameSize(found, s)) return Sym();
    found = s;
  }
  return found;
}

absl::StatusOr<Sym> Tracer::PointwiseSize(const Node& node, ValueId v, int64_t dim) {
  const int64_t rank = graph_->value(v).meta.ndim();
  std::vector<std::pair<ValueId, int64_t>> operands;
  for (int i = 0; i < node.op->pointwise.arity && i < static_cast<int>(node.args.size()); ++i) {
    const auto* in = std::get_if<ValueId>(&node.args[i].content);
    if (in != nullptr) operands.emplace_back(*in, dim - (rank - graph_->value(*in).meta.ndim()));
  }
  return BroadcastSize(operands, graph_->value(v).meta.size(dim));
}

absl::StatusOr<Sym> Tracer::ReducedSize(const Node& node, int64_t dim) {
  const auto* in = std::get_if<ValueId>(&node.args[0].content);
  if (in == nullptr || node.args.size() < 3) return Sym();
  const auto* dims_arg = std::get_if<ArgValue>(&node.args[1].content);
  const auto* keep_arg = std::get_if<ArgValue>(&node.args[2].content);
  const auto* keep = keep_arg ? std::get_if<Scalar>(keep_arg) : nullptr;
  if (dims_arg == nullptr || keep == nullptr) return Sym();
  std::optional<Dims> dims;
  if (const auto* d = std::get_if<Dims>(dims_arg)) dims = *d;
  const int64_t in_rank = graph_->value(*in).meta.ndim();
  auto reduced = NormalizeReductionDims(dims, in_rank);
  if (!reduced.ok()) return Sym();
  auto is_reduced = [&](int64_t d) { return std::find(reduced->begin(), reduced->end(), d) != reduced->end(); };
  if (keep->ToBool()) return is_reduced(dim) ? IntSym(1) : SymbolicSize(*in, dim);
  for (int64_t d = 0, kept = 0; d < in_rank; ++d) {
    if (is_reduced(d)) continue;
    if (kept++ == dim) return SymbolicSize(*in, d);
  }
  return Sym();
}

// A new shape's sizes are its arguments (constants, or run-time numbers); a -1 is the input's
// element count over the product of the others, as the op computes it.
absl::StatusOr<Sym> Tracer::ReshapedSize(const Node& node, int64_t dim) {
  const auto* in = std::get_if<ValueId>(&node.args[0].content);
  if (in == nullptr || node.args.size() < 2) return Sym();
  Dims sizes;
  std::vector<int> slots;
  if (const auto* ref = std::get_if<DimsRef>(&node.args[1].content)) {
    sizes = ref->sizes;
    slots = ref->slots;
  } else if (const auto* value = std::get_if<ArgValue>(&node.args[1].content); value && std::holds_alternative<Dims>(*value)) {
    sizes = std::get<Dims>(*value);
    slots.assign(sizes.size(), -1);
  } else {
    return Sym();
  }
  auto size_at = [&](size_t i) { return slots[i] >= 0 ? slot_syms_[slots[i]] : IntSym(sizes[i]); };
  if (dim >= static_cast<int64_t>(sizes.size())) return Sym();
  if (slots[dim] >= 0 || sizes[dim] != -1) return size_at(dim);
  Sym numel = IntSym(1);
  for (int64_t d = 0; d < graph_->value(*in).meta.ndim(); ++d) {
    DT_ASSIGN_OR_RETURN(Sym s, SymbolicSize(*in, d));
    if (s == nullptr) return Sym();
    DT_ASSIGN_OR_RETURN(numel, BinaryOp("*", numel, s));
  }
  Sym rest = IntSym(1);
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (static_cast<int64_t>(i) == dim) continue;
    DT_ASSIGN_OR_RETURN(rest, BinaryOp("*", rest, size_at(i)));
  }
  return BinaryOp("//", numel, rest);
}

// (..., m, k) @ (..., k, n) with both operands of rank 2 or more; the batch dims broadcast.
absl::StatusOr<Sym> Tracer::MatmulSize(const Node& node, ValueId v, int64_t dim) {
  const auto* a = std::get_if<ValueId>(&node.args[0].content);
  const auto* b = node.args.size() > 1 ? std::get_if<ValueId>(&node.args[1].content) : nullptr;
  if (a == nullptr || b == nullptr) return Sym();
  const int64_t ra = graph_->value(*a).meta.ndim(), rb = graph_->value(*b).meta.ndim();
  const int64_t rank = graph_->value(v).meta.ndim();
  if (ra < 2 || rb < 2) return Sym();
  if (dim == rank - 1) return SymbolicSize(*b, rb - 1);
  if (dim == rank - 2) return SymbolicSize(*a, ra - 2);
  // A batch dim: broadcast over the operands' batch dims (right-aligned, matrices left out).
  return BroadcastSize({{*a, dim - (rank - ra)}, {*b, dim - (rank - rb)}}, graph_->value(v).meta.size(dim));
}

}  // namespace dt::interpreter::trace
